"""Target-agnostic leaf functions, compiled twice: by ``cpu.py`` (``njit``) and ``cuda.py``
(``cuda.jit(device=True)``).

Leaves call no other function (a compiled leaf cannot call a sibling compiled for the other
target), allocate nothing, and use only scalars, array indexing and ``math``, so both targets
accept them. Integer constants are wrapped in ``np.uint64`` where the arithmetic is unsigned:
numba turns ``uint64 op int64`` into float64.

Doc ids reach kernels as "unit matrices": one row per id, UTF-8 bytes (uint8, from numpy ``S``)
or code points (uint32, from numpy ``U``), zero-padded. Code-point order equals UTF-8 byte
order, so comparing rows unit by unit is trec_eval's ``strcmp`` on the UTF-8 ids.

Adding a ranking metric: give it a family code below, a branch in ``metric_value`` (the one
place the kernels switch on a metric), and register it in ``bench/metrics/registry.py``.
"""

from __future__ import annotations

import math

import numpy as np

# Metric family codes shared with bench/metrics/registry.py.
NDCG = 0
NDCG_EXP = 1
RECALL = 2
PRECISION = 3
HIT_RATE = 4
MRR = 5
MAP = 6
R_PRECISION = 7
FAMILY_CODES = {
    "ndcg": NDCG,
    "ndcg_exp": NDCG_EXP,
    "recall": RECALL,
    "precision": PRECISION,
    "hit_rate": HIT_RATE,
    "mrr": MRR,
    "map": MAP,
    "r_precision": R_PRECISION,
}

#: Grade of a retrieved doc absent from the qrels: below any relevance level and any gain.
UNJUDGED = -2147483648

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


def cmp_rows(a, i, b, j):  # type: ignore[no-untyped-def]
    """strcmp of id row ``a[i]`` and id row ``b[j]`` (a zero unit ends an id): -1, 0 or 1."""
    wa = a.shape[1]
    wb = b.shape[1]
    w = wa if wa < wb else wb
    for t in range(w):
        x = a[i, t]
        y = b[j, t]
        if x != y:
            return -1 if x < y else 1
        if x == 0:
            return 0
    if wa > w and a[i, w] != 0:
        return 1
    if wb > w and b[j, w] != 0:
        return -1
    return 0


def hash_row(a, i):  # type: ignore[no-untyped-def]
    """64-bit FNV-1a hash of id row ``a[i]`` up to its first zero unit.

    Stops where ``cmp_rows`` stops, so rows equal under ``cmp_rows`` (whatever their padding
    width) hash equal. Collisions only cost time: every match is confirmed by ``cmp_rows``.
    (A position-weighted sum was tried: transposed digits collide far too often.)
    """
    h = _FNV_OFFSET
    for t in range(a.shape[1]):
        x = a[i, t]
        if x == 0:
            break
        h = (h ^ np.uint64(x)) * _FNV_PRIME
    return h


def metric_value(family, k, grades, g0, m, num_rel, ideal, i0, n_ideal, level):  # type: ignore[no-untyped-def]
    """One metric of one query (trec_eval semantics, see docs/metrics.md).

    ``grades[g0:g0+m]``: grade of each retrieved doc in rank order (``UNJUDGED`` if absent
    from the qrels). ``ideal[i0:i0+n_ideal]``: the query's judged grades sorted descending.
    ``num_rel``: judged docs with grade >= ``level``. ``k <= 0`` means no cutoff.
    nDCG gains ignore ``level`` and count every positive grade, as trec_eval's ``ndcg_cut``.
    """
    depth = m if (k <= 0 or k > m) else k
    # plain comparisons: tuple membership is not supported on every numba target
    if family == NDCG or family == NDCG_EXP:  # noqa: SIM109
        dcg = 0.0
        for r in range(depth):
            g = grades[g0 + r]
            if g > 0:
                gain = float(g) if family == NDCG else math.pow(2.0, float(g)) - 1.0
                dcg += gain / math.log2(r + 2.0)
        cut = n_ideal if (k <= 0 or k > n_ideal) else k
        idcg = 0.0
        for r in range(cut):
            g = ideal[i0 + r]
            if g > 0:
                gain = float(g) if family == NDCG else math.pow(2.0, float(g)) - 1.0
                idcg += gain / math.log2(r + 2.0)
        return dcg / idcg if idcg > 0.0 else 0.0
    if family == R_PRECISION:
        depth = m if num_rel > m else num_rel
    hits = 0
    first = 0
    ap = 0.0
    for r in range(depth):
        if grades[g0 + r] >= level:
            hits += 1
            if first == 0:
                first = r + 1
            ap += hits / (r + 1.0)
    if family == MRR:
        return 1.0 / first if first > 0 else 0.0
    if family == HIT_RATE:
        return 1.0 if hits > 0 else 0.0
    if family == PRECISION:
        return hits / float(k)
    if num_rel <= 0:
        return 0.0
    if family == MAP:
        return ap / num_rel
    # RECALL and R_PRECISION both divide by |rel|.
    return hits / float(num_rel)


def ann_recall_row(ann_ids, ann_dist, exact_ids, exact_dist, q, k):  # type: ignore[no-untyped-def]
    """Tie-tolerant recall@k of one query (ann-benchmarks' rule, 1e-6 relative).

    A returned id counts when it is in the exact top-k or its (exact) distance is within 1e-6
    relative of the exact k-th distance; negative ids (no result) and repeats count nothing.
    """
    kth = exact_dist[q, k - 1]
    threshold = kth + 1e-6 * abs(kth)
    n = ann_ids.shape[1] if ann_ids.shape[1] < k else k
    found = 0
    for t in range(n):
        doc = ann_ids[q, t]
        if doc < 0:
            continue
        repeat = False
        for u in range(t):
            if ann_ids[q, u] == doc:
                repeat = True
                break
        if repeat:
            continue
        hit = ann_dist[q, t] <= threshold
        if not hit:
            for u in range(k):
                if exact_ids[q, u] == doc:
                    hit = True
                    break
        if hit:
            found += 1
    return found / float(k)


def splitmix64(state):  # type: ignore[no-untyped-def]
    """One step of splitmix64: returns (next state, 64 random bits).

    A counter-based generator seeded per resample makes bootstrap results independent of the
    thread count and identical on CPU and GPU.
    """
    state = state + _GOLDEN
    z = state
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return state, z ^ (z >> np.uint64(31))


def resample_seed(seed, b):  # type: ignore[no-untyped-def]
    """Start state of resample ``b``: two splitmix64 finalisations of (seed, b).

    The start must be a HASH of b: with a linear start such as (b + 1) * golden, stream b + 1
    is stream b shifted by one step (splitmix64 adds golden per step), so consecutive
    resamples share all but one index and the bootstrap quantiles collapse. Self-contained
    (no call to splitmix64) because the leaves here are compiled separately per backend.
    """
    z = np.uint64(seed) * _MIX1 + (np.uint64(b) + np.uint64(1)) * _GOLDEN
    for _ in range(2):
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = (z ^ (z >> np.uint64(31))) + _GOLDEN
    return z


def draw_index(bits, n):  # type: ignore[no-untyped-def]
    """Map 64 random bits to an index in [0, n) (multiply-shift; bias below n / 2**32)."""
    return np.int64(((bits >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))
