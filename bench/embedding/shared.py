"""One encoder pass for the dense vectors and a token-index reranker's index of the chunks.

When the run's reranker keeps a token index (MaxSim, ``TokenIndexReranker``) of the SAME
encoder as the dense embedder (equal ``EncoderIdentity``: model, max length, resolved
precision, device; no document prefix), the chunks go through the model once: the token
states are kept for the index and the pooled vector is derived in the same call. Before,
the corpus was encoded twice, once per artifact.

The two results stay two artifacts, each with its own key:

- the dense vectors (``embed_docs``) are bit-identical to the embedder's own pass (same
  batches, same model call, the same normalisation; ``tests/embedding/test_shared.py``), so
  ``EmbedOp`` takes them through an ``unkeyed`` input and keeps its key: caches of earlier
  runs stay valid, and a run without the reranker hits the same artifact;
- the token index is NOT bit-identical to MaxSim's own pass, which batches by character
  length with its own batch size (different padding changes the last bits of a float32
  state, and a few float16 roundings with it), so the shared one is its own artifact
  (``SharedPassOp``, stage ``encode_shared``: the index files and the pooled vectors,
  ``vectors.npy`` and ``stats.json``, which ``EmbedOp`` copies when its own artifact is
  missing). The rerank lanes read it through ``SharedIndexOp``: stage ``rerank_index`` and
  the params of MaxSim's own index, with the shared pass as an ``UNNAMED`` input — its key
  differs from the stand-alone index's (no cached value computed the other way is ever
  reused), its ident does not, so the reranked configs keep their ids. A run without a
  matching dense embedder keeps MaxSim's own index, key and all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.chunking.base import ChunkTable
from bench.embedding.base import Embedder, EmbeddingStats, TokenStateEmbedder
from bench.pipeline.node import UNNAMED, OpTraits, Phase
from bench.rerank.base import TokenIndexReranker
from bench.telemetry.base import TimingLog


@dataclass(frozen=True)
class SharedPass:
    """What one pass over the chunks gave: the pooled vectors (float32 [n, dim], memory-mapped,
    with the pass's statistics) and the reranker's passage index."""

    vectors: np.ndarray
    stats: EmbeddingStats
    index: Any


@dataclass(frozen=True)
class SharedPassInputs:
    chunks: ChunkTable


def shares_pass(embedder: Embedder, reranker: object) -> bool:
    """Whether one document pass of ``embedder`` can fill ``reranker``'s token index."""
    # the reranker first: a runtime Protocol check reads every member, and the embedder's
    # ``dim`` loads its model (a config error found at plan time must not pay for that)
    if not (isinstance(reranker, TokenIndexReranker) and isinstance(embedder, TokenStateEmbedder)):
        return False
    mine = embedder.token_encoder("document")
    return mine is not None and mine == reranker.token_encoder()


@dataclass(frozen=True)
class SharedPassOp(OpTraits):
    """Chunks -> the reranker's token index and the dense document vectors, one pass."""

    embedder: TokenStateEmbedder
    reranker: TokenIndexReranker
    device: str
    stage: str = "encode_shared"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = SharedPassInputs

    def params(self) -> Mapping[str, Any]:
        return {"embedder": self.embedder.cache_params(),
                "reranker": self.reranker.cache_params(), "kind": type(self.reranker).__name__}

    def write(self, inputs: SharedPassInputs, directory: Path, timing: TimingLog) -> None:
        texts = inputs.chunks.text
        out = np.lib.format.open_memmap(directory / "vectors.npy", mode="w+", dtype=np.float32,
                                        shape=(len(texts), self.embedder.dim))
        with timing.measure("total", len(texts), sync_cuda=self.device == "cuda"):
            stats, rows = self.embedder.encode_with_tokens(
                texts, kind="document", out=out, token_rows=self.reranker.index_rows)
            self.reranker.write_index_rows(rows, directory)
        out.flush()
        del out
        stats = EmbeddingStats(**{**stats.__dict__,
                                  "shared_with": f"the {type(self.reranker).__name__} index"})
        (directory / "stats.json").write_text(json.dumps(stats.__dict__))

    def load(self, directory: Path, inputs: SharedPassInputs) -> SharedPass:
        return SharedPass(np.load(directory / "vectors.npy", mmap_mode="r"),
                          EmbeddingStats(**json.loads((directory / "stats.json").read_text())),
                          self.reranker.load_index(directory))


@dataclass(frozen=True)
class SharedIndexInputs:
    """The chunks (as ``RerankIndexOp`` reads them) and the pass that encoded them."""

    chunks: ChunkTable
    shared: SharedPass | None = field(default=None, metadata=UNNAMED)


@dataclass(frozen=True)
class SharedIndexOp(OpTraits):
    """The reranker's passage index, taken from the shared pass (in memory; the artifact is
    the pass's). Stage and params are ``RerankIndexOp``'s: the same index, computed in other
    batches."""

    reranker: TokenIndexReranker
    stage: str = "rerank_index"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = SharedIndexInputs

    def params(self) -> Mapping[str, Any]:
        return {"reranker": self.reranker.cache_params(), "kind": type(self.reranker).__name__}

    def run(self, inputs: SharedIndexInputs, timing: TimingLog) -> Any:
        assert inputs.shared is not None, "a SharedIndexOp node reads a shared pass"
        return inputs.shared.index
