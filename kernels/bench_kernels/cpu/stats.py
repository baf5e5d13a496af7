"""ANN recall and resampling kernels (bootstrap means, sign-flip randomization test)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from bench_kernels.cpu._shared import ann_recall_row, draw_index, resample_seed, splitmix64


@njit(cache=True, parallel=True)
def ann_recall(ann_ids, ann_dist, exact_ids, exact_dist, k):  # type: ignore[no-untyped-def]
    """Tie-tolerant ANN recall@k of every query (rows of the 2-D id/distance arrays)."""
    nq = ann_ids.shape[0]
    out = np.empty(nq, dtype=np.float64)
    for q in prange(nq):
        out[q] = ann_recall_row(ann_ids, ann_dist, exact_ids, exact_dist, q, k)
    return out


@njit(cache=True, parallel=True)
def bootstrap_means(values, resamples, seed):  # type: ignore[no-untyped-def]
    """Means of ``resamples`` bootstrap resamples of the columns of ``values`` (series x n).

    Every series uses the same resampled indices (resample b is seeded by (seed, b)), so
    paired statistics across series stay paired. Returns (series x resamples).
    """
    ns = values.shape[0]
    n = values.shape[1]
    out = np.empty((ns, resamples), dtype=np.float64)
    for b in prange(resamples):
        state = resample_seed(seed, b)
        acc = np.zeros(ns, dtype=np.float64)
        for _ in range(n):
            state, bits = splitmix64(state)
            i = draw_index(bits, n)
            for s in range(ns):
                acc[s] += values[s, i]
        for s in range(ns):
            out[s, b] = acc[s] / n
    return out


@njit(cache=True, parallel=True)
def sign_flip_count(deltas, resamples, seed, threshold):  # type: ignore[no-untyped-def]
    """How many of ``resamples`` random sign flips give |mean| >= threshold."""
    n = deltas.shape[0]
    count = 0
    for b in prange(resamples):
        state = resample_seed(seed, b)
        total = 0.0
        bits = np.uint64(0)
        for i in range(n):
            if i % 64 == 0:
                state, bits = splitmix64(state)
            if (bits >> np.uint64(i % 64)) & np.uint64(1):
                total -= deltas[i]
            else:
                total += deltas[i]
        if abs(total / n) >= threshold:
            count += 1
    return count
