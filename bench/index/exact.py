"""Exact top-k (the ANN reference) and tie-tolerant ANN recall against it (docs/metrics.md).

The reference is brute-force inner product, computed once per dataset x embedder and cached by
the caller. Recall follows ann-benchmarks: per query, |ANN top-k ∩ exact top-k| / k, where a
returned item whose score is within 1e-6 relative of the exact k-th score also counts (so an
ANN index that returns a different member of a tie at the cut-off is not penalised).

Scores are inner products: HIGHER is better. The recall kernel (``bench_kernels.api.
ann_recall``) takes distances (lower is better), so scores are negated before the call:
``-s <= -s_k + 1e-6*|s_k|``  <=>  ``s >= s_k - 1e-6*|s_k|``.
"""

from __future__ import annotations

import numpy as np

from bench.index.base import SearchResult


def exact_topk(vectors: np.ndarray, queries: np.ndarray, k: int) -> SearchResult:
    """Exact top-``k`` by inner product of float32 ``queries`` [n_q, d] over ``vectors`` [N, d].

    Uses faiss' flat inner-product search (``faiss.knn``: the brute-force routine behind
    ``IndexFlatIP.search``, called directly so a memory-mapped corpus is not copied into an
    index). Ties at equal score are ordered as faiss returns them; recall is tie-tolerant, so
    that order does not matter.
    """
    from bench.index.faiss_index import _faiss

    faiss = _faiss()
    if vectors.ndim != 2 or queries.ndim != 2 or vectors.shape[1] != queries.shape[1]:
        raise ValueError(f"need [N, d] vectors and [n_q, d] queries, got {vectors.shape} "
                         f"and {queries.shape}")
    if not 1 <= k <= vectors.shape[0]:
        # with k > N faiss pads with id -1 / score -FLT_MAX, and that k-th "score" would make
        # every returned item count as a tie in the recall
        raise ValueError(f"k must be in [1, N={vectors.shape[0]}], got {k}")
    xb = np.ascontiguousarray(vectors, dtype=np.float32)
    xq = np.ascontiguousarray(queries, dtype=np.float32)
    scores, ids = faiss.knn(xq, xb, k, metric=faiss.METRIC_INNER_PRODUCT)
    return SearchResult(ids=ids.astype(np.int64, copy=False),
                        scores=scores.astype(np.float32, copy=False))


def ann_recall_at_k(
    ann: SearchResult,
    exact: SearchResult,
    k: int,
    *,
    vectors: np.ndarray | None = None,
    queries: np.ndarray | None = None,
) -> np.ndarray:
    """Tie-tolerant recall@k of every query (float64 [n_q]), ANN vs exact.

    ``ann`` may hold fewer than ``k`` columns (missing ones count as misses); ``exact`` needs at
    least ``k``. Ids < 0 (no result) and repeated ids count nothing.

    The tolerance compares the ANN item's score with the exact k-th score, so that score must
    be exact. Graph and IVF-Flat indexes return exact inner products, but compressed ones
    (PQ, SQ) return approximations: pass ``vectors`` and ``queries`` (the ones the exact
    reference was computed from) and the returned items are rescored exactly first.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if ann.ids.shape[0] != exact.ids.shape[0]:
        raise ValueError(f"ann has {ann.ids.shape[0]} queries, exact {exact.ids.shape[0]}")
    from bench_kernels.api import ann_recall

    ann_scores = np.asarray(ann.scores, dtype=np.float64)
    if (vectors is None) != (queries is None):
        raise ValueError("pass both vectors and queries to rescore, or neither")
    if vectors is not None and queries is not None:
        ann_scores = _rescore(ann.ids[:, :k], vectors, queries)
    # negate: the kernel's rule is for distances, where lower is better
    return np.asarray(
        ann_recall(ann.ids[:, :k], -ann_scores[:, :k], exact.ids, -np.asarray(exact.scores), k)
    )


def _rescore(ids: np.ndarray, vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Exact inner products (float32 arithmetic, like the flat reference) of returned ids."""
    valid = ids >= 0
    rows = np.asarray(vectors[np.where(valid, ids, 0).ravel()], dtype=np.float32)
    rows = rows.reshape(*ids.shape, -1)
    q = np.asarray(queries, dtype=np.float32)[:, None, :]
    scores = np.einsum("qkd,qkd->qk", rows, np.broadcast_to(q, rows.shape))
    # a missing result has no score; the kernel skips negative ids, so any value does
    return np.where(valid, scores, -np.inf).astype(np.float64)
