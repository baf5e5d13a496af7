"""Typed wrappers over the kernels: normalise dtypes, then run on the requested device.

``device="cpu"`` runs ``cpu.py``; ``device="cuda"`` runs the twins in ``cuda.py`` (imported only
then) and raises ``bench.errors.DeviceError`` when no CUDA GPU is visible: never a silent CPU
fallback. Results are identical on both devices (the tests hold them to equality).
"""

from __future__ import annotations

from types import ModuleType
from typing import Literal

import numpy as np

from bench.errors import DeviceError

Device = Literal["cpu", "cuda"]


def backend(device: str) -> ModuleType:
    """The kernel module of ``device`` ("cpu" or "cuda")."""
    if device == "cpu":
        from bench_kernels import cpu

        return cpu
    if device == "cuda":
        from bench_kernels import cuda

        cuda.require()
        return cuda
    raise DeviceError(f"unknown device {device!r}: use 'cpu' or 'cuda'")


def id_units(ids: np.ndarray) -> np.ndarray:
    """Doc ids as a 2-D unit matrix (one zero-padded row per id) the kernels compare.

    numpy ``S`` (UTF-8 bytes) gives uint8 rows and ``U`` gives uint32 code points, both as
    zero-copy views; other arrays (object of str) are converted to ``U`` first (slower: pass
    ``U`` or ``S`` arrays on hot paths). Row order equals the ids' UTF-8 byte order.
    """
    arr = np.asarray(ids)
    if arr.dtype.kind not in "SU":
        arr = arr.astype(str) if arr.size else np.zeros(0, dtype="U1")
    arr = np.ascontiguousarray(arr.reshape(-1))
    unit = np.uint8 if arr.dtype.kind == "S" else np.uint32
    width = arr.dtype.itemsize // np.dtype(unit).itemsize
    if width == 0:  # every id empty: one zero unit keeps the matrix two-dimensional
        return np.zeros((arr.shape[0], 1), dtype=unit)
    units = arr.view(unit).reshape(arr.shape[0], width)
    # numba compiles a separate signature for read-only arrays: copy those once instead
    return units if units.flags.writeable else units.copy()


def units_as(units: np.ndarray, unit: np.dtype | type) -> np.ndarray:
    """``units`` re-encoded with unit dtype ``unit`` (uint8 UTF-8 bytes or uint32 code points).

    Kernels compare rows of two matrices only when they share a dtype; callers convert the
    smaller side (qrels), never the run.
    """
    unit = np.dtype(unit)
    if units.dtype == unit:
        return units
    width = units.shape[1]
    if units.dtype == np.uint8:
        return id_units(np.char.decode(units.view(f"S{width}").reshape(-1), "utf-8"))
    return id_units(np.char.encode(units.view(f"U{width}").reshape(-1), "utf-8"))


def score_keys(scores: np.ndarray) -> np.ndarray:
    """uint32 keys ordered like the scores compared as float32 (trec_eval's comparison).

    -0.0 gets +0.0's key (they compare equal, so the doc id breaks their tie). Computed on the
    CPU for every device: it is one cheap pass, and keys are what the kernels take.
    """
    from bench_kernels import cpu

    return cpu.score_keys(_arr(scores, np.float64))


def _arr(a: np.ndarray, dtype: type) -> np.ndarray:
    """C-contiguous, writable, of ``dtype``: the one array type each kernel is compiled for.

    Read-only inputs (arrow buffers, memory maps) are copied; numba would otherwise compile
    (and cache) a second signature for them at the user's expense.
    """
    return np.require(a, dtype=dtype, requirements=["C", "W"])


def _i64(a: np.ndarray) -> np.ndarray:
    return _arr(a, np.int64)


def hash_rows(units: np.ndarray, *, device: str = "cpu") -> np.ndarray:
    """uint64 hash of every id row (used to sort qrels for lookups)."""
    return backend(device).hash_rows(units)


def find_duplicates(units: np.ndarray, offsets: np.ndarray, *, device: str = "cpu") -> np.ndarray:
    """Per CSR slice: global index of its first repeated id, or -1."""
    return backend(device).find_duplicates(units, _i64(offsets))


def _scores(scores: np.ndarray | None) -> tuple[np.ndarray, bool]:
    if scores is None:
        return np.zeros(0, dtype=np.float64), False
    return _arr(scores, np.float64), True


