"""Failure isolation of multirun jobs and the sweep report / exit code built from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.errors import ConfigError
from bench.report.jobs import EXIT_SWEEP_INCOMPLETE, JobStatus, read_status, run_isolated
from bench.report.sweep import main as sweep_main
from bench.report.sweep import write_sweep_report


@dataclass(frozen=True)
class _Res:
    exit_code: int = 0
    failed_gates: tuple[str, ...] = ()


def _raise(exc: BaseException):  # type: ignore[no-untyped-def]
    def work() -> _Res:
        raise exc
    return work


@pytest.mark.parametrize(("work", "status", "code", "etype"), [
    (lambda: _Res(), "ok", 0, None),
    (lambda: _Res(3, ("ndcg@10[all] 0.4 < min 0.5",)), "gate_failed", 3, None),
    (_raise(ConfigError("chunker.size", "must be >= 1")), "failed", 2, "ConfigError"),
    (_raise(RuntimeError("CUDA out of memory.\nTried to allocate")), "failed", 1, "RuntimeError"),
    (_raise(MemoryError()), "failed", 1, "MemoryError"),
])
def test_run_isolated_records_instead_of_raising(tmp_path: Path, work, status: str, code: int,
                                                 etype: str | None,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    st = run_isolated(work, tmp_path)
    assert read_status(tmp_path) == st
    assert (st.status, st.exit_code, st.error_type) == (status, code, etype)
    assert st.ended_unix is not None and st.ended_unix >= st.started_unix
    err = capsys.readouterr().err
    if status == "failed":
        assert st.error and "\n" not in st.error
        assert len(err.strip().splitlines()) == 1  # the one-line error; the trace goes to the log
    if status == "ok":
        assert err == ""


def test_keyboard_interrupt_is_not_swallowed(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        run_isolated(_raise(KeyboardInterrupt()), tmp_path)
    assert read_status(tmp_path).status == "running"  # type: ignore[union-attr]


def _job(sweep: Path, name: str, overrides: list[str], status: JobStatus | None) -> None:
    job = sweep / name
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if status is not None:
        status.write(job)


def test_report_lists_failed_killed_and_unstarted_jobs(tmp_path: Path) -> None:
    _job(tmp_path, "0", ["chunker.size=0"],
         JobStatus("failed", "h", 1, 0.0, 1.0, 2, "ConfigError",
                   "config key chunker.size: must be >= 1 token, got 0"))
    _job(tmp_path, "1", ["chunker.size=64"], JobStatus("running", "node7", 42, 0.0))
    _job(tmp_path, "2", ["chunker.size=96"], None)
    text = write_sweep_report(tmp_path).read_text()
    assert "missing (failed or unfinished) jobs: 3 (0, 1, 2)" in text
    assert ("| 0 | `chunker.size=0` | failed | ConfigError: config key chunker.size: "
            "must be >= 1 token, got 0 |") in text
    assert "| 1 | `chunker.size=64` | killed | started on node7 (pid 42)" in text
    assert "| 2 | `chunker.size=96` | not started |" in text
    status = json.loads((tmp_path / "sweep_status.json").read_text())
    assert status["exit_code"] == EXIT_SWEEP_INCOMPLETE == 4
    assert [u["status"] for u in status["unfinished"]] == ["failed", "killed", "not started"]
    assert sweep_main([str(tmp_path)]) == 4


def test_error_after_a_time_limit_signal_is_a_timeout(tmp_path: Path) -> None:
    import os
    import signal

    calls: list[int] = []
    prev = signal.signal(signal.SIGUSR2, lambda s, f: calls.append(s))  # e.g. submitit's handler
    try:
        def work() -> _Res:
            os.kill(os.getpid(), signal.SIGUSR2)
            raise ImportError("interrupted")

        st = run_isolated(work, tmp_path)
    finally:
        signal.signal(signal.SIGUSR2, prev)
    assert calls == [signal.SIGUSR2]  # the scheduler's own handler still ran
    assert st.error_type == "Timeout"
    assert st.error == "SIGUSR2 received (time limit or preemption), then ImportError: interrupted"
