"""CUDA twins of ``cpu.py``: same names, arguments and results; one thread per query (or per
resample). Imported only when a caller asks for ``device="cuda"``.

Twins favour obviously-equal semantics over speed where they differ from the CPU kernels
(pairwise duplicate checks and insertion sorts instead of per-thread sorts, which CUDA threads
cannot allocate for); sums run in the same order as on the CPU so float results match exactly.
"""

# numba's typing of cuda.grid(1) is not understood by mypy (it sees the intrinsic's signature)
# mypy: disable-error-code="call-arg,var-annotated"
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from bench.errors import DeviceError
from bench_kernels import _core

cmp_rows = cuda.jit(device=True)(_core.cmp_rows)
hash_row = cuda.jit(device=True)(_core.hash_row)
metric_value = cuda.jit(device=True)(_core.metric_value)
ann_recall_row = cuda.jit(device=True)(_core.ann_recall_row)
splitmix64 = cuda.jit(device=True)(_core.splitmix64)
resample_seed = cuda.jit(device=True)(_core.resample_seed)
draw_index = cuda.jit(device=True)(_core.draw_index)

_THREADS = 64
_UNJUDGED = _core.UNJUDGED


def require() -> None:
    """Raise DeviceError unless numba sees a CUDA GPU (or its simulator)."""
    if not cuda.is_available():
        raise DeviceError(
            "device 'cuda' was requested but numba finds no usable CUDA GPU "
            "(numba.cuda.is_available() is False): use device 'cpu'"
        )


def _blocks(n: int) -> int:
    return max(1, math.ceil(n / _THREADS))


@cuda.jit(device=True)
def _first_duplicate(units, hashes, s, m):  # type: ignore[no-untyped-def]
    """Local index of the first id in units[s:s+m] equal to an earlier one, or -1."""
    for t in range(1, m):
        for u in range(t):
            if hashes[s + u] == hashes[s + t] and cmp_rows(units, s + u, units, s + t) == 0:
                return t
    return -1


@cuda.jit(device=True)
def _before(units, keys, has_scores, a, b):  # type: ignore[no-untyped-def]
    """True when global row a ranks before row b (score key desc, id desc)."""
    if not has_scores:
        return a < b
    if keys[a] != keys[b]:
        return keys[a] > keys[b]
    return cmp_rows(units, a, units, b) > 0


@cuda.jit(device=True)
def _order_query(units, keys, has_scores, s, m, order):  # type: ignore[no-untyped-def]
    """order[s:s+m] = local indices of units[s:s+m] in trec_eval order (insertion sort)."""
    for t in range(m):
        cur = t
        y = t - 1
        while y >= 0 and _before(units, keys, has_scores, s + cur, s + order[s + y]):
            order[s + y + 1] = order[s + y]
            y -= 1
        order[s + y + 1] = cur


@cuda.jit(device=True)
def _lookup_grade(run_units, i, h, q_units, q_hash, q_grades, qs, qe):  # type: ignore[no-untyped-def]
    for t in range(qs, qe):
        if q_hash[t] == h and cmp_rows(run_units, i, q_units, t) == 0:
            return q_grades[t]
    return _UNJUDGED


@cuda.jit
def _hash_kernel(units, out):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < units.shape[0]:
        out[i] = hash_row(units, i)


@cuda.jit
def _dup_kernel(units, offsets, hashes, out):  # type: ignore[no-untyped-def]
    q = cuda.grid(1)
    if q < offsets.shape[0] - 1:
        s = offsets[q]
        m = offsets[q + 1] - s
        for t in range(m):
            hashes[s + t] = hash_row(units, s + t)
        d = _first_duplicate(units, hashes, s, m)
        out[q] = s + d if d >= 0 else -1


