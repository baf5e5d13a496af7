"""Reciprocal rank fusion kernel."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from bench_kernels.cpu._shared import chunk_bounds, cmp_rows, hash_row


@njit(cache=True)
def _order_fused(units, rows, f32, n):  # type: ignore[no-untyped-def]
    """Slot order of fused docs (id rows rows[:n], scores f32[:n]): score desc, id desc."""
    perm = np.argsort(-f32[:n], kind="mergesort")
    a = 0
    while a < n:
        b = a + 1
        while b < n and f32[perm[b]] == f32[perm[a]]:
            b += 1
        for x in range(a + 1, b):
            cur = perm[x]
            y = x - 1
            while y >= a and cmp_rows(units, rows[perm[y]], units, rows[cur]) < 0:
                perm[y + 1] = perm[y]
                y -= 1
            perm[y + 1] = cur
        a = b
    return perm


@njit(cache=True, parallel=True)
def rrf_fuse(units, starts, ends, k):  # type: ignore[no-untyped-def]
    """Reciprocal rank fusion of ranked lists sharing one id matrix.

    ``starts[q, r]:ends[q, r]`` is query q's ranking from run r (already in rank order, cut at
    depth; empty when absent). score(d) = sum_r 1/(k + rank_r(d)), summed in run order so the
    float64 result does not depend on thread or hash order. Returns (ids, scores, counts,
    base): query q's fused ranking is ids/scores[base[q]:base[q]+counts[q]] (ids are rows of
    ``units``), ordered by float32 score desc, id desc.
    """
    nq = starts.shape[0]
    nr = starts.shape[1]
    base = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        size = 0
        for r in range(nr):
            size += ends[q, r] - starts[q, r]
        base[q + 1] = base[q] + size
    # slots past counts[q] stay -1 / 0.0 so results are deterministic (and equal the twin's)
    out_ids = np.full(base[nq], -1, dtype=np.int64)
    out_scores = np.zeros(base[nq], dtype=np.float64)
    counts = np.zeros(nq, dtype=np.int64)
    maxm = np.int64(1)
    for q in range(nq):
        maxm = max(maxm, base[q + 1] - base[q])
    n_chunks, div = chunk_bounds(nq)
    for c in prange(n_chunks):
        rows = np.empty(maxm, dtype=np.int64)
        contrib = np.empty(maxm, dtype=np.float64)
        hashes = np.empty(maxm, dtype=np.uint64)
        slot_of = np.empty(maxm, dtype=np.int64)
        slot_row = np.empty(maxm, dtype=np.int64)
        sums = np.empty(maxm, dtype=np.float64)
        f32 = np.empty(maxm, dtype=np.float32)
        for q in range(c * nq // div, (c + 1) * nq // div):
            m = 0
            for r in range(nr):
                for i in range(starts[q, r], ends[q, r]):
                    rows[m] = i
                    contrib[m] = 1.0 / (k + (i - starts[q, r] + 1))
                    hashes[m] = hash_row(units, i)
                    slot_of[m] = -1
                    m += 1
            idx = np.argsort(hashes[:m])
            n = 0
            a = 0
            while a < m:
                b = a + 1
                while b < m and hashes[idx[b]] == hashes[idx[a]]:
                    b += 1
                for x in range(a, b):
                    ex = idx[x]
                    if slot_of[ex] >= 0:
                        continue
                    slot_of[ex] = n
                    slot_row[n] = rows[ex]
                    for y in range(x + 1, b):
                        ey = idx[y]
                        if slot_of[ey] < 0 and cmp_rows(units, rows[ex], units, rows[ey]) == 0:
                            slot_of[ey] = n
                    n += 1
                a = b
            for u in range(n):
                sums[u] = 0.0
            for t in range(m):
                sums[slot_of[t]] += contrib[t]
            for u in range(n):
                f32[u] = np.float32(sums[u])
            perm = _order_fused(units, slot_row, f32, n)
            o = base[q]
            for u in range(n):
                out_ids[o + u] = slot_row[perm[u]]
                out_scores[o + u] = sums[perm[u]]
            counts[q] = n
    return out_ids, out_scores, counts, base
