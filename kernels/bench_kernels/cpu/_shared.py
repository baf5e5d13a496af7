"""Compiled leaves and per-query helpers shared by the CPU kernels.

The leaves of ``_core.py`` are compiled here once for the CPU; the helpers work on one query's
slice with scratch arrays the caller allocates once per chunk of queries.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bench_kernels import _core

cmp_rows = njit(cache=True)(_core.cmp_rows)
hash_row = njit(cache=True)(_core.hash_row)
metric_value = njit(cache=True)(_core.metric_value)
ann_recall_row = njit(cache=True)(_core.ann_recall_row)
splitmix64 = njit(cache=True)(_core.splitmix64)
resample_seed = njit(cache=True)(_core.resample_seed)
draw_index = njit(cache=True)(_core.draw_index)

MASK32 = np.uint64(0xFFFFFFFF)
SHIFT32 = np.uint64(32)
UNJUDGED = np.int32(_core.UNJUDGED)
SIGN32 = np.uint32(0x80000000)


@njit(cache=True)
def chunk_bounds(n):  # type: ignore[no-untyped-def]
    """Split n items into chunks, each allocating its scratch once.

    A fixed count (not one per thread: reading the thread count defeats numba's cache) that is
    large enough to balance any CPU's threads and small enough to make allocation negligible.
    """
    n_chunks = min(n, 256)
    return n_chunks, max(n_chunks, 1)


@njit(cache=True)
def table_size(m):  # type: ignore[no-untyped-def]
    """Slots of the per-query hash table: a power of two >= 2m (load factor <= 1/2)."""
    size = 16
    while size < 2 * m:
        size *= 2
    return size


@njit(cache=True)
def index_slice(units, s, m, hashes, table, slot_row):  # type: ignore[no-untyped-def]
    """Build an open-addressing table of the ids units[s:s+m]; return the local index of the
    first id equal to an earlier one, or -1.

    Expects hashes[:m] filled. ``table`` holds hash | 1 (0 marks an empty slot) and
    ``slot_row`` the local index stored there; every id gets a slot, so the table also serves
    lookups (:func:`find_local`). Only a repeated hash (a duplicate or, rarely, a collision)
    pays for an exact pairwise check.
    """
    size = table_size(m)
    mask = np.uint64(size - 1)
    for t in range(size):
        table[t] = 0
    repeated = False
    for t in range(m):
        h = hashes[t] | np.uint64(1)
        slot = h & mask
        while table[slot] != 0:
            if table[slot] == h:
                repeated = True
            slot = (slot + np.uint64(1)) & mask
        table[slot] = h
        slot_row[slot] = t
    if repeated:
        for t in range(1, m):
            for u in range(t):
                if hashes[u] == hashes[t] and cmp_rows(units, s + u, units, s + t) == 0:
                    return t
    return -1


@njit(cache=True)
def find_local(units, s, m, hashes, table, slot_row, h, other, row):  # type: ignore[no-untyped-def]
    """Local index in units[s:s+m] (indexed by index_slice) of id ``other[row]`` (hash h),
    or -1."""
    mask = np.uint64(table_size(m) - 1)
    key = h | np.uint64(1)
    slot = key & mask
    while table[slot] != 0:
        if table[slot] == key:
            t = slot_row[slot]
            if hashes[t] == h and cmp_rows(units, s + t, other, row) == 0:
                return t
        slot = (slot + np.uint64(1)) & mask
    return -1


@njit(cache=True)
def local_keys(scores, s, m, f32, keys):  # type: ignore[no-untyped-def]
    """keys[:m] = order-preserving uint32 of float32(scores[s:s+m]); local index of a NaN or -1.

    float32, because trec_eval compares scores as float; -0.0 becomes +0.0 (they compare
    equal, so the doc id must break their tie). ``keys`` is a uint32 view of ``f32``.
    """
    nan_at = -1
    for t in range(m):
        x = scores[s + t]
        if x != x and nan_at < 0:
            nan_at = t
        f32[t] = np.float32(x) + np.float32(0.0)
    for t in range(m):
        b = keys[t]
        keys[t] = ~b if b & SIGN32 else b | SIGN32
    return nan_at


@njit(cache=True)
def order_query(units, keys, s, m, has_scores, order, key64):  # type: ignore[no-untyped-def]
    """Write into order[:m] the local indices of units[s:s+m] in trec_eval order.

    ``keys[:m]``: the slice's score keys (see local_keys). Score key descending, then id
    descending on ties; without scores the given order is kept. Rankings already sorted by
    score (the usual case) skip the sort and only put their tie groups in id order.
    """
    for t in range(m):
        order[t] = t
    if not has_scores or m < 2:
        return
    by_score = True
    for t in range(1, m):
        if keys[t - 1] < keys[t]:
            by_score = False
            break
    if not by_score:
        for t in range(m):
            # ascending sort of (inverted key, position) = key descending, then position
            key64[t] = ((MASK32 - np.uint64(keys[t])) << SHIFT32) | np.uint64(t)
        kv = key64[:m]
        kv.sort()
        for t in range(m):
            order[t] = np.int64(kv[t] & MASK32)
    a = 0
    while a < m:
        b = a + 1
        while b < m and keys[order[b]] == keys[order[a]]:
            b += 1
        # insertion sort of the tie group by id descending; groups are small
        for x in range(a + 1, b):
            cur = order[x]
            y = x - 1
            while y >= a and cmp_rows(units, s + order[y], units, s + cur) < 0:
                order[y + 1] = order[y]
                y -= 1
            order[y + 1] = cur
        a = b
