"""Plan operation and expander of the `rewrite` stage.

``RewriteOp`` (query time, in memory): (a dense config's pool, the document vectors, the query
vectors) -> rewritten query vectors, one per query, from each query's first
``feedback_depth`` passages (the chunk behind each hit). The expander adds, after each dense
config, ``LABEL>rocchio`` — the run's retriever searching the rewritten vectors on the SAME
index at the same query-time setting — so every rewrite is paired per query with its raw
query, and filters, rerankers and answers apply to it like to any other config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bench.embedding.base import EmbeddingStats
from bench.embedding.stage import Embeddings
from bench.pipeline.lanes import ConfigKind, PlanState, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.retrieval.base import Pool
from bench.retrieval.stage import RetrieveOp
from bench.rewrite.base import VectorRewriter
from bench.telemetry.base import TimingLog

#: the latency stage of rewriting one query
REWRITE_STAGE = "rewrite"


@dataclass(frozen=True)
class RewriteInputs:
    pool: Pool
    docs: Embeddings
    queries: Embeddings


@dataclass(frozen=True)
class RewriteOp(OpTraits):
    rewriter: VectorRewriter
    stage: str = REWRITE_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = RewriteInputs
    latency_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {"rewriter": self.rewriter.cache_params(), "kind": type(self.rewriter).__name__}

    def _rewrite(self, inputs: RewriteInputs) -> Embeddings:
        hits, docs = inputs.pool.hits, np.asarray(inputs.docs.vectors)
        queries = np.asarray(inputs.queries.vectors)
        out = np.empty_like(queries, dtype=np.float32)
        chunks = hits.chunks()
        for q in range(hits.n_queries):
            s = int(hits.offsets[q])
            e = min(int(hits.offsets[q + 1]), s + self.rewriter.feedback_depth)
            rows = chunks[s:e]
            out[q] = self.rewriter.rewrite(queries[q], docs[rows[rows >= 0]])
        return Embeddings(out, EmbeddingStats(len(out), 0, 0.0, 0))

    def run(self, inputs: RewriteInputs, timing: TimingLog) -> Embeddings:
        with timing.measure("total", inputs.pool.hits.n_queries):
            return self._rewrite(inputs)

    def run_one(self, inputs: RewriteInputs, query: OneQuery, timer: QueryTimer
                ) -> Embeddings:
        with timer.measure(REWRITE_STAGE):
            return self._rewrite(inputs)


def expand(s: PlanState) -> PlanState:
    """After each dense config (not the exact reference), the same search of the rewritten
    query: ``LABEL>NAME``, a dense config whose params add the rewriter's."""
    rw: VectorRewriter | None = s.comps.get("rewriter")
    if rw is None:
        return s
    out = []
    for c in s.configs:
        out.append(c)
        if c.kind is not ConfigKind.DENSE or c.reference:
            continue
        first = c.leaf
        assert isinstance(first.op, RetrieveOp)
        vectors = Node.of(RewriteOp(rw), f"{rw.name} of {c.label}", pool=first,
                          docs=s.node("embed_docs"), queries=first.input("queries"))
        label = f"{c.label}>{rw.name}"
        search = Node.of(RetrieveOp(first.op.retriever, first.op.query_params, s.device),
                         label, index=first.input("index"), queries=vectors,
                         chunks=first.input("chunks"), data=first.input("data"))
        out.append(lane(label, ConfigKind.DENSE, search,
                        {**c.params, "rewriter": rw.name, **rw.cache_params()}))
    return s.with_configs(out)
