"""report.md is rendered from the files the run wrote (bench.report.inrun): a finished run
re-rendered later gives the same bytes, for a retrieval run with dense + BM25 + RRF + rerank,
gates and prices, and for a generated run with judges (the judge stage's own section)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.pipeline.run import RunResult, run
from bench.report.inrun import SECTIONS, rerender, run_report

REPO = Path(__file__).resolve().parents[2]


def _run(tmp: pytest.TempPathFactory, overrides: list[str]) -> RunResult:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=[
            "dataset=synthetic", f"cache_dir={tmp.mktemp('cache')}", "report.plot=false",
            *overrides])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return run(cfg, tmp.mktemp("run"))


@pytest.fixture(scope="module")
def retrieval_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _run(tmp_path_factory, [
        "+experiment=hybrid", "fusion=rrf", "metrics.bootstrap_resamples=200",
        "reranker=maxsim", "reranker.depths=[10]", "cost=prices",
        "+gates=[{metric: ndcg@10, scope: all, min: 0.0}, {metric: recall@100, scope: all, "
        "min: 2.0}]"])


@pytest.fixture(scope="module")
def generated_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _run(tmp_path_factory, [
        "+experiment=quickstart", "metrics.bootstrap_resamples=100",
        "generator._target_=test_generation_plan.EchoGenerator", "judge=suite",
        "judge.judges=[faithfulness,answer_relevancy,refusal]", "generation.max_queries=12"])


def _same_when_rerendered(res: RunResult, tmp_path: Path) -> str:
    written = (res.run_dir / "report.md").read_text()
    copy = tmp_path / "copy"
    shutil.copytree(res.run_dir, copy)  # another folder, later: nothing in memory is shared
    (copy / "report.md").unlink()
    assert rerender(copy).read_text() == written
    return written


@pytest.mark.slow
def test_retrieval_report_is_rendered_from_its_files(retrieval_run: RunResult,
                                                     tmp_path: Path) -> None:
    text = _same_when_rerendered(retrieval_run, tmp_path)
    # the sections this run exercises, each from a different file
    for heading in ("## Configs", "## Pre-registered decisions", "## Paired comparisons",
                    "## Reranking", "## Cost per query", "## Release gates: FAILED",
                    "## Cache", "## Resources", "## Chunks"):
        assert heading in text, heading
    assert retrieval_run.exit_code == 3  # the recall@100 >= 2 gate cannot hold


@pytest.mark.slow
def test_generated_report_is_rendered_from_its_files(generated_run: RunResult,
                                                     tmp_path: Path) -> None:
    text = _same_when_rerendered(generated_run, tmp_path)
    # the judge stage's own section travels through report_sections/judge_files.md
    section = (generated_run.run_dir / SECTIONS / "judge_files.md").read_text()
    assert section.startswith("## Judges: calibration and verifiers")
    assert section in text
    report = run_report(generated_run.run_dir)
    assert [s.name for s in report.stage_reports] == ["judge_files"]
    assert report.generation and all(g.n_queries == 12 for g in report.generation)


@pytest.mark.slow
def test_a_report_reads_the_files_not_memory(retrieval_run: RunResult, tmp_path: Path) -> None:
    """Change a number in a written table: the re-rendered report shows the file's number."""
    import pyarrow.parquet as pq

    copy = tmp_path / "copy"
    shutil.copytree(retrieval_run.run_dir, copy)
    t = pq.read_table(copy / "summary.parquet")
    rows = t.to_pylist()
    first = next(r for r in rows if r["scope"] == "all" and r["metric"] == "ndcg@10")
    first["mean"] = 0.123456
    pq.write_table(type(t).from_pylist(rows, schema=t.schema), copy / "summary.parquet")
    assert "| ndcg@10 | 0.1235 |" in rerender(copy).read_text()


@pytest.mark.slow
def test_malformed_run_json_is_one_line_exit_2(retrieval_run: RunResult, tmp_path: Path) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(retrieval_run.run_dir, run_dir)
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["lost_in_middle"] = [{"config_id": "c0"}]  # a record without its fields
    (run_dir / "run.json").write_text(json.dumps(manifest))
    res = subprocess.run([sys.executable, "-m", "bench.report", str(run_dir), "--in-run"],
                         capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "run.json" in lines[0] and "lost_in_middle.0" in lines[0], lines
