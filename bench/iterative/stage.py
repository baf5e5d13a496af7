"""Plan operation and expander of the `iterative` stage.

``IterateOp`` (query time, cached): (a dense config's first-search pool, the index, the
chunk table, the dataset) -> ``LoopPool``: per query, the loop of ``bench.iterative.loop``
run on top of the first search — each further turn encodes its query with the run's embedder
(one query, as a server does), searches the SAME index at the same query-time setting and
folds chunks into documents — with the merged evidence as the pool and each query's
``LoopRecord``. The batch value is the per-query loop run for every query in turn (the same
code as ``run_one``), each timed as one ``iterate`` sample, so a config's end-to-end latency
is its first search plus its loop, query by query. It is cached, not recomputed per run: a
wall-time limit makes a loop's outcome depend on the machine, and answers cached downstream
must have been generated from the evidence this node holds.

The expander adds, after each dense config that searches the raw query (not the exact
reference), ``LABEL>iterative[...]``, a dense config whose parent is that one-shot config:
the two are paired per query on the same corpus (comparisons.parquet), and rerankers,
filters and answers apply to the iterative config like to any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.chunking.base import ChunkTable
from bench.data.base import Dataset, Query
from bench.embedding.base import Embedder
from bench.embedding.stage import encode_one_query
from bench.index.stage import IndexArtifact
from bench.iterative.base import LoopRecord, Turn
from bench.iterative.loop import IterativeLoop, Ranking, run_loop
from bench.iterative.supplied import SuppliedReformulations
from bench.pipeline.lanes import ConfigKind, PlanState, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.retrieval.base import Hits, Pool, Retriever, order_key
from bench.retrieval.search import DenseSearch
from bench.retrieval.stage import RetrieveOp
from bench.telemetry.base import TimingLog

#: the latency stage of a query's further turns (encode, search, fold, merge)
ITERATE_STAGE = "iterate"


@dataclass(frozen=True)
class LoopPool(Pool):
    """The merged evidence of every query's loop, and what each loop did (dataset order)."""

    records: tuple[LoopRecord, ...] = ()


@dataclass(frozen=True)
class IterateInputs:
    pool: Pool
    index: IndexArtifact
    chunks: ChunkTable
    data: Dataset


@dataclass(frozen=True)
class IterateOp(OpTraits):
    loop: IterativeLoop
    embedder: Embedder
    retriever: Retriever
    query_params: Mapping[str, int | float]
    stage: str = ITERATE_STAGE
    version: str = "2"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = IterateInputs
    latency_stages: ClassVar[tuple[str, ...]] = (ITERATE_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (ITERATE_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {"loop": self.loop.cache_params(), "embedder": self.embedder.cache_params(),
                "retriever": self.retriever.cache_params(),
                "query_params": dict(self.query_params)}

    def _one(self, inputs: IterateInputs, q: int, query: Query, id_key: np.ndarray
             ) -> tuple[Ranking, LoopRecord]:
        hits = inputs.pool.hits
        s, e = int(hits.offsets[q]), int(hits.offsets[q + 1])
        first = (hits.doc_idx[s:e], hits.scores[s:e], hits.chunks()[s:e])
        dense = DenseSearch.over(inputs.index.built, inputs.chunks, self.retriever,
                                 self.query_params, id_key)

        def search(text: str) -> Ranking:
            h, _ = dense(encode_one_query(self.embedder, text))
            return h.doc_idx, h.scores, h.chunks()

        def count_tokens(text: str) -> int:
            return len(self.embedder.tokenizer.offsets([text])[0])

        return run_loop(self.loop, query, first, search, count_tokens, id_key,
                        self.retriever.k)

    @staticmethod
    def _pool(rows: list[tuple[Ranking, LoopRecord]]) -> LoopPool:
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r[0][0]) for r in rows], out=offsets[1:])

        def cat(i: int, dtype: type) -> np.ndarray:
            return (np.concatenate([r[0][i] for r in rows]).astype(dtype) if rows
                    else np.zeros(0, dtype))

        records = tuple(r[1] for r in rows)
        status = {r.query_id: r.status for r in records if r.status != "ok"}
        return LoopPool(Hits(offsets, cat(0, np.int32), cat(1, np.float32), cat(2, np.int32)),
                        None, records, status=status or None)

    def write(self, inputs: IterateInputs, directory: Path, timing: TimingLog) -> None:
        id_key = order_key(inputs.data.doc_ids)
        rows = []
        for q, query in enumerate(inputs.data.queries):
            with timing.measure("query", 1, query_id=query.query_id):
                rows.append(self._one(inputs, q, query, id_key))
        pool = self._pool(rows)
        pool.hits.save(directory / "hits.parquet")
        (directory / "records.json").write_text(json.dumps([asdict(r) for r in pool.records]))

    def load(self, directory: Path, inputs: IterateInputs) -> LoopPool:
        """The stored loop: a wall-time limit makes a loop's outcome depend on the machine,
        so the pool is stored like a measurement and every config and later run built on
        this node reads the same evidence (the latency pass re-times loops fresh)."""
        hits = Hits.load(directory / "hits.parquet", len(inputs.data.queries))
        records = tuple(
            LoopRecord(r["query_id"], tuple(Turn(**t) for t in r["turns"]), r["calls"],
                       r["tokens"], r["wall_ms"], r["stop"], tuple(r["evidence"]))
            for r in json.loads((directory / "records.json").read_text()))
        status = {r.query_id: r.status for r in records if r.status != "ok"}
        return LoopPool(hits, None, records, status=status or None)

    def run_one(self, inputs: IterateInputs, query: OneQuery, timer: QueryTimer) -> LoopPool:
        with timer.measure(ITERATE_STAGE):
            row = self._one(inputs, 0, query.query, query.id_key)
        return self._pool([row])


def expand(s: PlanState) -> PlanState:
    """After each dense config searching the raw query (not the exact reference), its
    iterative twin ``LABEL>NAME`` (parent: the one-shot config)."""
    loop: IterativeLoop | None = s.comps.get("iterative")
    if loop is None:
        return s
    rf = loop.reformulator
    if isinstance(rf, SuppliedReformulations):  # a row naming no loaded query: input error
        rf.check({q.query_id for q in (*s.dataset.queries, *s.held_out)})
    out = []
    for c in s.configs:
        out.append(c)
        if (c.kind is not ConfigKind.DENSE or c.reference
                or not isinstance(c.leaf.op, RetrieveOp)):
            continue
        first = c.leaf
        assert isinstance(first.op, RetrieveOp)
        if first.input("queries").key != s.node("embed_queries").key:
            continue  # a rewritten query's search: the loop reformulates the query's text
        label = f"{c.label}>{loop.name}"
        node = Node.of(IterateOp(loop, s.comps.embedder, first.op.retriever,
                                 first.op.query_params), label, pool=first,
                       index=first.input("index"), chunks=first.input("chunks"),
                       data=first.input("data"))
        out.append(lane(label, ConfigKind.DENSE, node,
                        {**c.params, "iterative": loop.name, **loop.cache_params()},
                        parent_id=c.config_id))
    return s.with_configs(out)
