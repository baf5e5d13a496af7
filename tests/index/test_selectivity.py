"""The filtered-ANN selectivity figures, on hand-checkable inputs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from bench.index.base import SearchResult
from bench.index.selectivity import (
    FilterWorkload,
    build_faiss_hnsw,
    column_name,
    exact_filtered,
    exclusion,
    filtered_recall,
    measure,
    workload,
)


def _unit(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_column_names() -> None:
    assert [column_name(s) for s in (0.5, 0.1, 0.01, 0.001)] == ["b50", "b10", "b1", "b0_1"]


def test_workload_keeps_one_gold_doc_eligible_and_the_share() -> None:
    n_docs = 2000
    chunk_doc = np.repeat(np.arange(n_docs), 2)  # two chunks per document
    gold = [np.asarray([i, i + 1]) for i in range(0, 200, 2)] + [np.zeros(0, np.int64)]
    wl = workload(chunk_doc, n_docs, gold, 0.1, seed=3)
    assert wl.n_buckets == 10 and wl.column == "b10"
    doc_bucket = wl.chunk_bucket[::2]
    assert (wl.chunk_bucket[1::2] == doc_bucket).all()  # chunks inherit their doc's bucket
    for i, g in enumerate(gold[:-1]):
        assert wl.values[i] in doc_bucket[g]  # a gold doc of every answerable query is in
    assert abs((wl.chunk_bucket == 0).mean() - 0.1) < 0.03
    again = workload(chunk_doc, n_docs, gold, 0.1, seed=3)
    assert (again.values == wl.values).all()  # seeded


def test_exact_filtered_is_brute_force_over_the_bucket() -> None:
    x, q = _unit(300, 8, 0), _unit(12, 8, 1)
    chunk_doc = np.arange(300)
    wl = workload(chunk_doc, 300, [np.zeros(0, np.int64)] * 12, 0.01, seed=0)
    ref = exact_filtered(x, q, wl, 5)
    for i in range(12):
        rows = wl.eligible(i)
        want = rows[np.argsort(-(x[rows] @ q[i]), kind="stable")][:5]
        got = ref.ids[i][ref.ids[i] >= 0]
        assert got.tolist() == want.tolist()  # fewer than 5 when the bucket is small
        assert (ref.ids[i][len(want):] == -1).all()


def test_filtered_recall_divides_by_what_can_be_returned() -> None:
    # query 0: 2 eligible rows, both returned -> 1.0 even with k=3; query 1: 1 of 3 -> 1/3
    x = np.eye(4, dtype=np.float32)
    q = np.asarray([[1, 0.5, 0, 0], [0, 0, 1, 0.5]], dtype=np.float32)
    exact = SearchResult(ids=np.asarray([[0, 1, -1], [2, 3, 1]]),
                         scores=np.asarray([[1, .5, -np.inf], [1, .5, 0]], np.float32))
    got = SearchResult(ids=np.asarray([[1, 0, -1], [2, -1, -1]]),
                       scores=np.zeros((2, 3), np.float32))
    wl = FilterWorkload(0.5, "b50", 2, np.zeros(4, np.int32), np.zeros(2, np.int64))
    np.testing.assert_allclose(filtered_recall(got, exact, x, q, 3, wl), [1.0, 1 / 3])
    # a returned row tying the exact k-th score counts (query 1: row 0 ties row 1 at 0)
    tie = SearchResult(ids=np.asarray([[0, 1, -1], [2, 3, 0]]),
                       scores=np.zeros((2, 3), np.float32))
    np.testing.assert_allclose(filtered_recall(tie, exact, x, q, 3, wl), [1.0, 1.0])
    # ... but not when it lies outside the query's bucket (an unauthorized hit, not a tie)
    wl1 = FilterWorkload(0.5, "b50", 2, np.asarray([1, 0, 0, 0], np.int32),
                         np.zeros(2, np.int64))
    np.testing.assert_allclose(filtered_recall(tie, exact, x, q, 3, wl1), [0.5, 2 / 3])


def test_exclusion_counts_eligible_gold_never_returned() -> None:
    chunk_doc = np.asarray([0, 0, 1, 2, 3])
    res = SearchResult(ids=np.asarray([[0, 2], [4, -1], [3, -1]]),
                       scores=np.zeros((3, 2), np.float32))
    eligible = [np.asarray([0, 2]), np.asarray([1]), np.zeros(0, np.int64)]
    q_rate, d_rate, n = exclusion(res, chunk_doc, eligible)
    # q0 returns doc 0 (not 2): not excluded, 1 doc missed; q1 misses its only gold doc
    assert (q_rate, d_rate, n) == (1 / 2, 2 / 3, 2)
    assert exclusion(res, chunk_doc, [np.zeros(0, np.int64)] * 3) == (None, None, 0)


class _DropFirst:
    """A filtered search that is exact but drops each list's best row and adds one
    ineligible row: recall, short lists and unauthorized hits are known in advance."""

    def __init__(self, x: np.ndarray, bucket: np.ndarray) -> None:
        self.x, self.bucket = x, bucket

    def search_where(self, queries: np.ndarray, k: int, params: Mapping[str, int | float], *,
                     column: str, values: np.ndarray) -> SearchResult:
        rows = np.flatnonzero(self.bucket == values[0])
        order = rows[np.argsort(-(self.x[rows] @ queries[0]))][1:k]
        bad = np.flatnonzero(self.bucket != values[0])[:1]
        ids = np.full((1, k), -1, dtype=np.int64)
        got = np.concatenate([order, bad])[:k]
        ids[0, :len(got)] = got
        return SearchResult(ids=ids, scores=np.zeros((1, k), np.float32))


def test_measure_reports_what_the_engine_did() -> None:
    n = 400
    x, q = _unit(n, 8, 0), _unit(20, 8, 1)
    chunk_doc = np.arange(n)
    gold = [np.asarray([i]) for i in range(20)]
    wl = workload(chunk_doc, n, gold, 0.5, seed=0)
    row = measure("drop-first", _DropFirst(x, wl.chunk_bucket), {}, x, q, wl, 10, gold,
                  chunk_doc, warmup=0)
    assert row.n_queries == 20 and row.unauthorized == 20  # one ineligible row each
    assert row.recall == pytest.approx(0.9)  # 9 of the exact 10 (best one dropped)
    assert row.short_share == 0.0  # 10 rows came back, one of them ineligible
    assert row.p50_ms > 0 and row.p50_ms <= row.p95_ms <= row.p99_ms
    assert row.n_gold_queries == 20  # each query's bucket holds its gold doc


def test_faiss_idselector_returns_only_eligible_rows() -> None:
    x, q = _unit(500, 16, 0), _unit(10, 16, 1)
    bucket = (np.arange(500) % 10).astype(np.int32)
    fa, info = build_faiss_hnsw(x, {"b10": bucket}, m=8, ef_construction=40)
    assert info.n_vectors == 500 and info.index_bytes > 0
    res = fa.search_where(q, 10, {"ef_search": 64}, column="b10", values=np.full(10, 4))
    got = res.ids[res.ids >= 0]
    assert len(got) == 100 and (bucket[got] == 4).all()
