"""Plan operations of the `rerank` stage: score each pool once, sweep depths on the scores.

- ``RerankScoresOp`` (cached): the reranker scores the first ``max(depths)`` candidates of
  every query of one pool, one call per query (per-query samples, tagged with the query id).
  Scoring is pointwise, so every shallower depth is a prefix of these scores: retrieval runs
  once and the reranker scores once for all depths.
- ``RerankLatencyOp`` (cached): per-query latency AT each depth, measured by timed calls on
  exactly ``depth`` passages for a seeded sample of queries — never extrapolated from the
  deepest run.
- ``RerankOp`` (in memory): the reranked pool at one depth: the first ``depth`` candidates
  reordered by reranker score (float32 desc, doc id desc on ties; below ``score_threshold``
  dropped when one is configured), the rest of the pool after them in its original order.
  Scores of the output pool are rank-derived (strictly decreasing) so the exported TREC run
  holds exactly this order; the reranker's raw scores stay in the ``rerank_scores`` artifact.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.chunking.base import ChunkTable, chunk_text_field
from bench.data.base import Dataset
from bench.http.client import (
    REQUESTS_FILE,
    RecordsRequests,
    RemoteError,
    save_records,
    summary_line,
)
from bench.pipeline.lanes import ConfigKind, ConfigSpec, PlanState, lane
from bench.pipeline.node import (
    Node,
    OneQuery,
    OpTraits,
    Phase,
    QueryTimer,
    mark_incomplete,
    read_incomplete,
)
from bench.rerank.base import IndexedReranker, Reranker
from bench.retrieval.base import Hits, Pool, order_key, trec_order
from bench.telemetry.base import TimingLog

log = logging.getLogger("bench")

#: a remote reranker that failed this many queries in a row (after each one's retries) is
#: taken to be gone: the rest of the pass is not asked and carries status ``failed``
MAX_FAILURES_IN_A_ROW = 3
#: queries timed per depth for the per-depth latency (a seeded sample)
LATENCY_QUERIES = 50
#: latency stages: the reranker scoring a query's candidates, then the reorder
RERANK_STAGE = "rerank"
RERANK_CUT_STAGE = "rerank_cut"


@dataclass(frozen=True)
class RerankScores:
    """Reranker scores of each query's first candidates: ``scores[offsets[q]:offsets[q+1]]``
    align with the first ``offsets[q+1] - offsets[q]`` hits of query q in the pool."""

    offsets: np.ndarray  # int64 [n_queries + 1]
    scores: np.ndarray  # float32
    #: queries a remote reranker did not score (no scores: ``failed`` / ``timeout`` /
    #: ``invalid``), by query id; their reranked configs carry that status
    incomplete: Mapping[str, str] = field(default_factory=dict)


def passages(pool: Hits, chunks: ChunkTable, dataset: Dataset, q: int, depth: int) -> list[str]:
    """Texts of query q's first ``depth`` candidates: the chunk behind each hit, or the whole
    document where the pool does not know the chunk."""
    s = int(pool.offsets[q])
    e = min(int(pool.offsets[q + 1]), s + depth)
    cidx = pool.chunks()[s:e]
    docs = pool.doc_idx[s:e]
    return [chunks.text[int(c)] if c >= 0 else chunk_text_field(dataset.documents[int(d)])
            for c, d in zip(cidx, docs, strict=True)]


def _reranker_params(reranker: Reranker) -> dict[str, Any]:
    return {"reranker": reranker.cache_params(), "kind": type(reranker).__name__}


@dataclass(frozen=True)
class RerankIndexInputs:
    chunks: ChunkTable


@dataclass(frozen=True)
class RerankIndexOp(OpTraits):
    """ChunkTable -> the passage index of an ``IndexedReranker`` (token or passage vectors of
    every chunk, encoded once at index time like the dense index)."""

    reranker: IndexedReranker
    stage: str = "rerank_index"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = RerankIndexInputs

    def params(self) -> Mapping[str, Any]:
        return _reranker_params(self.reranker)  # type: ignore[arg-type]

    def write(self, inputs: RerankIndexInputs, directory: Path, timing: TimingLog) -> None:
        with timing.measure("total", len(inputs.chunks)):
            self.reranker.index_passages(inputs.chunks.text, directory)

    def load(self, directory: Path, inputs: RerankIndexInputs) -> Any:
        return self.reranker.load_index(directory)


def score_query(reranker: Reranker, index: Any, query: str, pool: Hits, chunks: ChunkTable,
                dataset: Dataset, q: int, depth: int) -> np.ndarray:
    """Scores of query q's first ``depth`` candidates: from the passage index when the
    reranker has one and every candidate's chunk is known, else from the passage texts."""
    s = int(pool.offsets[q])
    e = min(int(pool.offsets[q + 1]), s + depth)
    rows = pool.chunks()[s:e].astype(np.int64)
    if index is not None and isinstance(reranker, IndexedReranker) and (rows >= 0).all():
        (scores,) = reranker.score_indexed([query], index, [rows])
    else:
        (scores,) = reranker.score([query], [passages(pool, chunks, dataset, q, depth)])
    scores = np.asarray(scores, dtype=np.float32)
    if scores.shape != (e - s,):
        raise ValueError(f"reranker {reranker.name} returned {scores.shape} scores for "
                         f"{e - s} passages")
    return scores


