"""Failure isolation for multirun jobs: one bad job is recorded, the sweep goes on.

In multirun mode the app's task function hands its work to ``run_isolated``, which writes
``job_status.json`` into the job folder — ``running`` at start (so a job killed by a
timeout, the OOM killer or a lost node is seen as started-but-unfinished), then ``ok``,
``gate_failed`` or ``failed`` with the error — and never lets the job's exception reach the
launcher: Hydra's basic launcher would stop the whole sweep at the first failing job, and
submitit/Ray would abort collecting results. The sweep callback (bench/report/sweep.py) turns
the statuses into the report and the process exit code.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.errors import BenchError
from bench.results.write import atomic_write_bytes

log = logging.getLogger("bench")

JOB_STATUS = "job_status.json"

#: exit code of a sweep where some job failed or did not finish (0 ok, 2 bad input, 3 gate)
EXIT_SWEEP_INCOMPLETE = 4


class _Result(Protocol):
    @property
    def exit_code(self) -> int: ...
    @property
    def failed_gates(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class JobStatus:
    status: str  # running | ok | gate_failed | failed
    host: str
    pid: int
    started_unix: float
    ended_unix: float | None = None
    exit_code: int | None = None
    error_type: str | None = None
    error: str | None = None  # one line
    failed_gates: tuple[str, ...] = ()

    def write(self, job_dir: Path) -> None:
        job_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(job_dir / JOB_STATUS, json.dumps(asdict(self), indent=2).encode())


def read_status(job_dir: Path) -> JobStatus | None:
    try:
        rec: dict[str, Any] = json.loads((job_dir / JOB_STATUS).read_text())
        rec["failed_gates"] = tuple(rec.get("failed_gates") or ())
        return JobStatus(**rec)
    except (OSError, ValueError, TypeError):
        return None


#: what schedulers send before killing a job at its time limit (SLURM: SIGTERM, or the
#: --signal the user asked for; submitit: SIGUSR2; CPU-time limits: SIGXCPU)
_LIMIT_SIGNALS = ("SIGUSR2", "SIGTERM", "SIGXCPU")


@contextmanager
def _watch_limit_signals(seen: list[str]) -> Iterator[None]:
    """Note a time-limit signal while still letting its previous handler act (submitit
    requeues or checkpoints on SIGUSR2): an error raised after it is reported as a timeout."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (e.g. Ray workers)
        return
    previous: dict[int, Any] = {}

    def note(signum: int, frame: Any) -> None:
        seen.append(signal.Signals(signum).name)
        prev = previous.get(signum)
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for name in _LIMIT_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, note)
    try:
        yield
    finally:
        for sig, prev in previous.items():
            signal.signal(sig, prev)


def run_isolated(work: Callable[[], _Result], job_dir: Path) -> JobStatus:
    """Run one multirun job; record how it ended instead of raising."""
    start = JobStatus("running", socket.gethostname(), os.getpid(), time.time())
    start.write(job_dir)
    signals: list[str] = []
    try:
        with _watch_limit_signals(signals):
            result = work()
    except BenchError as exc:
        line = exc.one_line()
        print(f"bench: error: {line}", file=sys.stderr)
        end = _failed(start, type(exc).__name__, line, exc.exit_code, signals)
    except Exception as exc:  # a bug or a resource failure (MemoryError, CUDA OOM): keep trace
        log.error("job failed:\n%s", traceback.format_exc())
        line = " ".join(f"{exc}".split())[:500] or type(exc).__name__
        print(f"bench: job failed: {type(exc).__name__}: {line}", file=sys.stderr)
        end = _failed(start, type(exc).__name__, line, 1, signals)
    else:
        for gate in result.failed_gates:
            print(f"bench: gate failed: {gate}", file=sys.stderr)
        end = JobStatus("gate_failed" if result.exit_code else "ok", start.host, start.pid,
                        start.started_unix, time.time(), result.exit_code,
                        failed_gates=tuple(result.failed_gates))
    end.write(job_dir)
    return end


def _failed(start: JobStatus, error_type: str, line: str, code: int,
            signals: list[str]) -> JobStatus:
    if signals:
        # The scheduler's time-limit signal came first: the error is its consequence.
        line = f"{signals[0]} received (time limit or preemption), then {error_type}: {line}"
        error_type = "Timeout"
    return JobStatus("failed", start.host, start.pid, start.started_unix, time.time(), code,
                     error_type, line)
