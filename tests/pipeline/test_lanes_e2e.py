"""Dense + BM25 + fused lanes, filters run both ways, and the sweep report, on the synthetic
corpus (seconds, CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.pipeline.run import RunResult, run
from bench.report.sweep import write_sweep_report

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lanes_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    cache = tmp_path_factory.mktemp("cache")
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=[
            "dataset=synthetic", f"cache_dir={cache}", "metrics.bootstrap_resamples=200",
            "lexical=bm25", "fusion=rrf_and_convex", "filters=hard_vs_soft",
            "index=hnsw", "index.query_params=[{ef_search: 8}, {ef_search: 64}]"])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return run(cfg, tmp_path_factory.mktemp("run"))


def test_every_lane_is_a_config(lanes_run: RunResult) -> None:
    configs = pq.read_table(lanes_run.run_dir / "configs.parquet").to_pylist()
    labels = [c["label"] for c in configs]
    # 2 dense settings + bm25 + 1 rrf + 6 convex = 10 lanes, each filtered hard and soft
    assert len(labels) == 20
    assert "dense(ef_search=8)|hard" in labels and "bm25|soft" in labels
    assert "rrf(k=60)|hard" in labels
    # entitlement is enforced by the filter: no caller sees a document outside its roles
    assert all(c["unauthorized_hits"] == 0 for c in configs)
    assert all(c["qps"] is not None for c in configs if c["kind"] == "dense")


def test_ann_recall_is_reported_against_exact(lanes_run: RunResult) -> None:
    rows = [r for r in lanes_run.summary if r.metric == "ann_recall@10" and r.scope == "all"]
    assert len(rows) == 4  # two ef_search settings x hard/soft
    assert all(r.mean is not None and 0.0 <= r.mean <= 1.0 for r in rows)


def test_lanes_are_compared_pairwise(lanes_run: RunResult) -> None:
    comparisons = pq.read_table(lanes_run.run_dir / "comparisons.parquet").to_pylist()
    first = {c["baseline_config_id"] for c in comparisons}
    assert len(first) == 1
    overall = [c for c in comparisons if c["scope"] == "all" and c["metric"] == "ndcg@10"]
    assert len(overall) == 19
    for c in overall:
        assert abs(c["delta"] - (c["mean_config"] - c["mean_baseline"])) < 1e-12
        assert 0.0 < c["p_value"] <= c["p_holm"] <= 1.0


def test_hard_vs_soft_decision_is_recorded(lanes_run: RunResult) -> None:
    manifest = json.loads((lanes_run.run_dir / "run.json").read_text())
    decisions = manifest["filter_decisions"]
    assert len(decisions) == 10
    for d in decisions:
        assert d.get("choice") in ("hard", "soft") or "error" in d
    assert "Hard filter or soft boost?" in (lanes_run.run_dir / "report.md").read_text()


def test_sweep_report_counts_missing_jobs(lanes_run: RunResult, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(lanes_run.run_dir, tmp_path / "0")
    (tmp_path / "1" / ".hydra").mkdir(parents=True)  # a job that never finished
    out = write_sweep_report(tmp_path)
    text = out.read_text()
    assert "missing (failed or unfinished) jobs: 1 (1)" in text
    assert len(pq.read_table(tmp_path / "sweep_configs.parquet")) == 20


def test_multirun_writes_sweep_report(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "bench", "-m", "dataset=synthetic", f"cache_dir={tmp_path}/c",
         "embedder=static_l3",  # the sweep report is checked, not an encoder (half the seconds)
         "metrics.bootstrap_resamples=100", "retriever.k=5,10",
         f"hydra.sweep.dir={tmp_path}/sweep"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    report = (tmp_path / "sweep" / "sweep_report.md").read_text()
    assert "2 finished jobs" in report
