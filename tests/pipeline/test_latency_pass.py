"""The interleaved latency pass: warm-up excluded and counted, configs interleaved in a seeded
order per query, percentiles with bootstrap CIs; and what a run writes from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.metrics.stats import percentile_ci
from bench.pipeline.latency import LatencySettings, estimate, interleave, sample_queries

SETTINGS = LatencySettings(interleave=True, queries=40, warmup=3, seed=7, resamples=400,
                           confidence=0.95)


class DriftingChain:
    """A fake chain whose every call costs more than the last one of ANY chain (a machine
    slowing down, load building up): a shared clock, as drift is."""

    clock: ClassVar[list[float]] = [0.0]

    def __init__(self, base: float) -> None:
        self.base = base
        self.calls: list[int] = []

    def __call__(self, q: int) -> tuple[dict[str, float], None]:
        self.clock[0] += 1.0
        self.calls.append(q)
        return {"search": self.base + self.clock[0], "embed_query": 1.0}, None


def test_warm_up_is_excluded_and_counted() -> None:
    a = DriftingChain(10.0)
    qids = [f"q{i}" for i in range(100)]
    reqs = interleave([("a", a)], qids, SETTINGS)
    assert len(reqs) == SETTINGS.warmup + SETTINGS.queries
    assert [r.warmup for r in reqs[:3]] == [True] * 3 and not any(r.warmup for r in reqs[3:])
    est = estimate("a", reqs, SETTINGS)
    assert est is not None and (est.n, est.n_warmup) == (40, 3)
    timed = np.asarray([r.e2e_ms for r in reqs if not r.warmup])
    assert est.p95.value == pytest.approx(float(np.percentile(timed, 95)))
    assert est.p95.ci_low <= est.p95.value <= est.p95.ci_high
    # the request's e2e is its stages summed
    assert reqs[5].e2e_ms == pytest.approx(sum(ms for _, ms in reqs[5].stage_ms))


def test_interleaving_spreads_drift_over_configs_alike() -> None:
    """Two identical configs under drift: timed one after the other the second looks far
    slower; interleaved per query in a seeded random order, their medians agree."""
    DriftingChain.clock[0] = 0.0
    a, b = DriftingChain(10.0), DriftingChain(10.0)
    qids = [f"q{i}" for i in range(200)]
    s = LatencySettings(True, 200, 0, 3, 200, 0.95)
    reqs = interleave([("a", a), ("b", b)], qids, s)
    med = {c: float(np.median([r.e2e_ms for r in reqs if r.config_id == c])) for c in "ab"}
    assert abs(med["a"] - med["b"]) < 0.05 * med["a"]
    # every round runs both configs on the same query, in an order drawn per round
    rounds: dict[int, list[tuple[int, str, str]]] = {}
    for r in reqs:
        rounds.setdefault(r.round, []).append((r.position, r.config_id, r.query_id))
    assert all(len({q for _, _, q in rnd}) == 1 and sorted(p for p, _, _ in rnd) == [0, 1]
               for rnd in rounds.values())
    firsts = [min(rnd)[1] for rnd in rounds.values()]
    assert 0.3 < firsts.count("a") / len(firsts) < 0.7
    # sequential timing of the same chains shows the drift as a difference
    DriftingChain.clock[0] = 0.0
    seq_a = [a(q)[0]["search"] for q in range(200)]
    seq_b = [b(q)[0]["search"] for q in range(200)]
    assert np.median(seq_b) - np.median(seq_a) > 150


def test_the_sample_is_seeded_and_the_warm_up_comes_from_it() -> None:
    warm, timed = sample_queries(100, SETTINGS)
    assert (warm, timed) == sample_queries(100, SETTINGS)
    assert len(timed) == 40 and timed == sorted(timed) and set(warm) <= set(timed)
    assert sample_queries(10, SETTINGS)[1] == list(range(10))  # fewer queries: all of them


def test_percentile_ci_covers_and_narrows_with_n() -> None:
    rng = np.random.default_rng(0)
    small = percentile_ci(rng.exponential(10, 30), 95, resamples=500, seed=0)
    big = percentile_ci(rng.exponential(10, 3000), 95, resamples=500, seed=0)
    assert small.ci_low <= small.value <= small.ci_high and small.n == 30
    assert (big.ci_high - big.ci_low) < (small.ci_high - small.ci_low)
    assert big.ci_low < 10 * np.log(20) < big.ci_high  # the exponential's true p95
    with pytest.raises(ValueError):
        percentile_ci(np.zeros(0), 95)


def test_a_run_writes_interleaved_e2e_with_cis(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    cfg = compose_cfg(["dataset=synthetic", "lexical=bm25", f"cache_dir={tmp_path / 'c'}",
                       "metrics.bootstrap_resamples=200", "latency.queries=10",
                       "latency.warmup=2"])
    assert run(cfg, tmp_path / "run").exit_code == 0
    rows = {r["label"]: r for r in pq.read_table(tmp_path / "run/configs.parquet").to_pylist()}
    for r in rows.values():
        assert r["latency_source"] == "interleaved" and r["n_e2e_samples"] == 10
        assert r["n_latency_warmup"] == 2
        assert r["e2e_p95_ci_low"] <= r["e2e_p95_ms"] <= r["e2e_p95_ci_high"]
    reqs = pq.read_table(tmp_path / "run/latency.parquet").to_pylist()
    assert len(reqs) == len(rows) * 12
    dense = rows["dense"]["config_id"]
    stages = {s for r in reqs if r["config_id"] == dense for s in json.loads(r["stage_ms_json"])}
    assert {"embed_query", "retrieve"} <= stages
    bm25 = rows["bm25"]["config_id"]
    assert not any("embed_query" in json.loads(r["stage_ms_json"]) for r in reqs
                   if r["config_id"] == bm25)
    assert "[" in (tmp_path / "run/report.md").read_text().split("## Configs")[1]
    # switched off: the per-op samples summed along the chain, still with CIs
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path / 'c'}",
                       "metrics.bootstrap_resamples=200", "latency.interleave=false"])
    assert run(cfg, tmp_path / "off").exit_code == 0
    (row,) = pq.read_table(tmp_path / "off/configs.parquet").to_pylist()
    assert row["latency_source"] == "sum of stage samples" and row["n_latency_warmup"] is None
    assert row["e2e_p95_ci_low"] <= row["e2e_p95_ms"] <= row["e2e_p95_ci_high"]
    assert not (tmp_path / "off/latency.parquet").exists()


@pytest.mark.parametrize(("key", "value"), [("queries", 0), ("warmup", -1)])
def test_a_bad_latency_setting_is_a_config_error(compose_cfg, tmp_path: Path, key: str,  # type: ignore[no-untyped-def]
                                                 value: int) -> None:
    from bench.errors import ConfigError
    from bench.pipeline.run import run

    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path / 'c'}",
                       f"latency.{key}={value}"])
    with pytest.raises(ConfigError, match=rf"latency\.{key}"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").rglob("_meta.json"))
