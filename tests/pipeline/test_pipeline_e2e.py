"""The whole pipeline on the tiny synthetic corpus with the packaged MiniLM (seconds, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.metrics.engine import Qrels, Run, evaluate
from bench.pipeline.device import cuda_available
from bench.pipeline.run import RunResult, run
from bench.results import schema
from tests.cli import bench, bench_in_process


def overrides(cache: Path, *extra: str) -> list[str]:
    return ["dataset=synthetic", f"cache_dir={cache}", "metrics.bootstrap_resamples=200", *extra]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path]:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    cache = tmp_path_factory.mktemp("cache")
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides(cache), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]  # the app's task function never sees it either
    run_dir = tmp_path_factory.mktemp("run1")
    return run(cfg, run_dir), cache


def test_writes_every_result_file(first_run: tuple[RunResult, Path]) -> None:
    result, _ = first_run
    d = result.run_dir
    for name in ("run.json", "per_query.parquet", "timings.parquet", "summary.parquet",
                 "report.md", "report.png"):
        assert (d / name).is_file(), name
    for name, expected in schema.TABLES.items():
        table = pq.read_table(d / f"{name}.parquet")
        assert table.schema.remove_metadata() == expected, name
        assert set(table["schema_version"].to_pylist()) <= {schema.SCHEMA_VERSION}
        # one lane: nothing to compare; no filter: no per-query filter rows; no generated
        # config: no judge verdict
        assert name in ("comparisons", "filters", "judgements") or table.num_rows > 0, name
    manifest = json.loads((d / "run.json").read_text())
    for key in ("config", "git_sha", "packages", "device", "dataset", "seeds", "cache"):
        assert key in manifest
    assert manifest["device"] == "cpu"
    assert result.exit_code == 0
    chunks = manifest["chunks"]
    assert chunks["stats"]["traceability_pct"] == 100.0
    assert chunks["stats"]["n_chunks"] == manifest["dataset"]["chunks"] > 0
    assert 0.0 <= chunks["near_duplicates"]["cross_doc_rate"] <= 1.0
    assert "## Chunks" in (d / "report.md").read_text()


def test_retrieval_quality_is_real(first_run: tuple[RunResult, Path]) -> None:
    result, _ = first_run
    overall = {r.metric: r for r in result.summary if r.scope == "all"}
    # the synthetic corpus is built so that a sentence embedder finds the gold documents
    assert overall["recall@100"].mean is not None and overall["recall@100"].mean > 0.8
    r = overall["ndcg@10"]
    assert r.ci_low is not None and r.ci_high is not None and r.mean is not None
    assert r.ci_low <= r.mean <= r.ci_high and r.n > 0


def test_trec_export_scores_the_same(first_run: tuple[RunResult, Path]) -> None:
    """One implementation, two doors: the exported run file re-scores to the same values."""
    result, _ = first_run
    d = result.run_dir
    [trec] = list(d.glob("run.*.trec"))
    runs: dict[str, dict[str, float]] = {}
    for line in trec.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        runs.setdefault(qid, {})[doc] = float(score)
    pq_rows = pq.read_table(d / "per_query.parquet").to_pylist()
    mine = {(r["query_id"], r["metric"]): r["value"] for r in pq_rows}
    from bench.data.synthetic import SyntheticDataset

    ds = SyntheticDataset().load()
    ev = evaluate(Qrels.from_mapping({q.query_id: dict(q.qrels) for q in ds.queries}),
                  Run.from_mapping(runs), ["ndcg@10", "recall@100", "map"])
    for metric, vals in ev.values.items():
        for qid, v in zip(ev.query_ids, vals, strict=True):
            assert abs(mine[(qid, metric)] - v) < 1e-9


def test_second_run_is_all_cache_hits(first_run: tuple[RunResult, Path], tmp_path: Path) -> None:
    _, cache = first_run
    res = bench(*overrides(cache), f"hydra.run.dir={tmp_path}/r2")
    assert res.returncode == 0, res.stderr[-2000:]
    manifest = json.loads((tmp_path / "r2" / "run.json").read_text())
    assert manifest["cache"]["hits"] and all(manifest["cache"]["hits"].values())


def test_downstream_knob_reuses_upstream(first_run: tuple[RunResult, Path],
                                         tmp_path: Path) -> None:
    _, cache = first_run
    res = bench(*overrides(cache, "retriever.k=20"), f"hydra.run.dir={tmp_path}/r3")
    assert res.returncode == 0, res.stderr[-2000:]
    hits = json.loads((tmp_path / "r3" / "run.json").read_text())["cache"]["hits"]
    assert hits["chunk"] and hits["embed_docs"] and hits["embed_queries"] and hits["index"]
    assert not any(v for k, v in hits.items() if k.startswith("retrieve"))


BAD_CONFIG = [
    (["embedder.batch_size=0"], "embedder.batch_size"),
    (["seed=abc"], "seed"),
    (["+embedder.bogus=1"], "embedder.bogus"),
    (["metrics.names=[ndcg@x]"], "metrics.names[0]"),
    (["device=tpu"], "device"),
    pytest.param(["device=cuda"], "device",
                 marks=pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")),
]


@pytest.mark.parametrize(("args", "key"), BAD_CONFIG)
def test_bad_config_exits_2_with_one_line(args: list[str], key: str, tmp_path: Path) -> None:
    run = bench if args == BAD_CONFIG[0][0] else bench_in_process  # tests/cli.py
    res = run("dataset=synthetic", f"cache_dir={tmp_path}", f"hydra.run.dir={tmp_path}/r",
              *args)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert key in lines[0] and "Traceback" not in res.stderr


def test_vectors_are_normalised(first_run: tuple[RunResult, Path]) -> None:
    _, cache = first_run
    [vec] = list((cache / "embed_docs").rglob("vectors.npy"))
    v = np.load(vec)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)


def _run_with(cache: Path, run_dir: Path, *extra: str) -> RunResult:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides(cache, *extra),
                      return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return run(cfg, run_dir)


def test_budget_prunes_and_counts(first_run: tuple[RunResult, Path], tmp_path: Path) -> None:
    _, cache = first_run
    res = _run_with(cache, tmp_path, "budget=latency",
                    "budget.max_stage_p95_ms.retrieve=0.000001", "budget.probe_queries=5")
    configs = pq.read_table(tmp_path / "configs.parquet").to_pylist()
    assert len(configs) == 1
    assert configs[0]["pruned_reason"].startswith("stage_p95_ms[retrieve]")
    # pruned configs stay in every table: summary rows with n = 0, no mean, all pruned
    summary = pq.read_table(tmp_path / "summary.parquet").to_pylist()
    assert summary and all(r["n"] == 0 and r["mean"] is None for r in summary)
    assert all(r["n_pruned"] == r["n_expected"] > 0 for r in summary)
    per_query = pq.read_table(tmp_path / "per_query.parquet").to_pylist()
    assert per_query and {r["status"] for r in per_query} == {"pruned"}
    assert all(r["value"] is None for r in per_query)
    manifest = json.loads((tmp_path / "run.json").read_text())
    [completion] = [c["completion"] for c in manifest["configs"].values()]
    assert completion["pruned"] == completion["expected"] > 0 and completion["scored"] == 0
    assert "Pruned by budget" in (tmp_path / "report.md").read_text()
    assert res.exit_code == 0


def test_failed_gate_exits_3(first_run: tuple[RunResult, Path], tmp_path: Path) -> None:
    _, cache = first_run
    res = _run_with(cache, tmp_path, "+gates=[{metric: ndcg@10, scope: all, min: 1.01}]")
    assert res.exit_code == 3
    assert res.failed_gates and "ndcg@10[all]" in res.failed_gates[0]
    ok = _run_with(cache, tmp_path / "ok", "+gates=[{metric: ndcg@10, scope: all, min: 0.0}]")
    assert ok.exit_code == 0


def test_passing_gates_say_so(first_run: tuple[RunResult, Path], tmp_path: Path) -> None:
    _, cache = first_run
    res = bench(*overrides(cache), "+gates=[{metric: ndcg@10, scope: all, min: 0.0}]",
                f"hydra.run.dir={tmp_path}/g")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "bench: 1 release gate passed" in res.stderr
