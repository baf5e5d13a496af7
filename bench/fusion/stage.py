"""Plan operation of the `fusion` stage: one fusion variant over two cached pools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.fusion.base import Fusion, FusionVariant
from bench.retrieval.base import Hits, Pool, order_key
from bench.telemetry.base import TimingLog


def carry_chunks(fused: Hits, sources: Sequence[Hits], n_docs: int) -> Hits:
    """``fused`` with the chunk behind each hit taken from the first source pool that holds
    the same (query, document)."""
    q = np.repeat(np.arange(fused.n_queries, dtype=np.int64), np.diff(fused.offsets))
    want = q * n_docs + fused.doc_idx.astype(np.int64)
    chunk = np.full(len(want), -1, dtype=np.int32)
    for src in reversed(sources):  # earlier sources win: they are written last
        sq = np.repeat(np.arange(src.n_queries, dtype=np.int64), np.diff(src.offsets))
        keys = sq * n_docs + src.doc_idx.astype(np.int64)
        order = np.argsort(keys, kind="stable")
        keys, src_chunk = keys[order], src.chunks()[order]
        pos = np.clip(np.searchsorted(keys, want), 0, max(len(keys) - 1, 0))
        found = (keys[pos] == want) if len(keys) else np.zeros(len(want), bool)
        chunk[found] = src_chunk[pos[found]]
    return Hits(fused.offsets, fused.doc_idx, fused.scores, chunk)


@dataclass(frozen=True)
class FuseOp:
    """(dense Pool, lexical Pool, Dataset) -> fused Pool for one variant (cheap: not cached)."""

    fusion: Fusion
    variant: FusionVariant
    k: int
    stage: str = "fusion"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        # the variant names its method ("rrf(k=60)"), whichever Fusion set listed it, so the
        # same fusion in another set is the same config
        return {"variant": self.variant.name, "params": [list(p) for p in self.variant.params],
                "k": self.k}

    def run(self, inputs: Sequence[Any], timing: TimingLog) -> Pool:
        dense, sparse, dataset = inputs
        with timing.measure("total", dense.hits.n_queries):
            fused = self.fusion.fuse(dense.hits, sparse.hits, self.variant,
                                     id_key=order_key(dataset.doc_ids), k=self.k)
        return Pool(carry_chunks(fused, [dense.hits, sparse.hits], len(dataset.documents)))
