"""The quality-loss estimate from slice re-weighting and the labelled metrics of reviewed
traffic (bench.traces.quality), by their definitions."""

from __future__ import annotations

import math

import pytest

from bench.data.base import Query
from bench.traces.quality import labelled, labelled_table, reweight, reweight_table

# golden: slice a has 4 queries (mean 3/4), b has 2 (mean 0), u has no value (unanswerable)
VALUES = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, math.nan]
SLICES = ["a", "a", "a", "a", "b", "b", "u"]


def test_reweighting_to_a_window_mix() -> None:
    # window: a 1, b 3, u 4 requests -> the golden set scores half of it
    r = reweight(VALUES, SLICES, ["a"] + ["b"] * 3 + ["u"] * 4, window="w", metric="hit",
                 resamples=500)
    assert r.golden == pytest.approx((4 * 0.75 + 2 * 0.0) / 6)
    assert r.expected == pytest.approx(0.25 * 0.75 + 0.75 * 0.0)
    assert r.delta == pytest.approx(r.expected - r.golden)
    assert r.covered_share == 0.5 and r.requests == 8
    assert r.ci_low <= r.delta <= r.ci_high and r.ci_low < r.ci_high
    rows = {x.slice: x for x in r.slices}
    assert rows["u"].golden_mean is None and rows["u"].traffic_share == 0.5
    assert rows["a"].golden_n == 4 and rows["b"].golden_share == pytest.approx(2 / 7)
    assert "| w | hit | 8 | 0.500 | 0.188 | -0.312 [" in reweight_table([r])
    assert "| 0.50 | u 0.50 |" in reweight_table([r])
    # seeded: the same CI again
    again = reweight(VALUES, SLICES, ["a"] + ["b"] * 3 + ["u"] * 4, window="w", metric="hit",
                     resamples=500)
    assert (again.ci_low, again.ci_high) == (r.ci_low, r.ci_high)


def test_a_window_with_the_golden_mix_expects_no_change() -> None:
    r = reweight(VALUES, SLICES, ["a", "a", "b"] * 10, window="w", metric="hit",
                 resamples=300)
    assert r.delta == pytest.approx(0.0) and r.covered_share == 1.0
    assert r.ci_low < 0.0 < r.ci_high  # the window's own sampling still spreads it


def test_a_window_the_golden_set_cannot_score_is_refused() -> None:
    with pytest.raises(ValueError, match="no request of window 'w'"):
        reweight(VALUES, SLICES, ["u", "new"], window="w", metric="hit")


def test_labelled_metrics_pair_candidates_with_production() -> None:
    reviewed = [Query("trace-t1", "q1", qrels=(("d1", 1),)),
                Query("trace-t2", "q2", qrels=(("d2", 1),)),
                Query("trace-t3", "q3", must_abstain=True)]  # no ranking metric
    lists = {"production": {"t1": ["d1", "d3"], "t2": ["d3", "d4"], "t3": ["d1"]},
             "cand": {"t1": ["d3", "d1"], "t2": ["d2"], "t3": ["d9"]},
             "same": {"t1": ["d1", "d3"], "t2": ["d3", "d4"]}}
    rows = {(r.candidate, r.metric): r for r in labelled(reviewed, lists, resamples=200)}
    nd = rows[("cand", "ndcg@10")].comparison
    # t1: relevant at rank 2 -> 1 / log2(3); t2: at rank 1 -> 1; production: 1 and 0
    assert rows[("cand", "ndcg@10")].n == 2
    assert nd.mean_b == pytest.approx((1 / math.log2(3) + 1.0) / 2)
    assert nd.mean_a == pytest.approx(0.5)
    hit = rows[("cand", "hit_rate@10")].comparison
    assert (hit.mean_a, hit.mean_b, hit.delta) == (0.5, 1.0, 0.5)
    assert all(rows[("same", m)].comparison.delta == 0.0
               for m in ("ndcg@10", "recall@10", "hit_rate@10"))
    assert "| cand | hit_rate@10 | 2 | 0.500 | 1.000 | +0.500 [" in labelled_table(
        list(rows.values()))