@cuda.jit
def _rank_kernel(units, offsets, keys, has_scores, hashes, order, perm, dup):  # type: ignore[no-untyped-def]
    q = cuda.grid(1)
    if q < offsets.shape[0] - 1:
        s = offsets[q]
        m = offsets[q + 1] - s
        for t in range(m):
            hashes[s + t] = hash_row(units, s + t)
        d = _first_duplicate(units, hashes, s, m)
        dup[q] = s + d if d >= 0 else -1
        _order_query(units, keys, has_scores, s, m, order)
        for t in range(m):
            perm[s + t] = s + order[s + t]


@cuda.jit
def _evaluate_kernel(  # type: ignore[no-untyped-def]
    run_units, run_offsets, run_keys, has_scores,
    q_units, q_offsets, q_hash, q_grades, ideal, num_rel, expected, run_of_query,
    families, ks, level, hashes, order, grades, out, dup,
):
    i = cuda.grid(1)
    if i >= expected.shape[0]:
        return
    j = run_of_query[i]
    s = 0
    m = 0
    if j >= 0:
        s = run_offsets[j]
        m = run_offsets[j + 1] - s
    for t in range(m):
        hashes[s + t] = hash_row(run_units, s + t)
    d = _first_duplicate(run_units, hashes, s, m)
    if d >= 0:
        dup[i] = s + d
        return
    dup[i] = -1
    _order_query(run_units, run_keys, has_scores, s, m, order)
    q = expected[i]
    qs = q_offsets[q]
    qe = q_offsets[q + 1]
    for r in range(m):
        t = order[s + r]
        grades[s + r] = _lookup_grade(
            run_units, s + t, hashes[s + t], q_units, q_hash, q_grades, qs, qe
        )
    for mi in range(families.shape[0]):
        out[mi, i] = metric_value(
            families[mi], ks[mi], grades, s, m, num_rel[q], ideal, qs, qe - qs, level
        )


@cuda.jit
def _rrf_kernel(  # type: ignore[no-untyped-def]
    units, starts, ends, k, base, rows, contrib, slot_of, slot_row, sums, perm,
    out_ids, out_scores, counts,
):
    q = cuda.grid(1)
    if q >= starts.shape[0]:
        return
    o = base[q]
    m = 0
    for r in range(starts.shape[1]):
        for i in range(starts[q, r], ends[q, r]):
            rows[o + m] = i
            contrib[o + m] = 1.0 / (k + (i - starts[q, r] + 1))
            m += 1
    n = 0
    for t in range(m):
        slot_of[o + t] = -1
        for u in range(t):
            if cmp_rows(units, rows[o + u], units, rows[o + t]) == 0:
                slot_of[o + t] = slot_of[o + u]
                break
        if slot_of[o + t] < 0:
            slot_of[o + t] = n
            slot_row[o + n] = rows[o + t]
            sums[o + n] = 0.0
            n += 1
    for t in range(m):
        sums[o + slot_of[o + t]] += contrib[o + t]
    for u in range(n):
        cur = u
        cs = np.float32(sums[o + cur])
        y = u - 1
        while y >= 0:
            prev = perm[o + y]
            ps = np.float32(sums[o + prev])
            ahead = cs > ps or (
                cs == ps and cmp_rows(units, slot_row[o + cur], units, slot_row[o + prev]) > 0
            )
            if not ahead:
                break
            perm[o + y + 1] = prev
            y -= 1
        perm[o + y + 1] = cur
    for u in range(n):
        out_ids[o + u] = slot_row[o + perm[o + u]]
        out_scores[o + u] = sums[o + perm[o + u]]
    counts[q] = n


@cuda.jit
def _ann_kernel(ann_ids, ann_dist, exact_ids, exact_dist, k, out):  # type: ignore[no-untyped-def]
    q = cuda.grid(1)
    if q < ann_ids.shape[0]:
        out[q] = ann_recall_row(ann_ids, ann_dist, exact_ids, exact_dist, q, k)


