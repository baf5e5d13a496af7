"""CUDA twins equal the CPU kernels: under numba's simulator everywhere, on a GPU when present.

Each check runs ``cuda_twin_check.py`` in a subprocess: the simulator is switched on by an
environment variable read when numba is imported, so it must not leak into this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).with_name("cuda_twin_check.py")


def _run(n_queries: int, simulate: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "kernels"), env.get("PYTHONPATH", "")]
    )
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run(
        [sys.executable, "-W", "ignore", str(CHECK), str(n_queries)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )


def _cuda_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # any import or driver problem means: no usable GPU here
        return False


def test_cuda_twins_match_cpu_in_simulator() -> None:
    proc = _run(40, simulate=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all twins agree" in proc.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
def test_cuda_twins_match_cpu_on_gpu() -> None:
    proc = _run(5000, simulate=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cuda_request_without_gpu_raises_device_error() -> None:
    code = (
        "from bench.errors import DeviceError\n"
        "from bench_kernels import api\n"
        "try:\n    api.backend('cuda')\nexcept DeviceError as e:\n    print('DeviceError', e)\n"
        "else:\n    print('available')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "kernels")]))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, env=env, timeout=300, check=False).stdout
    assert out.startswith("DeviceError") or (out.startswith("available") and _cuda_available())


def test_unknown_device_raises() -> None:
    from bench.errors import DeviceError
    from bench_kernels import api

    with pytest.raises(DeviceError, match="unknown device"):
        api.backend("tpu")
