"""Kernels for reading id columns: pack variable-length ids into rows, find query runs."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def pack_ids(data, offsets, out, row0):  # type: ignore[no-untyped-def]
    """Copy variable-length ids (UTF-8 ``data[offsets[i]:offsets[i+1]]``) into zero-padded rows
    ``out[row0 + i]`` (the rows must start zeroed or be fully overwritten: this pads)."""
    n = offsets.shape[0] - 1
    width = out.shape[1]
    for i in prange(n):
        s = offsets[i]
        m = offsets[i + 1] - s
        for t in range(m):
            out[row0 + i, t] = data[s + t]
        for t in range(m, width):
            out[row0 + i, t] = 0


@njit(cache=True)
def segment_starts(data, offsets):  # type: ignore[no-untyped-def]
    """Rows whose variable-length id (``data[offsets[i]:offsets[i+1]]``) differs from the
    previous row's: the starts of runs of equal ids (row 0 always starts one)."""
    n = offsets.shape[0] - 1
    flags = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        if i == 0:
            flags[i] = True
            continue
        a, b = offsets[i - 1], offsets[i]
        la, lb = b - a, offsets[i + 1] - b
        if la != lb:
            flags[i] = True
            continue
        for t in range(la):
            if data[a + t] != data[b + t]:
                flags[i] = True
                break
    return np.flatnonzero(flags)
