"""Imports numba's array-math registry without SciPy: ~0.3-0.4 s off every process start.

numba imports ``numba.np.arraymath`` when it loads the first kernel (from its disk cache too),
and that module imports ``scipy.linalg`` only to decide whether ``np.correlate`` and
``np.convolve`` use BLAS for floats. No kernel here calls them, and functions that need BLAS
(``np.dot``, ``np.linalg.*``) import SciPy themselves when they compile, so a process that
imports the kernels first loses nothing but the import time. ``scipy.linalg`` is hidden only
while that one module imports, and only when nothing has imported it yet.
"""

from __future__ import annotations

import sys


def import_arraymath_without_scipy() -> None:
    # `import numba` itself imports the top-level scipy package (cheap, a version check):
    # only scipy.linalg is hidden
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    sys.modules["scipy.linalg"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        if sys.modules.get("scipy.linalg", 0) is None:
            del sys.modules["scipy.linalg"]


import_arraymath_without_scipy()
