"""Dense retrieval: search chunk vectors, fold chunks into their parent documents.

Latency is measured two ways, both reported: batch mode (throughput; QPS) and single-query
mode (per-query p50/p95/p99) — per-query latency derived from batch time is meaningless.
A sample times the index's search call only (the system's latency, not the harness's): query
slices are cut, progress is reported and results are copied outside the clock; folding chunks
into documents is timed as its own stage (``fold``) by the caller.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from tqdm.auto import tqdm

from bench.config.build import OptionError
from bench.index.base import BuiltIndex, SearchResult
from bench.retrieval.base import Hits, fold_chunks
from bench.telemetry.base import TimingLog, cuda_sync

LatencyMode = Literal["batch", "single", "both"]


class DenseRetriever:
    """Top-``k`` documents per query from a vector index over chunks.

    chunk_depth: chunks fetched per query before folding into documents (null: 3 * k, capped
    at the number of chunks), so that k distinct documents survive the dedup.
    latency_mode: batch | single | both. batch_size: queries per batch in batch mode.
    """

    def __init__(
        self,
        *,
        k: int = 100,
        chunk_depth: int | None = None,
        batch_size: int = 256,
        latency_mode: LatencyMode = "both",
    ) -> None:
        if k < 1:
            raise OptionError("k", f"must be >= 1, got {k}")
        if chunk_depth is not None and chunk_depth < k:
            raise OptionError("chunk_depth", f"must be >= k={k}, got {chunk_depth}")
        if batch_size < 1:
            raise OptionError("batch_size", f"must be >= 1, got {batch_size}")
        if latency_mode not in ("batch", "single", "both"):
            raise OptionError("latency_mode", "must be batch, single or both")
        self.k = k
        self.chunk_depth = chunk_depth
        self.batch_size = batch_size
        self.latency_mode = latency_mode

    def cache_params(self) -> dict[str, object]:
        # batch_size / latency_mode change timings, not results, but timings are part of the
        # cached artifact, so they are keyed too.
        return {
            "k": self.k,
            "chunk_depth": self.chunk_depth,
            "batch_size": self.batch_size,
            "latency_mode": self.latency_mode,
        }

    def depth(self, n_chunks: int) -> int:
        return min(n_chunks, self.chunk_depth if self.chunk_depth is not None else 3 * self.k)

    def search(
        self,
        index: BuiltIndex,
        query_vectors: np.ndarray,
        params: Mapping[str, int | float],
        *,
        n_chunks: int,
        timing: TimingLog,
        sync_cuda: bool = False,
        query_ids: Sequence[str] | None = None,
    ) -> SearchResult:
        """Chunk-level top-depth for every query, recording timing samples (single-query
        samples carry ``query_ids[i]``)."""
        depth = self.depth(n_chunks)
        n_q = len(query_vectors)
        ids = np.full((n_q, depth), -1, dtype=np.int64)
        scores = np.full((n_q, depth), -np.inf, dtype=np.float32)
        lost: dict[int, str] = {}  # rows a database server did not answer
        if self.latency_mode in ("batch", "both"):
            for b0 in tqdm(range(0, n_q, self.batch_size), desc="search batches", leave=False):
                q = query_vectors[b0 : b0 + self.batch_size]
                with timing.measure("batch", len(q), sync_cuda=sync_cuda):
                    res = index.search(q, depth, params)
                ids[b0 : b0 + len(q)] = res.ids
                scores[b0 : b0 + len(q)] = res.scores
                lost.update((b0 + r, st) for r, st in res.incomplete.items())
        if self.latency_mode in ("single", "both"):
            rows = [query_vectors[i : i + 1] for i in range(n_q)]
            keep = self.latency_mode == "single"
            clock = time.perf_counter
            for i, q1 in enumerate(rows):
                if sync_cuda:
                    cuda_sync()
                t0 = clock()
                res = index.search(q1, depth, params)
                if sync_cuda:
                    cuda_sync()
                ms = (clock() - t0) * 1000.0
                if 0 in res.incomplete:  # no answer: no latency sample either
                    if keep:
                        lost[i] = res.incomplete[0]
                    continue
                timing.add("query", 1, ms, None if query_ids is None else query_ids[i])
                if keep:
                    ids[i], scores[i] = res.ids[0], res.scores[0]
        return SearchResult(ids=ids, scores=scores, incomplete=lost)

    def fold(self, result: SearchResult, chunk_doc: np.ndarray, id_key: np.ndarray) -> Hits:
        return fold_chunks(result, chunk_doc, id_key, k=self.k)
