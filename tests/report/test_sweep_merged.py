"""The sweep callback also writes the merged report of every job of the multirun."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf
from report_fixture import write_run

from bench.report.sweep import SweepReportCallback


def test_multirun_end_writes_the_merged_html_report(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        write_run(sweep / job, run_id=f"r{job}")
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})
    SweepReportCallback(metric="ndcg@10").on_multirun_end(cfg)
    html = (sweep / "merged-report" / "report.html").read_text()
    assert "<html" in html.lower() and "Budget pruning" in html
    assert (sweep / "merged-report" / "report.md").is_file()
    assert (sweep / "sweep_report.md").is_file()  # the existing outputs stay
