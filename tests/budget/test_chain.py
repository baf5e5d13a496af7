"""ChainBudget: prune only when the bootstrap lower bound is over the ceiling."""

from __future__ import annotations

import numpy as np
import pytest

from bench.budget.chain import ChainBudget, bootstrap_lower, point
from bench.config.build import OptionError


def test_clearly_over_is_pruned_borderline_is_kept() -> None:
    b = ChainBudget(max_e2e_p95_ms=15.0, probe_queries=50, seed=0)
    clearly = np.full(50, 30.0)
    # 47 fast queries and 3 slow ones: the point p95 interpolates between the 47th and 48th
    # sorted values, 10 + (0.95 * 49 - 46) * (30 - 10) = 21 > 15, but a resample with at most
    # two slow queries has p95 = 10, so the lower bound is 10: not over WITH confidence
    borderline = np.r_[np.full(47, 10.0), np.full(3, 30.0)]
    [over] = b.judge({}, clearly, None)
    [kept] = b.judge({}, borderline, None)
    assert over.over and over.bound == over.measured == 30.0
    assert kept.measured == pytest.approx(10 + (0.95 * 49 - 46) * 20)
    assert kept.measured > 15.0 and kept.bound == 10.0 and not kept.over


def test_bound_is_seeded_and_below_the_point() -> None:
    v = np.random.default_rng(1).gamma(2.0, 3.0, 50)
    a = bootstrap_lower(v, "p95", confidence=0.95, resamples=500, seed=7)
    assert a == bootstrap_lower(v, "p95", confidence=0.95, resamples=500, seed=7)
    assert a < point(v, "p95")
    assert bootstrap_lower(v, "mean", confidence=0.95, resamples=500, seed=7) < v.mean()


def test_stage_cost_and_vram_checks() -> None:
    b = ChainBudget(max_stage_p95_ms={"rerank": 5.0}, price_per_hour=3.6,
                    max_cost_per_query=1e-5, max_vram_bytes=1000)
    stage = {"retrieve": np.full(10, 1.0), "rerank": np.full(10, 8.0)}
    checks = {c.name: c for c in b.judge(stage, np.full(10, 9.0), 2000)}
    assert checks["stage_p95_ms[rerank]"].over
    # 3.6 per hour x 9 ms = 3.6 * 9 / 3.6e6 = 9e-6 per query: under 1e-5
    assert checks["cost_per_query"].measured == pytest.approx(3.6 * 9 / 3.6e6)
    assert not checks["cost_per_query"].over
    assert checks["peak_vram_bytes"].over
    assert b.cost_per_query(9.0) == pytest.approx(9e-6)
    # without a GPU reading the VRAM ceiling is not checked (never a silent 0)
    assert "peak_vram_bytes" not in {c.name for c in b.judge(stage, np.full(10, 9.0), None)}


@pytest.mark.parametrize("kwargs,key", [
    ({"max_e2e_p95_ms": 0}, "max_e2e_p95_ms"),
    ({"max_cost_per_query": 1.0}, "max_cost_per_query"),
    ({"price_unit": "tpu_hour"}, "price_unit"),
    ({"probe_queries": 1}, "probe_queries"),
])
def test_bad_options(kwargs: dict, key: str) -> None:
    with pytest.raises(OptionError) as e:
        ChainBudget(**kwargs)
    assert key in str(e.value)


def test_a_stage_ceiling_must_name_a_stage_of_the_run() -> None:
    # the stages come from the plan's query-time ops (Plan.query_time_stages), not a list
    b = ChainBudget(max_stage_p95_ms={"rerankk": 1.0})
    with pytest.raises(OptionError) as e:
        b.check_stages(("embed_query", "retrieve", "fold", "rerank", "rerank_cut"))
    assert e.value.option == "max_stage_p95_ms.rerankk"
    assert "rerank_cut" in e.value.message
    ChainBudget(max_stage_p95_ms={"rerank": 1.0}).check_stages(("retrieve", "rerank"))