@cuda.jit
def _bootstrap_kernel(values, resamples, seed, out):  # type: ignore[no-untyped-def]
    b = cuda.grid(1)
    if b >= resamples:
        return
    n = values.shape[1]
    for s in range(values.shape[0]):
        # replaying the stream per series keeps indices shared without a per-thread array
        state = resample_seed(seed, b)
        acc = 0.0
        for _ in range(n):
            state, bits = splitmix64(state)
            acc += values[s, draw_index(bits, n)]
        out[s, b] = acc / n


@cuda.jit
def _sign_flip_kernel(deltas, resamples, seed, threshold, hits):  # type: ignore[no-untyped-def]
    b = cuda.grid(1)
    if b >= resamples:
        return
    n = deltas.shape[0]
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
    hits[b] = 1 if abs(total / n) >= threshold else 0


def hash_rows(units: np.ndarray) -> np.ndarray:
    out = np.zeros(units.shape[0], dtype=np.uint64)
    if units.shape[0]:
        d_out = cuda.to_device(out)
        _hash_kernel[_blocks(units.shape[0]), _THREADS](cuda.to_device(units), d_out)
        out = d_out.copy_to_host()
    return out


def find_duplicates(units: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    nq = offsets.shape[0] - 1
    out = np.full(nq, -1, dtype=np.int64)
    if nq > 0:
        d_out = cuda.to_device(out)
        hashes = cuda.device_array(max(int(offsets[-1]), 1), dtype=np.uint64)
        _dup_kernel[_blocks(nq), _THREADS](
            cuda.to_device(units), cuda.to_device(offsets), hashes, d_out
        )
        out = d_out.copy_to_host()
    return out


def _first_nan(scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per CSR slice: global row of its first NaN score, or -1 (host side, like the CPU's)."""
    out = np.full(offsets.shape[0] - 1, -1, dtype=np.int64)
    rows = np.flatnonzero(np.isnan(scores))
    if rows.size:
        q = np.searchsorted(offsets, rows, side="right") - 1
        first_q, first = np.unique(q, return_index=True)
        out[first_q] = rows[first]
    return out


def _keys(scores: np.ndarray, has_scores: bool) -> np.ndarray:
    from bench_kernels import cpu

    return cpu.score_keys(scores) if has_scores and scores.size else np.zeros(1, np.uint32)


def rank_runs(
    units: np.ndarray, offsets: np.ndarray, scores: np.ndarray, has_scores: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nq = offsets.shape[0] - 1
    total = int(offsets[-1]) if nq > 0 else 0
    perm = np.empty(total, dtype=np.int64)
    dup = np.full(nq, -1, dtype=np.int64)
    nan = _first_nan(scores, offsets) if has_scores else dup.copy()
    if nq == 0:
        return perm, dup, nan
    size = max(total, 1)
    d_perm = cuda.device_array(size, dtype=np.int64)
    d_dup = cuda.to_device(dup)
    _rank_kernel[_blocks(nq), _THREADS](
        cuda.to_device(units), cuda.to_device(offsets),
        cuda.to_device(_keys(scores, has_scores)), has_scores,
        cuda.device_array(size, dtype=np.uint64), cuda.device_array(size, dtype=np.int64),
        d_perm, d_dup,
    )
    return d_perm.copy_to_host()[:total], d_dup.copy_to_host(), nan


def evaluate_runs(  # type: ignore[no-untyped-def]
    run_units, run_offsets, run_scores, has_scores,
    q_units, q_offsets, q_hash, q_grades, ideal, num_rel,
    expected, run_of_query, families, ks, level,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nq = expected.shape[0]
    out = np.zeros((families.shape[0], nq), dtype=np.float64)
    dup = np.full(nq, -1, dtype=np.int64)
    if nq == 0:
        return out, dup, dup.copy()
    size = max(int(run_offsets[-1]) if run_offsets.shape[0] else 0, 1)
    d_out = cuda.to_device(out)
    d_dup = cuda.to_device(dup)
    dev = cuda.to_device
    _evaluate_kernel[_blocks(nq), _THREADS](
        dev(run_units), dev(run_offsets), dev(_keys(run_scores, has_scores)), has_scores,
        dev(q_units), dev(q_offsets), dev(q_hash), dev(q_grades), dev(ideal),
        dev(num_rel), dev(expected), dev(run_of_query), dev(families), dev(ks), level,
        cuda.device_array(size, dtype=np.uint64), cuda.device_array(size, dtype=np.int64),
        cuda.device_array(size, dtype=np.int32), d_out, d_dup,
    )
    out, dup = d_out.copy_to_host(), d_dup.copy_to_host()
    # the CPU kernel stops at a repeated id before reading scores, then at a NaN score
    nan = np.full(nq, -1, dtype=np.int64)
    if has_scores:
        slice_nan = _first_nan(run_scores, run_offsets)
        found = run_of_query >= 0
        nan[found] = slice_nan[run_of_query[found]]
        nan[dup >= 0] = -1
        out[:, nan >= 0] = 0.0
    return out, dup, nan


def rrf_fuse(
    units: np.ndarray, starts: np.ndarray, ends: np.ndarray, k: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    nq = starts.shape[0]
    base = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum((ends - starts).sum(axis=1), out=base[1:])
    total = int(base[-1])
    counts = np.zeros(nq, dtype=np.int64)
    if nq == 0 or total == 0:
        return np.zeros(total, np.int64), np.zeros(total, np.float64), counts, base
    d_ids = cuda.to_device(np.full(total, -1, dtype=np.int64))
    d_scores = cuda.to_device(np.zeros(total, dtype=np.float64))
    d_counts = cuda.to_device(counts)

    def scratch(dtype: type) -> object:
        return cuda.device_array(total, dtype=dtype)

    _rrf_kernel[_blocks(nq), _THREADS](
        cuda.to_device(units), cuda.to_device(starts), cuda.to_device(ends), k,
        cuda.to_device(base), scratch(np.int64), scratch(np.float64), scratch(np.int64),
        scratch(np.int64), scratch(np.float64), scratch(np.int64), d_ids, d_scores, d_counts,
    )
    return d_ids.copy_to_host(), d_scores.copy_to_host(), d_counts.copy_to_host(), base


def ann_recall(  # type: ignore[no-untyped-def]
    ann_ids, ann_dist, exact_ids, exact_dist, k
) -> np.ndarray:
    nq = ann_ids.shape[0]
    out = np.zeros(nq, dtype=np.float64)
    if nq:
        d_out = cuda.to_device(out)
        dev = cuda.to_device
        _ann_kernel[_blocks(nq), _THREADS](
            dev(ann_ids), dev(ann_dist), dev(exact_ids), dev(exact_dist), k, d_out
        )
        out = d_out.copy_to_host()
    return out


def bootstrap_means(values: np.ndarray, resamples: np.int64, seed: np.uint64) -> np.ndarray:
    out = np.zeros((values.shape[0], int(resamples)), dtype=np.float64)
    if resamples > 0 and values.shape[1] > 0:
        d_out = cuda.to_device(out)
        _bootstrap_kernel[_blocks(int(resamples)), _THREADS](
            cuda.to_device(values), resamples, seed, d_out
        )
        out = d_out.copy_to_host()
    return out


def sign_flip_count(
    deltas: np.ndarray, resamples: np.int64, seed: np.uint64, threshold: float
) -> int:
    if resamples <= 0 or deltas.shape[0] == 0:
        return 0
    d_hits = cuda.to_device(np.zeros(int(resamples), dtype=np.int64))
    _sign_flip_kernel[_blocks(int(resamples)), _THREADS](
        cuda.to_device(deltas), resamples, seed, threshold, d_hits
    )
    return int(d_hits.copy_to_host().sum())
