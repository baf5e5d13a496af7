"""Start a real HTTP server process on a free port, wait until it answers, always stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.generation.openai_http import free_port

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def serving(app: str, *, env: dict[str, str] | None = None, log: Path | None = None,
            ready_path: str = "/health", timeout_s: float = 60.0,
            args: Sequence[str] = (), port: int | None = None) -> Iterator[str]:
    """``uvicorn <app>`` in a subprocess (on ``port``, else a free one); yields its root URL.
    Stopped on exit, even when the test fails (SIGTERM, then SIGKILL)."""
    port = port or free_port()
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", *args],
        cwd=REPO, env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'kernels'}",
                       **(env or {})},
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{app} exited with {proc.returncode} before it was ready")
            try:
                if httpx.get(root + ready_path, timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{app} not ready after {timeout_s:.0f} s")
            time.sleep(0.1)
        yield root
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if out is not subprocess.DEVNULL:
            out.close()


def compose_run(overrides: list[str], cache: Path, out: Path) -> Any:
    """A run of the synthetic corpus (static embedder, small bootstrap) with ``overrides``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register
    from bench.pipeline.run import run

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=[
            "dataset=synthetic", f"cache_dir={cache}", "metrics.bootstrap_resamples=200",
            "embedder=static_l3", "latency.queries=4", *overrides])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return run(cfg, out)
