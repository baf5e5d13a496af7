"""Budgets on whole chains, budget gates and capacity, end to end on the synthetic corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.errors import ConfigError
from bench.pipeline.run import RunResult, run
from bench.results import schema

BASE = ["dataset=synthetic", "metrics.bootstrap_resamples=200", "reranker=maxsim",
        "reranker.depths=[5,10]", "budget=chain", "budget.probe_queries=4",
        "budget.resamples=200", "budget.max_e2e_p95_ms=null"]


def _run(cache: Path, run_dir: Path, *extra: str) -> RunResult:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        base = [o for o in BASE if not any(o.startswith(g) and f"{g}=none" in extra
                                           for g in ("reranker", "budget"))]
        cfg = compose(config_name="config", overrides=[f"cache_dir={cache}", *base, *extra],
                      return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return run(cfg, run_dir)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def rerank_over(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """A rerank ceiling no reranker can meet: the dense config stays, both depths go."""
    return _run(cache, tmp_path_factory.mktemp("over"), "+budget.max_stage_p95_ms.rerank=1e-6",
                "budget.price_per_hour=3.6",
                "+gates=[{metric: e2e_p95_ms, max: 1e-9}, {metric: ndcg@10, min: 0.0}]")


def _configs(d: Path) -> dict[str, dict]:
    return {r["label"]: r for r in pq.read_table(d / "configs.parquet").to_pylist()}


def test_rerank_ceiling_prunes_reranked_configs_only(rerank_over: RunResult) -> None:
    d = rerank_over.run_dir
    rows = _configs(d)
    assert rows["dense"]["status"] == "ok"
    for label in ("dense>maxsim@5", "dense>maxsim@10"):
        r = rows[label]
        assert r["status"] == "pruned" and r["budget_name"] == "stage_p95_ms[rerank]"
        assert r["budget_limit"] == 1e-6 and r["budget_bound"] > r["budget_limit"]
        assert r["budget_measured"] >= r["budget_bound"] > 0
    table = pq.read_table(d / "configs.parquet")
    assert table.schema.remove_metadata() == schema.CONFIGS
    # cost per query from the configured price: 3.6 per hour x mean ms / 3.6e6 ms per hour
    manifest = json.loads((d / "run.json").read_text())
    probes = {p["label"]: p for p in manifest["budget"]["probes"]}
    assert rows["dense"]["cost_per_query"] > 0 and "probe e2e mean" in rows["dense"]["cost_basis"]
    assert probes["dense"]["n_queries"] == 4
    # CPU run: no GPU reading, so no VRAM figure (null, never 0)
    assert rows["dense"]["peak_vram_bytes"] is None
    saved = manifest["budget"]["work_saved"]
    # the shared scores node and, per depth, the latency and cut nodes were never resolved
    assert saved["skipped_by_stage"] == {"rerank_scores": 1, "rerank": 2, "rerank_cut": 2}
    assert saved["nodes_skipped"] == 5 and saved["configs_pruned"] == 2
    assert saved["seconds_saved_estimate"] > 0


def test_budget_gate_fails_with_exit_3_and_says_by_how_much(rerank_over: RunResult) -> None:
    assert rerank_over.exit_code == 3
    [failed] = rerank_over.failed_gates  # the pruned configs are not gated; ndcg@10 >= 0 holds
    assert failed.startswith(_configs(rerank_over.run_dir)["dense"]["config_id"])
    assert "e2e_p95_ms[all]" in failed and "> max 1e-09 (over by" in failed


def test_budget_gate_passes_with_exit_0(cache: Path, tmp_path: Path) -> None:
    res = _run(cache, tmp_path, "reranker=none", "telemetry=sampled",
               "+gates=[{metric: e2e_p95_ms, max: 1e9}, {metric: recall@10, "
               "scope: 'category:exact_lookup', min: 0.0}]")
    assert res.exit_code == 0 and res.failed_gates == ()
    # the sampled telemetry's manifest lands in run.json (off on a CPU box, saying why)
    tel = json.loads((tmp_path / "run.json").read_text())["telemetry"]
    assert tel["sampler"].startswith("off (") and tel["stages"]
    assert any(s["stage"].startswith("probe ") for s in tel["stages"])


def test_pruned_search_prunes_every_config_below_it(cache: Path, tmp_path: Path) -> None:
    _run(cache, tmp_path, "+budget.max_stage_p95_ms.retrieve=1e-6")
    rows = _configs(tmp_path)
    assert {r["status"] for r in rows.values()} == {"pruned"}
    probes = {p["label"]: p for p in json.loads((tmp_path / "run.json").read_text())
              ["budget"]["probes"]}
    assert not probes["dense"]["by_prefix"]
    for label in ("dense>maxsim@5", "dense>maxsim@10"):
        # never probed: the pruned search node is in their chain
        assert probes[label]["by_prefix"] and probes[label]["n_queries"] == 0
        assert rows[label]["budget_name"] == "stage_p95_ms[retrieve]"


def test_capacity_on_the_dense_chain(cache: Path, tmp_path: Path) -> None:
    # the closed loop, kept by name (the experiment's default is the open-loop study)
    _run(cache, tmp_path, "reranker=none", "budget=none", "+experiment=capacity",
         "capacity.load=closed", "capacity.concurrency=[1,2]", "capacity.max_requests=8",
         "capacity.max_seconds=20",
         "capacity.slo_budget_ms=1e6", "capacity.p95_budget_ms=1e6", "capacity.target_rps=10")
    cap = json.loads((tmp_path / "capacity" / "capacity.json").read_text())
    assert [lv["concurrency"] for lv in cap["levels"]] == [1, 2]
    assert all(lv["n_requests"] == 8 and lv["n_failed"] == 0 for lv in cap["levels"])
    best = max(lv["throughput_rps"] for lv in cap["levels"])
    # N = ceil(T / X) with X the best measured throughput under the p95 budget
    import math

    assert cap["answer"]["workers"] == math.ceil(10 / best - 1e-9)
    assert "CPU worker" in cap["answer"]["text"] and "linear scale-out" in cap["answer"]["text"]
    assert (tmp_path / "capacity" / "capacity.png").stat().st_size > 0
    entry = json.loads((tmp_path / "run.json").read_text())["capacity"]
    assert entry["label"] == "dense" and "embed_queries" in entry["request"]
    report = (tmp_path / "report.md").read_text()  # the answer is in the run's report too
    assert "## Capacity" in report and cap["answer"]["text"] in report


def test_capacity_names_an_unknown_config(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"capacity\.config"):
        _run(cache, tmp_path, "reranker=none", "budget=none", "+experiment=capacity",
             "capacity.config=nope", "capacity.load=closed", "capacity.concurrency=[1]",
             "capacity.max_requests=2")


def test_a_probe_sample_larger_than_the_queries_is_refused_before_work(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match=r"budget\.probe_queries.*500 probe queries, but "
                                          r"this run evaluates 24 queries"):
        _run(cache, tmp_path / "run", "budget.probe_queries=500")
    assert not cache.exists() or not any(cache.rglob("*.parquet"))  # nothing computed
