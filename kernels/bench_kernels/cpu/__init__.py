"""CPU kernels: ``@njit(cache=True)``, parallel over queries (or resamples) with ``prange``.

Every kernel takes flat arrays in CSR layout (``offsets[q]:offsets[q+1]`` is query q's slice)
and fixed dtypes (ids: 2-D uint8 or uint32 unit matrices; offsets int64; scores float64), so
each kernel compiles for at most two signatures and its cache serves every later process.
``bench_kernels/cuda.py`` holds the twins (same names); ``api.py`` picks one by device.
"""

# first, in this order: _cache drops cached kernels compiled from other sources before any
# kernel loads; _no_scipy imports numba's array-math registry without importing SciPy
from bench_kernels.cpu import _cache, _no_scipy  # noqa: F401
from bench_kernels.cpu._shared import cmp_rows, hash_row
from bench_kernels.cpu.fusion import rrf_fuse
from bench_kernels.cpu.ranking import (
    evaluate_runs,
    find_duplicates,
    hash_rows,
    prepare_qrels,
    rank_runs,
    score_keys,
)
from bench_kernels.cpu.stats import ann_recall, bootstrap_means, sign_flip_count
from bench_kernels.cpu.text import (
    pack_ids,
    pack_spans,
    scan_trec_lines,
    segment_starts,
)

__all__ = [
    "ann_recall",
    "bootstrap_means",
    "cmp_rows",
    "evaluate_runs",
    "find_duplicates",
    "hash_row",
    "hash_rows",
    "pack_ids",
    "pack_spans",
    "prepare_qrels",
    "rank_runs",
    "rrf_fuse",
    "scan_trec_lines",
    "score_keys",
    "segment_starts",
    "sign_flip_count",
]
