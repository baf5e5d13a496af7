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
import socket
import sys
import time
import traceback
from collections.abc import Callable
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


def run_isolated(work: Callable[[], _Result], job_dir: Path) -> JobStatus:
    """Run one multirun job; record how it ended instead of raising."""
    start = JobStatus("running", socket.gethostname(), os.getpid(), time.time())
    start.write(job_dir)
    try:
        result = work()
    except BenchError as exc:
        line = exc.one_line()
        print(f"bench: error: {line}", file=sys.stderr)
        end = _failed(start, type(exc).__name__, line, exc.exit_code)
    except Exception as exc:  # a bug or a resource failure (MemoryError, CUDA OOM): keep trace
        log.error("job failed:\n%s", traceback.format_exc())
        line = " ".join(f"{exc}".split())[:500] or type(exc).__name__
        print(f"bench: job failed: {type(exc).__name__}: {line}", file=sys.stderr)
        end = _failed(start, type(exc).__name__, line, 1)
    else:
        for gate in result.failed_gates:
            print(f"bench: gate failed: {gate}", file=sys.stderr)
        end = JobStatus("gate_failed" if result.exit_code else "ok", start.host, start.pid,
                        start.started_unix, time.time(), result.exit_code,
                        failed_gates=tuple(result.failed_gates))
    end.write(job_dir)
    return end


def _failed(start: JobStatus, error_type: str, line: str, code: int) -> JobStatus:
    return JobStatus("failed", start.host, start.pid, start.started_unix, time.time(), code,
                     error_type, line)
