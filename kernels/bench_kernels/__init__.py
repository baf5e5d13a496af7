"""Numba kernels of bench's metrics: CPU (``cpu.py``) and CUDA twins (``cuda.py``).

Import the typed wrappers from ``bench_kernels.api``; call :func:`warmup` once at set-up so
every kernel is compiled into numba's on-disk cache and later processes start fast.

Adding a kernel: write target-agnostic leaves in ``_core.py``, the CPU kernel in ``cpu.py``,
its twin with the same name and arguments in ``cuda.py``, a wrapper in ``api.py``, a call in
``warmup`` below, and a twin test in tests/kernels.
"""

from __future__ import annotations

from bench_kernels.warm import warmup

__all__ = ["warmup"]
