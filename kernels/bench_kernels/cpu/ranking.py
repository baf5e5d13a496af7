"""Ranking and evaluation kernels: trec_eval order, duplicate checks, per-query metrics."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from bench_kernels.cpu._shared import (
    UNJUDGED,
    chunk_bounds,
    find_local,
    hash_row,
    index_slice,
    local_keys,
    metric_value,
    order_query,
    table_size,
)


@njit(cache=True, parallel=True)
def score_keys(scores):  # type: ignore[no-untyped-def]
    """uint32 keys that order like float32(scores) (host-side input of the CUDA twins)."""
    n = scores.shape[0]
    f32 = np.empty(n, dtype=np.float32)
    keys = f32.view(np.uint32)
    n_chunks, div = chunk_bounds(n)
    for c in prange(n_chunks):
        lo = c * n // div
        local_keys(scores, lo, (c + 1) * n // div - lo, f32[lo:], keys[lo:])
    return keys


@njit(cache=True, parallel=True)
def hash_rows(units):  # type: ignore[no-untyped-def]
    """uint64 hash of every id row."""
    n = units.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in prange(n):
        out[i] = hash_row(units, i)
    return out


@njit(cache=True, parallel=True)
def find_duplicates(units, offsets):  # type: ignore[no-untyped-def]
    """Per CSR slice: global index of its first repeated id, or -1."""
    nq = offsets.shape[0] - 1
    out = np.full(nq, -1, dtype=np.int64)
    if nq == 0:
        return out
    maxm = np.int64(np.max(offsets[1:] - offsets[:-1]))
    n_chunks, div = chunk_bounds(nq)
    for c in prange(n_chunks):
        hashes = np.empty(maxm, dtype=np.uint64)
        table = np.empty(table_size(maxm), dtype=np.uint64)
        slot_row = np.empty(table_size(maxm), dtype=np.int64)
        for q in range(c * nq // div, (c + 1) * nq // div):
            s = offsets[q]
            m = offsets[q + 1] - s
            for t in range(m):
                hashes[t] = hash_row(units, s + t)
            d = index_slice(units, s, m, hashes, table, slot_row)
            if d >= 0:
                out[q] = s + d
    return out


@njit(cache=True, parallel=True)
def rank_runs(units, offsets, scores, has_scores):  # type: ignore[no-untyped-def]
    """Order every query's slice by the trec_eval rule.

    Returns (perm, dup, nan): perm[offsets[q]:offsets[q+1]] are global indices of query q's ids
    in rank order; dup[q] / nan[q] are the global index of a repeated id / a NaN score, or -1.
    """
    nq = offsets.shape[0] - 1
    total = offsets[nq] if nq > 0 else 0
    perm = np.empty(total, dtype=np.int64)
    dup = np.full(nq, -1, dtype=np.int64)
    nan = np.full(nq, -1, dtype=np.int64)
    if nq == 0:
        return perm, dup, nan
    maxm = max(np.int64(1), np.int64(np.max(offsets[1:] - offsets[:-1])))
    n_chunks, div = chunk_bounds(nq)
    for c in prange(n_chunks):
        hashes = np.empty(maxm, dtype=np.uint64)
        table = np.empty(table_size(maxm), dtype=np.uint64)
        slot_row = np.empty(table_size(maxm), dtype=np.int64)
        key64 = np.empty(maxm, dtype=np.uint64)
        order = np.empty(maxm, dtype=np.int64)
        f32 = np.empty(maxm, dtype=np.float32)
        keys = f32.view(np.uint32)
        for q in range(c * nq // div, (c + 1) * nq // div):
            s = offsets[q]
            m = offsets[q + 1] - s
            for t in range(m):
                hashes[t] = hash_row(units, s + t)
            d = index_slice(units, s, m, hashes, table, slot_row)
            if d >= 0:
                dup[q] = s + d
            if has_scores:
                bad = local_keys(scores, s, m, f32, keys)
                if bad >= 0:
                    nan[q] = s + bad
            order_query(units, keys, s, m, has_scores, order, key64)
            for t in range(m):
                perm[s + t] = s + order[t]
    return perm, dup, nan


@njit(cache=True, parallel=True)
def prepare_qrels(units, offsets, rels):  # type: ignore[no-untyped-def]
    """Per qrels slice: id hashes, grades sorted high to low, and the first doc judged twice.

    Returns (hashes, ideal, dup): hashes[i] of id row i; ideal[offsets[q]:offsets[q+1]] holds
    query q's grades descending (nDCG's ideal ranking); dup[q] is the global row of a doc
    judged twice in q, or -1.
    """
    nq = offsets.shape[0] - 1
    total = offsets[nq] if nq > 0 else 0
    hashes = np.empty(total, dtype=np.uint64)
    ideal = np.empty(total, dtype=np.int32)
    dup = np.full(nq, -1, dtype=np.int64)
    maxm = np.int64(1)
    for q in range(nq):
        maxm = max(maxm, offsets[q + 1] - offsets[q])
    n_chunks, div = chunk_bounds(nq)
    for c in prange(n_chunks):
        table = np.empty(table_size(maxm), dtype=np.uint64)
        slot_row = np.empty(table_size(maxm), dtype=np.int64)
        for q in range(c * nq // div, (c + 1) * nq // div):
            s = offsets[q]
            m = offsets[q + 1] - s
            for t in range(m):
                hashes[s + t] = hash_row(units, s + t)
            d = index_slice(units, s, m, hashes[s:], table, slot_row)
            if d >= 0:
                dup[q] = s + d
            g = ideal[s : s + m]
            g[:] = rels[s : s + m]
            g.sort()
            for t in range(m // 2):
                g[t], g[m - 1 - t] = g[m - 1 - t], g[t]
    return hashes, ideal, dup


@njit(cache=True, parallel=True)
def evaluate_runs(  # type: ignore[no-untyped-def]
    run_units, run_offsets, run_scores, has_scores,
    q_units, q_offsets, q_hash, q_grades, ideal, num_rel,
    expected, run_of_query, families, ks, level,
):
    """Metrics of the expected queries.

    Qrels: CSR ``q_offsets`` over all qrels queries, ``q_grades`` their grades, ``q_hash`` and
    ``ideal`` from ``prepare_qrels``;
    ``expected[i]`` is the qrels query scored as row i, ``run_of_query[i]`` its run slice or -1
    (missing run: empty ranking). Returns (values[metric, i], dup[i], nan[i]): dup / nan >= 0
    is the global run row of a repeated id / NaN score (that query's values are not filled).
    """
    nq = expected.shape[0]
    nm = families.shape[0]
    out = np.zeros((nm, nq), dtype=np.float64)
    dup = np.full(nq, -1, dtype=np.int64)
    nan = np.full(nq, -1, dtype=np.int64)
    maxm = np.int64(1)
    for i in range(nq):
        j = run_of_query[i]
        if j >= 0:
            maxm = max(maxm, run_offsets[j + 1] - run_offsets[j])
    n_chunks, div = chunk_bounds(nq)
    for c in prange(n_chunks):
        hashes = np.empty(maxm, dtype=np.uint64)
        table = np.empty(table_size(maxm), dtype=np.uint64)
        slot_row = np.empty(table_size(maxm), dtype=np.int64)
        key64 = np.empty(maxm, dtype=np.uint64)
        order = np.empty(maxm, dtype=np.int64)
        grades = np.empty(maxm, dtype=np.int32)
        local = np.empty(maxm, dtype=np.int32)
        f32 = np.empty(maxm, dtype=np.float32)
        keys = f32.view(np.uint32)
        for i in range(c * nq // div, (c + 1) * nq // div):
            j = run_of_query[i]
            s = np.int64(0)
            m = np.int64(0)
            if j >= 0:
                s = run_offsets[j]
                m = run_offsets[j + 1] - s
            for t in range(m):
                hashes[t] = hash_row(run_units, s + t)
            d = index_slice(run_units, s, m, hashes, table, slot_row)
            if d >= 0:
                dup[i] = s + d
                continue
            if has_scores:
                bad = local_keys(run_scores, s, m, f32, keys)
                if bad >= 0:
                    nan[i] = s + bad
                    continue
            order_query(run_units, keys, s, m, has_scores, order, key64)
            q = expected[i]
            qs = q_offsets[q]
            qe = q_offsets[q + 1]
            # look the (few) judged docs up in the ranking's table, not every ranked doc
            # in the qrels
            for t in range(m):
                local[t] = UNJUDGED
            if m > 0:
                for e in range(qs, qe):
                    t = find_local(run_units, s, m, hashes, table, slot_row, q_hash[e],
                                    q_units, e)
                    if t >= 0:
                        local[t] = q_grades[e]
            for r in range(m):
                grades[r] = local[order[r]]
            for mi in range(nm):
                out[mi, i] = metric_value(
                    families[mi], ks[mi], grades, 0, m, num_rel[q], ideal, qs, qe - qs, level
                )
    return out, dup, nan
