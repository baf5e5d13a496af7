"""Plan operation of the `fusion` stage: one fusion variant over two cached pools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bench.data.base import Dataset
from bench.fusion.base import Fusion, FusionVariant
from bench.pipeline.lanes import ConfigKind, PlanState, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.retrieval.base import Hits, Pool, order_key
from bench.telemetry.base import TimingLog

FUSION_STAGE = "fusion"


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
class FuseInputs:
    dense: Pool
    sparse: Pool
    data: Dataset


@dataclass(frozen=True)
class FuseOp(OpTraits):
    """(dense Pool, lexical Pool, Dataset) -> fused Pool for one variant (cheap: not cached)."""

    fusion: Fusion
    variant: FusionVariant
    k: int
    stage: str = FUSION_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = FuseInputs
    latency_stages: ClassVar[tuple[str, ...]] = (FUSION_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (FUSION_STAGE,)

    def params(self) -> Mapping[str, Any]:
        # the variant names its method ("rrf(k=60)"), whichever Fusion set listed it, so the
        # same fusion in another set is the same config
        return {"variant": self.variant.name, "params": [list(p) for p in self.variant.params],
                "k": self.k}

    def _fuse(self, inputs: FuseInputs, id_key: np.ndarray) -> Hits:
        return self.fusion.fuse(inputs.dense.hits, inputs.sparse.hits, self.variant,
                                id_key=id_key, k=self.k)

    def _carry(self, inputs: FuseInputs, fused: Hits) -> Pool:
        return Pool(carry_chunks(fused, [inputs.dense.hits, inputs.sparse.hits],
                                 len(inputs.data.documents)),
                    **inputs.dense.statuses(inputs.sparse))

    def run(self, inputs: FuseInputs, timing: TimingLog) -> Pool:
        with timing.measure("total", inputs.dense.hits.n_queries):
            fused = self._fuse(inputs, order_key(inputs.data.doc_ids))
        return self._carry(inputs, fused)

    def run_one(self, inputs: FuseInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        with timer.measure(FUSION_STAGE):  # a server pays the chunk carry-over too
            return self._carry(inputs, self._fuse(inputs, query.id_key))


def expand(s: PlanState) -> PlanState:
    """One fused config per fusion variant over the first dense lane and the BM25 lane."""
    f = s.comps.fusion
    dense = next((c for c in s.configs if c.kind is ConfigKind.DENSE and not c.reference),
                 None)
    if f is None or dense is None or "lexical" not in s.nodes:
        return s
    k = s.comps.retriever.k
    fused = [lane(v.name, ConfigKind.FUSED,
                  Node.of(FuseOp(f, v, k), v.name, dense=dense.leaf,
                          sparse=s.node("lexical"), data=s.node("data")), dict(v.params))
             for v in f.variants()]
    return s.with_configs([*s.configs, *fused])


def build(cfg: Any, device: str) -> dict[str, Any]:
    """The fusion option; fusing needs the lexical lane (checked before any work)."""
    from bench.config.build import build as build_option
    from bench.config.build import target_of
    from bench.errors import ConfigError

    fusion = build_option(cfg.fusion, "fusion")
    if fusion is not None and target_of(cfg.lexical, "lexical") is None:
        raise ConfigError("fusion", "fusing needs a lexical lane: set lexical=bm25")
    return {"fusion": fusion}
