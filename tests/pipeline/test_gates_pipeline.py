"""Release gates on answers, judges, whole-request latency, completion and cost, end to end on
the synthetic dataset with the scripted generator of test_generation_plan (EchoGenerator):
exit 3 with each failure's value, bound and margin, exit 0 when they hold, a config error
before any work for a gate no config computes; a generated config's e2e includes its
context and generation, a retrieval config's does not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.errors import ConfigError
from bench.pipeline.e2e import e2e_timings, end_to_end_ms, stage_ms_by_query
from bench.pipeline.run import run
from bench.telemetry.base import StageTiming

GATES_FAIL = ("+gates=[{metric: faithfulness, min: 0.85}, {metric: e2e_p95_ms, max: 1e-9}, "
              "{metric: incomplete_share, max: 0.01}, {metric: ttft_p95_ms, max: 1000}, "
              "{metric: token_f1, min: 0.0}]")
GATES_PASS = ("+gates=[{metric: faithfulness, min: 0.85}, {metric: e2e_p95_ms, max: 1e9}, "
              "{metric: incomplete_share, max: 0.5}, {metric: ttft_p95_ms, max: 1000}]")
PRICES = ("cost=prices", "cost.price_per_hour=3.6", "cost.prompt_price_per_mtok=1.0",
          "cost.output_price_per_mtok=2.0")


def _overrides(cache: Path, *extra: str) -> list[str]:
    return ["+experiment=quickstart", "dataset=synthetic", f"cache_dir={cache}",
            "metrics.bootstrap_resamples=100", "report.plot=false",
            "generator._target_=test_generation_plan.EchoGenerator", "judge=suite",
            "judge.judges=[faithfulness,answer_relevancy,refusal]",
            "reranker=maxsim", "reranker.depths=[10]", "generation.max_queries=12",
            # the scripted judge has no calibration record (bench.judge.calibration)
            "judge.calibration.uncalibrated=allow", *extra]


def _timings(rows: list[dict]) -> tuple[StageTiming, ...]:
    return tuple(StageTiming(t["stage"], t["sample_kind"], t["n_items"], t["wall_ms"],
                             t["device"], t["from_cache"], t["query_id"]) for t in rows)


@pytest.mark.slow
def test_gates_on_answers_latency_completion_and_cost(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "cache"
    res = run(compose_cfg(_overrides(cache, GATES_FAIL, *PRICES)), tmp_path / "r1")
    d = tmp_path / "r1"
    rows = {r["label"]: r for r in pq.read_table(d / "configs.parquet").to_pylist()}
    gen = {k: r for k, r in rows.items() if r["kind"] == "generated"}
    retr = {k: r for k, r in rows.items() if r["kind"] != "generated"}
    assert len(gen) == 2 and len(retr) == 2
    assert res.exit_code == 3
    failed = list(res.failed_gates)
    # e2e fails on every config, with the value, the bound and by how much
    for r in rows.values():
        [line] = [f for f in failed if f.startswith(f"{r['config_id']} e2e_p95_ms[all] ")]
        assert "> max 1e-09 (over by " in line
    # completion: the scripted judge answers non-JSON for 1 query in 4 -> invalid verdicts
    inc = [f for f in failed if "incomplete_share" in f]
    assert sorted(f.split()[0] for f in inc) == sorted(r["config_id"] for r in gen.values())
    assert all("> max 0.01 (over by" in f and "worst metric" in f for f in inc)
    # faithfulness of the scored verdicts is 1.0: the gate holds "when scored"
    assert not any(" faithfulness[" in f for f in failed)
    manifest = json.loads((d / "run.json").read_text())
    gates = manifest["gates"]
    faith = [g for g in gates if g["metric"] == "faithfulness"]
    assert len(faith) == 2 and all(g["passed"] for g in faith)
    assert all("scored of 12 expected" in g["line"] and "invalid" in g["line"] for g in faith)
    # TTFT is gated on the generated configs only; token_f1 too (retrieval configs lack it)
    for metric in ("ttft_p95_ms", "token_f1"):
        assert {g["config_id"] for g in gates if g["metric"] == metric} == {
            r["config_id"] for r in gen.values()}
    assert manifest["failed_gates"] == failed
    report = (d / "report.md").read_text()
    assert "## Release gates: FAILED" in report and "Passed:" in report

    # e2e: a generated config's is the whole request over its 12 answered queries
    timings = pq.read_table(d / "timings.parquet").to_pylist()
    query_stages = ("embed_query", "retrieve", "fold", "rerank", "rerank_cut")
    for r in gen.values():
        raw = _timings([t for t in timings if t["config_id"] == r["config_id"]])
        # the pool's chain run alone for each answered query, one sample per stage
        requests = [t for t in raw if t.sample_kind == "request"]
        assert {t.query_id for t in requests} == {t.query_id for t in raw
                                                   if t.stage == "generate"}
        assert ({t.stage for t in requests} == set(query_stages)) == ("maxsim" in r["label"])
        mine = e2e_timings(raw, query_stages)
        stages = (*query_stages, "context", "generate")
        whole = end_to_end_ms(mine, stages)
        assert r["n_e2e_samples"] == len(whole) == 12
        assert r["e2e_p50_ms"] == pytest.approx(float(np.percentile(whole, 50)), rel=1e-12)
        # per answered query: its retrieval chain, a share of context assembly, its answer
        qids, per = stage_ms_by_query(mine, stages)
        assert len(qids) == 12 and (per["generate"] > 0).all() and (per["context"] > 0).all()
        np.testing.assert_allclose(sum(per.values()), whole)
        assert r["ttft_p99_ms"] == 5.0 and r["tpot_p99_ms"] == 1.0
        assert r["abstention_recall"] is not None
        assert r["abstention_hallucination_rate"] == pytest.approx(1 - r["abstention_recall"])
        assert r["latency_source"] == "whole request: chain + context + generation"
    # retrieval configs: the interleaved latency pass (every query of the synthetic set,
    # warm-up excluded), its requests in latency.parquet
    reqs = pq.read_table(d / "latency.parquet").to_pylist()
    for r in retr.values():
        mine_ms = [x["e2e_ms"] for x in reqs if x["config_id"] == r["config_id"]
                   and not x["warmup"]]
        assert r["latency_source"] == "interleaved" and r["n_e2e_samples"] == len(mine_ms) == 24
        assert r["e2e_p50_ms"] == pytest.approx(float(np.percentile(mine_ms, 50)), rel=1e-12)
        assert r["ttft_p95_ms"] is None
    # cost: worker time + generation tokens (10 prompt tokens, the answer's words out)
    for label, r in gen.items():
        assert r["cost_generation"] is not None and r["cost_embedding"] is not None
        assert (r["cost_rerank"] is not None) == ("maxsim" in label)
        assert r["cost_per_query"] == pytest.approx(sum(
            r[f"cost_{c}"] or 0.0 for c in ("embedding", "retrieval", "rerank", "generation")))
        assert "index storage" in r["cost_unpriced"]
        assert r["cost_p99_per_query"] >= r["cost_p50_per_query"] > 0
    assert all(r["cost_generation"] is None for r in retr.values())
    assert "## Cost per query" in report and "Not priced for" in report
    # a cost gate while storage is unpriced cannot pass
    res_cost = run(compose_cfg(_overrides(cache, "+gates=[{metric: cost_per_query, max: 1.0}]",
                                          *PRICES)), tmp_path / "r2")
    assert res_cost.exit_code == 3
    assert all("covers only the priced parts" in f for f in res_cost.failed_gates)

    # the same run with bounds that hold: exit 0 (every node a cache hit)
    ok = run(compose_cfg(_overrides(cache, GATES_PASS)), tmp_path / "r3")
    assert ok.exit_code == 0 and ok.failed_gates == ()
    assert "## Release gates: passed" in (tmp_path / "r3" / "report.md").read_text()


def test_a_gate_no_config_computes_stops_the_run_before_any_work(compose_cfg,  # type: ignore[no-untyped-def]
                                                                tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={cache}",
                       "+gates=[{metric: ndcg@10, min: 0.1}, {metric: faithfulness, min: 0.85}]"])
    with pytest.raises(ConfigError) as exc:
        run(cfg, tmp_path / "r")
    assert exc.value.key == "gates[1].metric"
    assert "kinds generated" in str(exc.value) and "this run's config kinds: dense" in str(
        exc.value)
    assert exc.value.exit_code == 2
    assert not any(p.is_file() for p in cache.rglob("*"))  # nothing was computed
    with pytest.raises(ConfigError) as exc:
        run(compose_cfg(["dataset=synthetic", f"cache_dir={cache}",
                         "+gates=[{metric: false_exclusion_rate, max: 0.02}]"]), tmp_path / "r")
    assert exc.value.key == "gates[0].metric" and "filters=" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        run(compose_cfg(["dataset=synthetic", f"cache_dir={cache}",
                         "metrics.names=[ndcg@10,faithfulness]"]), tmp_path / "r")
    assert exc.value.key == "metrics.names[1]" and "not a ranking metric" in str(exc.value)
