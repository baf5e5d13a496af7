"""Runs ``bench_kernels.cache_guard`` when the CPU kernels are imported, before any loads.

numba keys a cached kernel on its own file only, while these kernels inline leaves from
``_core.py`` and ``_shared.py``; the guard drops caches built from other sources.
"""

from __future__ import annotations

from bench_kernels.cache_guard import ensure_fresh_cache

ensure_fresh_cache()
