"""Process start: loading the kernels must not import scipy.linalg (~0.4 s of every start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("first", ["", "import numba; "])
def test_kernel_load_leaves_scipy_linalg_unimported(first: str) -> None:
    # a kernel call loads numba's registries (numba.np.arraymath, which asks scipy.linalg
    # whether BLAS exists); whether numba was imported before the kernels or not
    code = (f"import sys; {first}import numpy as np; from bench_kernels import api; "
            "api.score_keys(np.zeros(3)); "
            "print('numba.np.arraymath' in sys.modules, 'scipy.linalg' in sys.modules); "
            "import scipy.linalg; print('later import works')")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'kernels'}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert out[:2] == ["True False", "later import works"]