def rank_runs(
    units: np.ndarray, offsets: np.ndarray, scores: np.ndarray | None, *, device: str = "cpu"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(perm, dup, nan): each query's rows in trec_eval order; first repeated id / NaN or -1.

    ``scores`` None keeps the given order. Scores are compared as float32 (trec_eval).
    """
    s, has = _scores(scores)
    return backend(device).rank_runs(units, _i64(offsets), s, has)


def prepare_qrels(
    units: np.ndarray, offsets: np.ndarray, rels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hashes, ideal, dup) of every qrels slice; see ``cpu.prepare_qrels``.

    Runs on the CPU for every device: it is a small, once-per-qrels preparation.
    """
    from bench_kernels import cpu

    return cpu.prepare_qrels(units, _i64(offsets), _arr(rels, np.int32))


def evaluate_runs(
    run_units: np.ndarray,
    run_offsets: np.ndarray,
    run_scores: np.ndarray | None,
    q_units: np.ndarray,
    q_offsets: np.ndarray,
    q_grades: np.ndarray,
    prepared: tuple[np.ndarray, np.ndarray],
    num_rel: np.ndarray,
    expected: np.ndarray,
    run_of_query: np.ndarray,
    families: np.ndarray,
    ks: np.ndarray,
    level: int,
    *,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values[metric, query], dup, nan); ``prepared`` = (hashes, ideal) from
    :func:`prepare_qrels`. See ``cpu.evaluate_runs`` for the layout."""
    scores, has = _scores(run_scores)
    hashes, ideal = prepared
    return backend(device).evaluate_runs(
        run_units, _i64(run_offsets), scores, has, q_units, _i64(q_offsets), hashes,
        _arr(q_grades, np.int32), ideal, _i64(num_rel), _i64(expected),
        _i64(run_of_query), _i64(families), _i64(ks), np.int64(level),
    )


def rrf_fuse(
    units: np.ndarray, starts: np.ndarray, ends: np.ndarray, k: float, *, device: str = "cpu"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ids, scores, counts, base) of the fused rankings; see ``cpu.rrf_fuse``."""
    return backend(device).rrf_fuse(units, _i64(starts), _i64(ends), np.float64(k))


def ann_recall(
    ann_ids: np.ndarray,
    ann_dist: np.ndarray,
    exact_ids: np.ndarray,
    exact_dist: np.ndarray,
    k: int,
    *,
    device: str = "cpu",
) -> np.ndarray:
    """Tie-tolerant recall@k per query; 2-D (queries x depth) ids (int64) and distances."""
    if exact_ids.shape[1] < k:
        raise ValueError(f"exact neighbours hold {exact_ids.shape[1]} columns, need k={k}")
    return backend(device).ann_recall(
        _arr(ann_ids, np.int64),
        _arr(ann_dist, np.float64),
        _arr(exact_ids, np.int64),
        _arr(exact_dist, np.float64),
        np.int64(k),
    )


def bootstrap_means(
    values: np.ndarray, resamples: int, seed: int, *, device: str = "cpu"
) -> np.ndarray:
    """(series x resamples) bootstrap means of 2-D ``values`` (series x n), shared indices."""
    v = _arr(np.atleast_2d(values), np.float64)
    return backend(device).bootstrap_means(v, np.int64(resamples), np.uint64(seed))


def sign_flip_count(
    deltas: np.ndarray, resamples: int, seed: int, threshold: float, *, device: str = "cpu"
) -> int:
    """How many random sign flips of ``deltas`` give |mean| >= threshold."""
    d = _arr(deltas, np.float64)
    return int(
        backend(device).sign_flip_count(d, np.int64(resamples), np.uint64(seed), float(threshold))
    )


def pack_ids(data: np.ndarray, offsets: np.ndarray, out: np.ndarray, row0: int) -> None:
    """Copy variable-length UTF-8 ids (arrow string buffers) into zero-padded rows of ``out``."""
    from bench_kernels import cpu

    cpu.pack_ids(_arr(data, np.uint8), _i64(offsets), out, np.int64(row0))


def scan_trec_lines(
    buf: np.ndarray, min_cols: int, max_cols: int, key_col: int, id_col: int, num_col: int,
    as_int: bool, check_col: int = -1,
) -> tuple:  # type: ignore[type-arg]
    """Parse a TREC file's bytes, pieces in parallel; see ``cpu.text.scan_trec_lines``.

    The id rows are exactly as wide as the longest ``id_col`` token: the width is taken from
    a sample of lines first, and the file is scanned once more in the rare case that a later
    id is longer than every sampled one.
    """
    import numba

    from bench_kernels import cpu

    # ~4 pieces per thread balance uneven lines; pieces of >= 1 MiB keep the overhead small
    parts = max(1, min(4 * numba.get_num_threads(), buf.shape[0] >> 20))
    buf = _arr(buf, np.uint8)
    args = (buf, np.int64(min_cols), np.int64(max_cols), np.int64(key_col), np.int64(id_col),
            np.int64(num_col), bool(as_int), np.int64(check_col), np.int64(parts))
    width = sample_width(buf, id_col)
    out = cpu.scan_trec_lines(*args, np.int64(width))
    longest = int(out[1])
    if longest > width:
        out = cpu.scan_trec_lines(*args, np.int64(longest))
    elif 0 < longest < width:  # cannot happen (sampled lines are lines of the file): stay exact
        out = (np.ascontiguousarray(out[0][:, :longest]), *out[1:])
    return out  # type: ignore[no-any-return]


def sample_width(buf: np.ndarray, col: int, samples: int = 64, span: int = 4096) -> int:
    """Longest token of column ``col`` over lines sampled across ``buf`` (start, ``samples``
    evenly spaced windows of ``span`` bytes, end); at least 1. Lines are split as C
    ``isspace`` splits (``bytes.split()``); comment lines and short lines are skipped."""
    size = buf.shape[0]
    best = 1
    for k in range(samples + 1):
        lo = min(size * k // samples, max(size - span, 0))
        lines = bytes(buf[lo:lo + span]).split(b"\n")
        if lo > 0:
            lines = lines[1:]  # the first may be a line's tail
        if lo + span < size:
            lines = lines[:-1]  # the last may be cut
        for line in lines:
            cols = line.split()
            if len(cols) > col and not cols[0].startswith(b"#"):
                best = max(best, len(cols[col]))
    return best


def pack_spans(buf: np.ndarray, span_s: np.ndarray, span_n: np.ndarray, width: int
               ) -> np.ndarray:
    """The byte spans ``buf[s:s+n]`` as a numpy ``S{width}`` array (zero-padded)."""
    from bench_kernels import cpu

    width = max(width, 1)
    out = np.empty((len(span_s), width), dtype=np.uint8)  # the kernel writes every byte
    cpu.pack_spans(_arr(buf, np.uint8), _i64(span_s), _i64(span_n), out)
    return out.view(f"S{width}").reshape(-1)


def segment_starts(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Rows where a variable-length id column changes value (row 0 included)."""
    from bench_kernels import cpu

    return cpu.segment_starts(_arr(data, np.uint8), _i64(offsets))
