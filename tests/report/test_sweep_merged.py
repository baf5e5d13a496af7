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


def test_sweep_pareto_is_drawn_on_end_to_end_latency(tmp_path: Path) -> None:
    """A fused lane has no search latency of its own and a reranked one pays its reranker:
    the sweep's front uses each config's end-to-end p95 (fixture means are equal, 0.5, except
    config 6's, so the front is the lowest end-to-end latency among the 0.5s)."""
    import pyarrow.parquet as pq

    from bench.report.sweep import write_sweep_report

    sweep = tmp_path / "sweep"
    e2e = [40.0, 30.0, 1.5, 20.0, 21.0, 22.0, 23.0, 24.0, None]  # #2 fused: fastest chain
    write_run(sweep / "0", extra={"e2e_p95_ms": e2e})
    write_sweep_report(sweep, metric="ndcg@10")
    rows = pq.read_table(sweep / "sweep_configs.parquet").to_pylist()
    front = [r["label"] for r in rows if r["on_pareto_front"]]
    assert front == ["rrf(k=60)"], front
    assert [r["e2e_p95_ms"] for r in rows] == e2e
    assert "e2e p95 ms" in (sweep / "sweep_report.md").read_text()
