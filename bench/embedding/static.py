"""Static embedder: the mean of a model's input token embeddings, no transformer layers.

The [vocab, dim] token-embedding matrix is read from an ONNX encoder (by default the only 2-D
float initializer with one row per tokenizer entry, e.g. paraphrase-MiniLM-L3's
``word_embeddings.weight``); a text's vector is the mean of its tokens' rows (special tokens
excluded), L2-normalised. A table lookup, so ~100x faster than running the encoder on CPU and
far weaker in quality: it exists for scale tests (``scripts/bench_scale.py``) where the
embedder is not what is being measured, and as a bag-of-wordpieces floor in comparisons.
CPU only.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from bench.config.build import OptionError
from bench.embedding.base import EmbeddingStats
from bench.embedding.batching import TokenIds, encode_by_length, merge_stats, with_prefix
from bench.embedding.onnx import FastTokenizer, resolve_onnx_path, resolve_tokenizer_file
from bench.errors import ConfigError, MissingDependencyError

#: texts a call tokenises and encodes at a time (their token ids, about 100 bytes a passage,
#: are alive together): a 10M-passage corpus pass holds one block's, not the corpus'
ENCODE_BLOCK = 1 << 20


class StaticEmbedder:
    """Mean-pooled token embeddings of ``model`` (a packaged ONNX name or an ``.onnx`` path).

    initializer: the ONNX initializer holding the [vocab, dim] matrix (null: the only 2-D
    float one with as many rows as the tokenizer has entries). max_seq_length: tokens per text
    (no special tokens); longer texts are truncated and counted. batch_size changes speed only.
    """

    def __init__(
        self,
        *,
        model: str,
        tokenizer: str = "packaged:all-MiniLM-L6-v2",
        initializer: str | None = None,
        normalize: bool = True,
        max_seq_length: int = 128,
        batch_size: int = 256,
        query_prefix: str = "",
        document_prefix: str = "",
        device: str = "cpu",
    ) -> None:
        if batch_size < 1:
            raise OptionError("batch_size", f"must be >= 1, got {batch_size}")
        if max_seq_length < 1:
            raise OptionError("max_seq_length", f"must be >= 1 token, got {max_seq_length}")
        if device != "cpu":
            raise OptionError("device", f"the static embedder is a CPU table lookup; got "
                                        f"{device!r} (use device=cpu)")
        self.model_name = model
        self.tokenizer_name = tokenizer
        self.initializer = initializer
        self.normalize = normalize
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix

    @cached_property
    def _tokenizer(self) -> FastTokenizer:
        return FastTokenizer(resolve_tokenizer_file(self.tokenizer_name), self.tokenizer_name)

    @property
    def tokenizer(self) -> FastTokenizer:
        return self._tokenizer

    @cached_property
    def matrix(self) -> np.ndarray:
        """The float32 [vocab, dim] token-embedding table."""
        try:
            import onnx
            from onnx import numpy_helper
        except ImportError:
            raise MissingDependencyError("onnx", "onnx", "embedder=static") from None
        path: Path = resolve_onnx_path(self.model_name)
        graph = onnx.load(str(path)).graph
        vocab = self.tokenizer.vocab_size
        floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)
        if self.initializer is not None:
            found = [t for t in graph.initializer if t.name == self.initializer]
            if not found:
                raise ConfigError("embedder.initializer",
                                  f"{self.initializer!r} is not an initializer of the model")
        else:
            found = [t for t in graph.initializer if len(t.dims) == 2 and t.dims[0] == vocab
                     and t.data_type in floats]
            if len(found) != 1:
                raise ConfigError("embedder.initializer", f"{len(found)} 2-D float "
                                  f"initializers have {vocab} rows (the tokenizer's "
                                  "vocabulary); name one")
        table = np.asarray(numpy_helper.to_array(found[0]), dtype=np.float32)
        if table.ndim != 2 or table.shape[0] < vocab:
            raise ConfigError("embedder.initializer", f"shape {table.shape} is not "
                                                      f"[>= {vocab}, dim]")
        return table

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def cache_params(self) -> dict[str, object]:
        return {"backend": "static", "model": self.model_name, "tokenizer": self.tokenizer_name,
                "initializer": self.initializer, "normalize": self.normalize,
                "max_seq_length": self.max_seq_length, "query_prefix": self.query_prefix,
                "document_prefix": self.document_prefix}

    def _run(self, ids: TokenIds, rows: list[int]) -> np.ndarray:
        try:
            from scipy.sparse import csr_matrix
        except ImportError:
            raise MissingDependencyError("scipy", "cpu", "embedder=static") from None
        lengths = np.asarray([ids.offsets[r + 1] - ids.offsets[r] for r in rows], dtype=np.int64)
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        cols = (np.concatenate([ids.row(r) for r in rows]).astype(np.int64)
                if indptr[-1] else np.zeros(0, dtype=np.int64))
        # mean pooling as one sparse [batch, vocab] x [vocab, dim] product (weights 1/length):
        # ~10x faster than segment sums over the gathered rows
        weights = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)
        pool = csr_matrix((weights, cols, indptr), shape=(len(rows), self.matrix.shape[0]))
        out = np.asarray(pool @ self.matrix, dtype=np.float32)
        if self.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def shard_order(self, texts: Sequence[str], *, kind: str) -> None:
        """None: a row's vector is its own sparse row times the table, whatever its batch."""
        return None

    def encode(self, texts: Sequence[str], *, kind: str, out: np.ndarray) -> EmbeddingStats:
        if len(texts) > ENCODE_BLOCK:
            # a row's vector does not depend on its batch (shard_order): blocks give the one
            # call's bits, and only one block's token ids are alive at a time
            return merge_stats([self.encode(texts[lo : lo + ENCODE_BLOCK], kind=kind,
                                            out=out[lo : lo + ENCODE_BLOCK])
                                for lo in range(0, len(texts), ENCODE_BLOCK)])
        inputs = with_prefix(texts, kind=kind, query_prefix=self.query_prefix,
                             document_prefix=self.document_prefix)
        # tokenised once: the counts sort the batches, the kept ids are the model input
        ids = self.tokenizer.ids(inputs, keep=self.max_seq_length)
        return encode_by_length(range(len(inputs)), ids.counts, batch_size=self.batch_size,
                                limit=self.max_seq_length,
                                encode_batch=lambda rows: self._run(ids, rows), out=out,
                                kind=kind)
