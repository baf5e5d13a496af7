"""The knee search against a system whose attainment curve is known: every request is good
below 40 req/s, half of them above."""

from __future__ import annotations

import pytest

from bench.capacity.knee import Probe, find_knee, wilson
from bench.capacity.metrics import Dist, LevelMetrics

KNEE = 40.0


def level(rate: float, good: int, n: int = 100) -> LevelMetrics:
    d = Dist.of([])
    return LevelMetrics("l", "open", rate, rate, 1.0, None, n, n,
                        {"ok": n, "timeout": 0, "failed": 0, "rate_limited": 0}, 1.0, d, d, d,
                        d, d, {"e2el": 1.0}, good, float(good), good / n)


def step(rate: float, repeat: int) -> LevelMetrics:
    return level(rate, 100 if rate <= KNEE else 50)


def test_knee_bracketed_within_the_asked_width() -> None:
    calls: list[float] = []

    def measure(rate: float, repeat: int) -> LevelMetrics:
        calls.append(rate)
        return step(rate, repeat)

    k = find_knee(measure, start_rps=5.0, attainment=0.9, repeats=2, ci_width=0.1,
                  max_levels=40)
    assert k.stopped_by == "width"
    assert k.ci_low_rps is not None and k.ci_high_rps is not None
    assert k.ci_low_rps <= KNEE < k.ci_high_rps
    assert k.ci_high_rps - k.ci_low_rps <= 0.1 * k.ci_low_rps
    assert k.rate_rps is not None and k.ci_low_rps <= k.rate_rps <= k.ci_high_rps
    assert calls[:8] == [5, 5, 10, 10, 20, 20, 40, 40]  # doubling, two runs per rate
    assert k.levels_run == len(calls) and "knee" in k.text


def test_budgets_and_floor() -> None:
    k = find_knee(step, start_rps=5.0, repeats=2, ci_width=0.01, max_levels=9)
    assert k.stopped_by == "levels" and k.levels_run <= 9 and k.ci_low_rps == 40
    k = find_knee(step, start_rps=5.0, max_rps=30.0, repeats=1)
    assert k.stopped_by == "ceiling" and k.ci_high_rps is None and k.ci_low_rps == 30
    k = find_knee(lambda r, i: level(r, 0), start_rps=8.0, min_rps=2.0, repeats=1)
    assert k.rate_rps is None and k.stopped_by == "floor"
    assert [p.rate_rps for p in k.probes] == [2.0, 4.0, 8.0]


def test_probe_ci_is_never_narrower_than_the_pooled_binomial() -> None:
    # three identical 95 % runs of 40: a t-interval would have zero width
    p = Probe.of(10.0, [level(10, 38, 40)] * 3, target=0.9)
    lo, hi = wilson(114, 120)
    assert (p.ci_low, p.ci_high) == pytest.approx((lo, hi))
    assert p.verdict == "unsure"  # 95 % of 120 does not show >= 90 % with confidence
    p = Probe.of(10.0, [level(10, 100), level(10, 60)], target=0.9)
    assert p.ci_low < 0.5 < p.ci_high and p.verdict == "unsure"
    assert Probe.of(10.0, [level(10, 100)] * 3, target=0.9).verdict == "pass"
    assert Probe.of(10.0, [level(10, 50)] * 3, target=0.9).verdict == "fail"


def test_an_unsure_rate_does_not_end_the_upward_search() -> None:
    # 88 % at 20 req/s is neither shown above nor below 90 %; 40 fails: the bracket is [10, 40]
    def curve(rate: float, repeat: int) -> LevelMetrics:
        return level(rate, 100 if rate <= 10 else 88 if rate <= 20 else 0)

    k = find_knee(curve, start_rps=10.0, repeats=1, max_repeats=2, ci_width=0.1, max_levels=12)
    rates = [p.rate_rps for p in k.probes]
    assert 40.0 in rates and k.ci_low_rps == 10.0 and k.ci_high_rps is not None
    assert k.ci_high_rps <= 40.0


def test_the_quality_knee_reads_the_same_runs() -> None:
    from dataclasses import replace

    from bench.capacity.knee import quality_knee

    def lv(rate: float, good: int, q_good: int, n: int = 200) -> LevelMetrics:
        return replace(level(rate, good, n), quality_good=q_good,
                       quality_goodput_fraction=q_good / n)

    # goodput passes at 10 and 20 req/s, fails at 40; correct answers fall faster: the
    # quality-goodput share passes at 10 only
    runs = {10.0: lv(10, 200, 199), 20.0: lv(20, 199, 120), 40.0: lv(40, 50, 20)}
    k = find_knee(lambda r, i: runs[r], start_rps=10, repeats=1, max_repeats=1,
                  ci_width=10.0, max_rps=40)
    assert k.ci_low_rps == 20.0 and k.ci_high_rps == 40.0
    q = quality_knee(k)
    assert q is not None and q.ci_low_rps == 10.0 and q.ci_high_rps == 20.0
    assert [p.verdict for p in q.probes] == ["pass", "fail", "fail"]
