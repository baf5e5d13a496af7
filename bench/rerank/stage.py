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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.chunking.base import ChunkTable, chunk_text_field
from bench.data.base import Dataset
from bench.pipeline.node import Node
from bench.rerank.base import IndexedReranker, Reranker
from bench.retrieval.base import Hits, Pool, order_key, trec_order
from bench.telemetry.base import TimingLog

#: queries timed per depth for the per-depth latency (a seeded sample)
LATENCY_QUERIES = 50


@dataclass(frozen=True)
class RerankScores:
    """Reranker scores of each query's first candidates: ``scores[offsets[q]:offsets[q+1]]``
    align with the first ``offsets[q+1] - offsets[q]`` hits of query q in the pool."""

    offsets: np.ndarray  # int64 [n_queries + 1]
    scores: np.ndarray  # float32


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
class RerankIndexOp:
    """ChunkTable -> the passage index of an ``IndexedReranker`` (token or passage vectors of
    every chunk, encoded once at index time like the dense index)."""

    reranker: IndexedReranker
    stage: str = "rerank_index"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return _reranker_params(self.reranker)  # type: ignore[arg-type]

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        (chunks,) = inputs
        with timing.measure("total", len(chunks)):
            self.reranker.index_passages(chunks.text, directory)

    def load(self, directory: Path, inputs: Sequence[Any]) -> Any:
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
class RerankScoresOp:
    reranker: Reranker
    depth: int
    device: str
    stage: str = "rerank_scores"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {**_reranker_params(self.reranker), "depth": self.depth}

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        pool, chunks, dataset, *index = inputs
        hits: Hits = pool.hits
        offsets = np.zeros(hits.n_queries + 1, dtype=np.int64)
        out: list[np.ndarray] = []
        for q, query in enumerate(dataset.queries):
            n = min(int(hits.offsets[q + 1] - hits.offsets[q]), self.depth)
            if n:
                with timing.measure("query", n, sync_cuda=self.device == "cuda",
                                    query_id=query.query_id):
                    scores = score_query(self.reranker, index[0] if index else None,
                                         query.text, hits, chunks, dataset, q, self.depth)
                out.append(scores)
            offsets[q + 1] = offsets[q] + n
        np.save(directory / "offsets.npy", offsets, allow_pickle=False)
        np.save(directory / "scores.npy",
                np.concatenate(out) if out else np.zeros(0, np.float32), allow_pickle=False)

    def load(self, directory: Path, inputs: Sequence[Any]) -> RerankScores:
        return RerankScores(np.load(directory / "offsets.npy", allow_pickle=False),
                            np.load(directory / "scores.npy", allow_pickle=False))


@dataclass(frozen=True)
class RerankLatencyOp:
    reranker: Reranker
    depth: int
    device: str
    n_queries: int = LATENCY_QUERIES
    seed: int = 0
    stage: str = "rerank"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {**_reranker_params(self.reranker), "depth": self.depth,
                "n_queries": self.n_queries, "seed": self.seed}

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        pool, chunks, dataset, *index = inputs
        hits: Hits = pool.hits
        candidates = np.flatnonzero(np.diff(hits.offsets) > 0)
        rng = np.random.default_rng(self.seed)
        take = min(self.n_queries, len(candidates))
        sample: np.ndarray = (np.sort(rng.choice(candidates, size=take, replace=False)) if take
                              else np.zeros(0, np.int64))
        for q in sample:
            query = dataset.queries[int(q)]
            n = min(int(hits.offsets[q + 1] - hits.offsets[q]), self.depth)
            with timing.measure("query", n, sync_cuda=self.device == "cuda",
                                query_id=query.query_id):
                score_query(self.reranker, index[0] if index else None, query.text, hits,
                            chunks, dataset, int(q), self.depth)
        (directory / "sample.txt").write_text(
            "\n".join(dataset.queries[int(q)].query_id for q in sample))

    def load(self, directory: Path, inputs: Sequence[Any]) -> None:
        return None


@dataclass(frozen=True)
class RerankOp:
    depth: int
    score_threshold: float | None
    stage: str = "rerank_cut"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {"depth": self.depth, "score_threshold": self.score_threshold}

    def run(self, inputs: Sequence[Any], timing: TimingLog) -> Pool:
        scores, pool, _latency, dataset = inputs
        hits: Hits = pool.hits
        id_key = order_key(dataset.doc_ids)
        rows: list[np.ndarray] = []
        offsets = np.zeros(hits.n_queries + 1, dtype=np.int64)
        for q in range(hits.n_queries):
            s, e = int(hits.offsets[q]), int(hits.offsets[q + 1])
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
        return Pool(hits.take(offsets, flat, ranked), pool.chunk_result)


def rerank_nodes(reranker: Reranker, pool: Node, chunk: Node, data: Node, *, label: str,
                 device: str) -> list[tuple[str, dict[str, Any], Node]]:
    """The scores node (shared by every depth), then per depth its latency and cut nodes."""
    depths = sorted(reranker.depths())
    inputs: tuple[Node, ...] = (pool, chunk, data)
    if isinstance(reranker, IndexedReranker):
        inputs += (Node(RerankIndexOp(reranker), (chunk,), f"{reranker.name} passage index"),)
    scores = Node(RerankScoresOp(reranker, depths[-1], device), inputs,
                  f"{reranker.name} scores of {label} top {depths[-1]}")
    out = []
    for d in depths:
        lat = Node(RerankLatencyOp(reranker, d, device), inputs,
                   f"{reranker.name} latency at depth {d}")
        cut = Node(RerankOp(d, reranker.score_threshold), (scores, pool, lat, data),
                   f"{label}>{reranker.name}@{d}")
        out.append((cut.label, {"reranker": reranker.name, "depth": d}, cut))
    return out
