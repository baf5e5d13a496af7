"""exact_topk against numpy; ann_recall_at_k's tie tolerance on hand-made score lists."""

from __future__ import annotations

import numpy as np
import pytest

from bench.index.base import SearchResult
from bench.index.exact import ann_recall_at_k, exact_topk


def _result(ids: list[list[int]], scores: list[list[float]]) -> SearchResult:
    return SearchResult(np.asarray(ids, dtype=np.int64), np.asarray(scores, dtype=np.float32))


def test_exact_topk_equals_numpy_brute_force() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((500, 16)).astype(np.float32)
    q = rng.standard_normal((30, 16)).astype(np.float32)
    got = exact_topk(x, q, 7)
    sims = q.astype(np.float64) @ x.T.astype(np.float64)
    want = np.argsort(-sims, axis=1)[:, :7]
    np.testing.assert_array_equal(got.ids, want)  # continuous scores: no ties
    np.testing.assert_allclose(got.scores, np.take_along_axis(sims, want, 1), rtol=1e-5)
    assert got.ids.dtype == np.int64 and got.scores.dtype == np.float32


def test_exact_topk_rejects_k_above_n() -> None:
    with pytest.raises(ValueError, match="k must be in"):
        exact_topk(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32), 4)


def test_ann_recall_tolerates_a_tie_at_the_cutoff() -> None:
    # exact top-2 of one query: doc 0 (1.0) then doc 1 (0.5); docs 2, 3 also score 0.5
    exact = _result([[0, 1]], [[1.0, 0.5]])
    tied = _result([[0, 3]], [[1.0, 0.5]])  # the other member of the tie: a hit
    assert ann_recall_at_k(tied, exact, 2).tolist() == [1.0]
    # within 1e-6 relative of the k-th score (float32 rounding of an equal score) still counts
    near = _result([[0, 2]], [[1.0, 0.5 * (1 - 5e-7)]])
    assert ann_recall_at_k(near, exact, 2).tolist() == [1.0]
    # beyond it does not: 1e-5 relative below the k-th score is a miss (1 of 2 found)
    below = _result([[0, 2]], [[1.0, 0.5 * (1 - 1e-5)]])
    assert ann_recall_at_k(below, exact, 2).tolist() == [0.5]


def test_ann_recall_reads_scores_as_higher_is_better() -> None:
    # were scores taken as distances, the far-off 0.1 would count as "closer than the k-th"
    exact = _result([[0, 1, 2]], [[0.9, 0.8, 0.7]])
    ann = _result([[0, 1, 9]], [[0.9, 0.8, 0.1]])
    assert ann_recall_at_k(ann, exact, 3).tolist() == pytest.approx([2 / 3])


def test_ann_recall_counts_missing_and_repeated_ids_as_misses() -> None:
    exact = _result([[0, 1, 2], [3, 4, 5]], [[0.9, 0.8, 0.7], [0.9, 0.8, 0.7]])
    ann = _result([[0, -1, -1], [3, 3, 4]], [[0.9, -3e38, -3e38], [0.9, 0.9, 0.8]])
    assert ann_recall_at_k(ann, exact, 3).tolist() == pytest.approx([1 / 3, 2 / 3])
    short = _result([[0], [3]], [[0.9], [0.9]])  # fewer columns than k
    assert ann_recall_at_k(short, exact, 3).tolist() == pytest.approx([1 / 3, 1 / 3])


def test_rescoring_replaces_approximate_scores() -> None:
    # PQ-like: doc 2 is returned with an over-estimated score; its true score is 0
    vectors = np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32)
    queries = np.array([[1, 0]], dtype=np.float32)
    exact = exact_topk(vectors, queries, 2)  # docs 0 (1.0), 1 (0.8)
    ann = _result([[0, 2]], [[1.0, 0.85]])
    assert ann_recall_at_k(ann, exact, 2).tolist() == [1.0]  # trusted the estimate
    rescored = ann_recall_at_k(ann, exact, 2, vectors=vectors, queries=queries)
    assert rescored.tolist() == [0.5]
    with pytest.raises(ValueError, match="both"):
        ann_recall_at_k(ann, exact, 2, vectors=vectors)


def test_ann_recall_on_exact_input_is_one() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((300, 8)).astype(np.float32)
    q = rng.standard_normal((20, 8)).astype(np.float32)
    exact = exact_topk(x, q, 10)
    assert np.all(ann_recall_at_k(exact, exact, 10) == 1.0)
    assert np.all(ann_recall_at_k(exact, exact, 5) == 1.0)
