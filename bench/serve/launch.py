"""Start ``python -m bench.serve ...`` as a subprocess, wait until it is ready, stop it.

    with ServedProcess(["dataset=synthetic", "config=abc123"]) as srv:
        httpx.post(f"{srv.base_url}/v1/retrieve", json={"query": "..."})

``ServedProcess(overrides)`` picks a free port (``serve.port``), puts Hydra's run dir in a
temporary folder unless the overrides name one, sends the server's output to ``log_path``
(a temporary file by default), and on ``__enter__`` waits for ``GET /ready`` to answer 200 —
bounded by ``ready_timeout_s``; a server that exits first or never gets ready raises
``ServerError`` with the tail of its log (and is stopped). ``stop()`` (and ``__exit__``, even
when the body raised) sends SIGTERM — the server drains and exits — then SIGKILL after
``stop_timeout_s``. ``start_s`` is the time from spawning the process to the first 200 from
``/ready`` (interpreter start, imports, config, index load and warm-up), on this client's
clock. Tests and scripts (black-box systems, capacity runs) share this one launcher.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from bench.errors import BenchError
from bench.http.client import free_port


class ServerError(BenchError):
    """The served process did not come up."""


class ServedProcess:
    def __init__(self, overrides: Sequence[str], *, host: str = "127.0.0.1",
                 port: int | None = None, ready_timeout_s: float = 180.0,
                 stop_timeout_s: float = 30.0, log_path: Path | None = None,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None,
                 python: str = sys.executable) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-serve-")
        self.log_path = log_path or Path(self._tmp.name) / "server.log"
        args = list(overrides)
        if not any(a.startswith("hydra.run.dir=") for a in args):
            args.append(f"hydra.run.dir={Path(self._tmp.name) / 'run'}")
        self.command = [python, "-m", "bench.serve", *args, f"serve.host={host}",
                        f"serve.port={self.port}"]
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> ServedProcess:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._t0 = time.perf_counter()
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env, cwd=self.cwd,
                                         start_new_session=True)

    def wait_ready(self) -> float:
        """Seconds from spawn to the first 200 from /ready."""
        import httpx

        assert self.proc is not None, "start() first"
        deadline = time.perf_counter() + self.ready_timeout_s
        while time.perf_counter() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise ServerError(f"bench.serve exited with code {code} before it was ready: "
                                  f"{self.log_tail()}")
            try:
                if httpx.get(f"{self.base_url}/ready", timeout=2.0).status_code == 200:
                    self.start_s = time.perf_counter() - self._t0
                    return self.start_s
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise ServerError(f"bench.serve not ready after {self.ready_timeout_s:g} s: "
                          f"{self.log_tail()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 12) -> str:
        lines = [ln for ln in self.log_text().splitlines() if ln.strip()]
        return " | ".join(lines[-n:]) or "(no output)"

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def kill(self) -> None:
        """SIGKILL at once (a server dying mid-run, in tests)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int | None:
        """SIGTERM (graceful drain), SIGKILL after ``stop_timeout_s``; the exit code."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        return None if proc is None else proc.returncode
