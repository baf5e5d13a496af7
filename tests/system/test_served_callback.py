"""The served experiment's filtered-ANN callback, run as Hydra runs it: after the jobs, with
no job's Hydra config set (cache_dir's default reads ${hydra:runtime.cwd})."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from bench.system import served
from bench.system.served import FilteredAnnCallback


def _config(tmp_path: Path) -> Any:
    (tmp_path / "sweep" / "merged-report").mkdir(parents=True)
    (tmp_path / "sweep" / "merged-report" / "report.md").write_text("# report\n")
    return OmegaConf.create({
        "plan_only": False,
        "cache_dir": "${hydra:runtime.cwd}/.cache/bench",
        "hydra": {"sweep": {"dir": str(tmp_path / "sweep")},
                  "runtime": {"cwd": str(tmp_path)}},
    })


@pytest.fixture(autouse=True)
def _no_hydra_config() -> Any:
    from hydra.core.utils import setup_globals

    setup_globals()  # the ${hydra:...} resolver, as a Hydra app has it
    HydraConfig.instance().cfg = None  # as in on_multirun_end: no job's config is set
    yield
    HydraConfig.instance().cfg = None


def test_cache_dir_resolves_outside_a_job_and_the_table_is_appended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        Path(cmd[cmd.index("--out") + 1]).write_text("| backend | recall |\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(served.subprocess, "run", run)
    FilteredAnnCallback(overrides=["+experiment=served_base"], queries=5).on_multirun_end(
        _config(tmp_path))
    (cmd,) = seen
    assert cmd[cmd.index("--cache-dir") + 1] == f"{tmp_path}/.cache/bench"
    report = (tmp_path / "sweep" / "merged-report" / "report.md").read_text()
    assert "## Filtered ANN across selectivity\n\n| backend | recall |" in report


def test_a_failed_script_says_so_in_the_report(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 2, "", "bench: error: no vectors cached\n")

    monkeypatch.setattr(served.subprocess, "run", run)
    FilteredAnnCallback().on_multirun_end(_config(tmp_path))
    report = (tmp_path / "sweep" / "merged-report" / "report.md").read_text()
    assert "**Not produced:** the script exited 2: bench: error: no vectors cached" in report