@dataclass(frozen=True)
class RerankInputs:
    """A pool to rerank, its chunk texts and corpus, and the reranker's passage index (an
    ``IndexedReranker``'s; absent otherwise)."""

    pool: Pool
    chunks: ChunkTable
    data: Dataset
    passage_index: Any = None


@dataclass(frozen=True)
class PendingScores:
    """Per query, the shared scoring pass is not done ahead: the cut scores exactly its own
    depth (a server reranking at depth 20 scores 20 passages, not the sweep's deepest)."""

    reranker: Reranker
    inputs: RerankInputs

    def score(self, query: OneQuery, depth: int, timer: QueryTimer) -> RerankScores:
        i = self.inputs
        with timer.measure(RERANK_STAGE):
            scores = score_query(self.reranker, i.passage_index, query.text, i.pool.hits,
                                 i.chunks, i.data, 0, depth)
        return RerankScores(np.asarray([0, len(scores)], dtype=np.int64), scores)


@dataclass(frozen=True)
class RerankScoresOp(OpTraits):
    """(RerankInputs) -> every query's first ``depth`` candidates scored, once for all the
    depths cut from it (cached). Per query: ``PendingScores`` — the cut scores its depth."""

    reranker: Reranker
    depth: int
    device: str
    stage: str = "rerank_scores"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = RerankInputs
    work_stages: ClassVar[tuple[str, ...]] = (RERANK_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {**_reranker_params(self.reranker), "depth": self.depth}

    def run_one(self, inputs: RerankInputs, query: OneQuery, timer: QueryTimer
                ) -> PendingScores:
        return PendingScores(self.reranker, inputs)

    def write(self, inputs: RerankInputs, directory: Path, timing: TimingLog) -> None:
        chunks, dataset, index = inputs.chunks, inputs.data, inputs.passage_index
        hits: Hits = inputs.pool.hits
        offsets = np.zeros(hits.n_queries + 1, dtype=np.int64)
        out: list[np.ndarray] = []
        lost: dict[str, str] = {}  # queries a remote reranker did not score
        in_a_row = 0
        for q, query in enumerate(dataset.queries):
            n = min(int(hits.offsets[q + 1] - hits.offsets[q]), self.depth)
            if n and in_a_row >= MAX_FAILURES_IN_A_ROW:  # the server is gone: stop asking
                lost[query.query_id], n = "failed", 0
            elif n:
                try:
                    with timing.measure("query", n, sync_cuda=self.device == "cuda",
                                        query_id=query.query_id):
                        scores = score_query(self.reranker, index, query.text, hits, chunks,
                                             dataset, q, self.depth)
                except RemoteError as exc:  # no answer: no latency sample either
                    lost[query.query_id], n = exc.status, 0
                    in_a_row += 1
                    if in_a_row == 1 or in_a_row == MAX_FAILURES_IN_A_ROW:
                        log.warning("stage %-10s %s%s", "rerank", exc.one_line(),
                                    f"; {in_a_row} queries failed in a row: the rest are "
                                    "not asked (status failed)"
                                    if in_a_row == MAX_FAILURES_IN_A_ROW else "")
                else:
                    in_a_row = 0
                    out.append(scores)
            offsets[q + 1] = offsets[q] + n
        if lost:
            mark_incomplete(directory, lost, f"{len(lost)} of {len(dataset.queries)} queries "
                                             "not reranked")
        np.save(directory / "offsets.npy", offsets, allow_pickle=False)
        np.save(directory / "scores.npy",
                np.concatenate(out) if out else np.zeros(0, np.float32), allow_pickle=False)
        if isinstance(self.reranker, RecordsRequests):  # a remote reranker's requests
            records = self.reranker.take_records()
            save_records(records, directory / REQUESTS_FILE)
            log.info("stage %-10s %s: %s", "rerank", self.reranker, summary_line(records))

    def load(self, directory: Path, inputs: RerankInputs) -> RerankScores:
        return RerankScores(np.load(directory / "offsets.npy", allow_pickle=False),
                            np.load(directory / "scores.npy", allow_pickle=False),
                            read_incomplete(directory))


@dataclass(frozen=True)
class RerankLatencyOp(OpTraits):
    """Per-query latency of the reranker AT one depth on a seeded query sample (its samples,
    stage ``rerank``, count end to end): a measurement, no serving work."""

    reranker: Reranker
    depth: int
    device: str
    n_queries: int = LATENCY_QUERIES
    seed: int = 0
    stage: str = RERANK_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = RerankInputs
    work_stages: ClassVar[tuple[str, ...]] = (RERANK_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {**_reranker_params(self.reranker), "depth": self.depth,
                "n_queries": self.n_queries, "seed": self.seed}

    def work_queries(self, n_queries: int) -> int:
        return min(self.n_queries, n_queries)

    def write(self, inputs: RerankInputs, directory: Path, timing: TimingLog) -> None:
        chunks, dataset, index = inputs.chunks, inputs.data, inputs.passage_index
        hits: Hits = inputs.pool.hits
        candidates = np.flatnonzero(np.diff(hits.offsets) > 0)
        rng = np.random.default_rng(self.seed)
        take = min(self.n_queries, len(candidates))
        sample: np.ndarray = (np.sort(rng.choice(candidates, size=take, replace=False)) if take
                              else np.zeros(0, np.int64))
        for q in sample:
            query = dataset.queries[int(q)]
            n = min(int(hits.offsets[q + 1] - hits.offsets[q]), self.depth)
            try:
                with timing.measure("query", n, sync_cuda=self.device == "cuda",
                                    query_id=query.query_id):
                    score_query(self.reranker, index, query.text, hits, chunks, dataset,
                                int(q), self.depth)
            except RemoteError as exc:  # a measurement cut short: kept for this run only
                log.warning("stage %-10s latency at depth %d: measured on %d of %d queries: "
                            "%s", "rerank", self.depth, len(timing.samples), len(sample),
                            exc.one_line())
                mark_incomplete(directory, {}, "the reranker stopped answering")
                break
        (directory / "sample.txt").write_text(
            "\n".join(dataset.queries[int(q)].query_id for q in sample))

    def load(self, directory: Path, inputs: RerankInputs) -> None:
        return None


@dataclass(frozen=True)
class CutInputs:
    """The scores (batch: ``RerankScores`` of every query; per query: ``PendingScores``),
    the pool they rank, the depth's latency measurement (no value) and the corpus."""

    scores: RerankScores | PendingScores
    pool: Pool
    latency: None
    data: Dataset


@dataclass(frozen=True)
class RerankOp(OpTraits):
    depth: int
    score_threshold: float | None
    stage: str = RERANK_CUT_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = CutInputs
    latency_stages: ClassVar[tuple[str, ...]] = (RERANK_STAGE, RERANK_CUT_STAGE)
    work_stages: ClassVar[tuple[str, ...]] = (RERANK_CUT_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {"depth": self.depth, "score_threshold": self.score_threshold}

    def run(self, inputs: CutInputs, timing: TimingLog) -> Pool:
        assert isinstance(inputs.scores, RerankScores)
        return self._cut(inputs.scores, inputs.pool, order_key(inputs.data.doc_ids),
                         [q.query_id for q in inputs.data.queries])

    def run_one(self, inputs: CutInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        pending = inputs.scores
        assert isinstance(pending, PendingScores), "per query, the cut scores its own depth"
        scores = pending.score(query, self.depth, timer)
        return timer.time(RERANK_CUT_STAGE,
                          lambda: self._cut(scores, inputs.pool, query.id_key,
                                            [query.query.query_id]))

    def _cut(self, scores: RerankScores, pool: Pool, id_key: np.ndarray,
             qids: list[str]) -> Pool:
        hits: Hits = pool.hits
        rows: list[np.ndarray] = []
        offsets = np.zeros(hits.n_queries + 1, dtype=np.int64)
        for q in range(hits.n_queries):
            s, e = int(hits.offsets[q]), int(hits.offsets[q + 1])
            if scores.incomplete and qids[q] in scores.incomplete:  # no ranking, a status
                rows.append(np.zeros(0, np.int64))
                offsets[q + 1] = offsets[q]
                continue
            n_scored = int(scores.offsets[q + 1] - scores.offsets[q])
            d = min(self.depth, n_scored, e - s)
            top = np.arange(s, s + d)
            sc = scores.scores[scores.offsets[q] : scores.offsets[q] + d]
            order = top[trec_order(hits.doc_idx[top], sc, id_key)]
            if self.score_threshold is not None:
                keep = sc[order - s] >= np.float32(self.score_threshold)
                order = order[keep]
            rows.append(np.concatenate([order, np.arange(s + d, e)]))
            offsets[q + 1] = offsets[q] + len(rows[-1])
        flat = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)
        # rank-derived scores: strictly decreasing within each query, exact in float32
        position = np.arange(len(flat)) - np.repeat(offsets[:-1], np.diff(offsets))
        ranked = (np.float32(1 << 20) - position).astype(np.float32)
        return Pool(hits.take(offsets, flat, ranked), pool.chunk_result,
                    **pool.statuses(lost=scores.incomplete))


def rerank_nodes(reranker: Reranker, pool: Node, chunk: Node, data: Node, *, label: str,
                 device: str, passage_index: Node | None = None
                 ) -> list[tuple[str, dict[str, Any], Node]]:
    """The scores node (shared by every depth), then per depth its latency and cut nodes.
    ``passage_index``: the reranker's index where another stage builds it (the embedding
    stage's pass shared with the dense vectors); else its own ``RerankIndexOp``."""
    depths = sorted(reranker.depths())
    if passage_index is None and isinstance(reranker, IndexedReranker):
        passage_index = Node.of(RerankIndexOp(reranker), f"{reranker.name} passage index",
                                chunks=chunk)
    inputs = {"pool": pool, "chunks": chunk, "data": data, "passage_index": passage_index}
    scores = Node.of(RerankScoresOp(reranker, depths[-1], device),
                     f"{reranker.name} scores of {label} top {depths[-1]}", **inputs)
    out = []
    for d in depths:
        lat = Node.of(RerankLatencyOp(reranker, d, device),
                      f"{reranker.name} latency at depth {d}", **inputs)
        cut = Node.of(RerankOp(d, reranker.score_threshold), f"{label}>{reranker.name}@{d}",
                      scores=scores, pool=pool, latency=lat, data=data)
        out.append((cut.label, {"reranker": reranker.name, "depth": d}, cut))
    return out


def expand(s: PlanState) -> PlanState:
    """After each config, one reranked config per depth (scored once at the deepest)."""
    r = s.comps.reranker
    if r is None:
        return s
    out: list[ConfigSpec] = []
    for c in s.configs:
        out.append(c)
        for label, params, node in rerank_nodes(r, c.leaf, s.node("chunk"), s.node("data"),
                                                label=c.label, device=s.device,
                                                passage_index=s.nodes.get("passage_index")):
            out.append(lane(label, ConfigKind.RERANKED, node, {**c.params, **params},
                            parent_id=c.config_id, filter_pair=c.filter_pair))
    return s.with_configs(out)
