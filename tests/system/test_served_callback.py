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


def test_the_section_waits_for_a_report_written_after_the_callback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra calls on_multirun_end in reverse order: this callback runs before the sweep
    report's, when no merged report exists yet. Its section must reach the report written
    after it."""
    from bench.report.sweep import append_sections

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        Path(cmd[cmd.index("--out") + 1]).write_text("| backend | recall |\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(served.subprocess, "run", run)
    cfg = _config(tmp_path)
    report = tmp_path / "sweep" / "merged-report" / "report.md"
    report.unlink()
    FilteredAnnCallback().on_multirun_end(cfg)
    assert not report.exists()
    report.write_text("# report\n")  # what bench.report writes next, then the sweep appends
    append_sections(tmp_path / "sweep")
    assert report.read_text() == ("# report\n\n## Filtered ANN across selectivity\n\n"
                                  "| backend | recall |\n")


@pytest.mark.slow  # a real multirun (a job, the sweep report, the filtered-ANN script with a
# PostgreSQL server): the callback order is Hydra's, so only a real multirun shows it
def test_a_real_multirun_of_the_experiment_has_the_table_in_its_merged_report(
        tmp_path: Path) -> None:
    import os
    import sys

    tiny = ["dataset=synthetic", "~dataset.max_docs", "dataset.n_docs=30", "dataset.n_queries=8",
            "embedder=static_l3", "subset.max_queries=null"]
    cmd = [sys.executable, "-m", "bench", "+experiment=served",
           "hydra.sweeper.params=null",  # one job: the experiment's base config, no servers
           *tiny, "metrics.bootstrap_resamples=200", f"cache_dir={tmp_path / 'cache'}",
           f"hydra.sweep.dir={tmp_path / 'sweep'}",
           # each element quoted: Hydra's grammar takes no '+' or '--' in a bare list value
           "hydra.callbacks.filtered_ann.overrides=["
           + ",".join(f"'{a}'" for a in ["+experiment=served_base", *tiny, "--no-milvus"])
           + "]",
           "hydra.callbacks.filtered_ann.queries=4"]
    env = {**os.environ, "PYTHONPATH": f"{served.REPO}{os.pathsep}{served.REPO / 'kernels'}",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = (tmp_path / "sweep" / "merged-report" / "report.md").read_text()
    table = (tmp_path / "sweep" / "filtered_ann.md").read_text()
    assert f"\n## Filtered ANN across selectivity\n\n{table}" in report
    assert "Not produced" not in report
