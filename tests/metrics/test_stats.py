"""Bootstrap CIs, paired randomization tests, Holm, category averages, accounting."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bench.metrics.stats import (
    CompletionAccounting,
    bootstrap_ci,
    category_means,
    holm,
    macro_average,
    paired_compare,
    sign_flip_p_value,
    weighted_average,
)


def test_ci_covers_the_true_mean_at_about_95_percent() -> None:
    rng = np.random.default_rng(0)
    covered = 0
    for trial in range(200):
        ci = bootstrap_ci(rng.normal(0.3, 1.0, 200), seed=trial)
        covered += ci.ci_low <= 0.3 <= ci.ci_high
    assert 0.90 <= covered / 200 <= 0.99


def test_ci_is_seeded_and_sized_like_the_normal_approximation() -> None:
    v = np.random.default_rng(1).normal(0.5, 1.0, 400)
    ci = bootstrap_ci(v, seed=3)
    assert ci == bootstrap_ci(v, seed=3)
    assert ci.n == 400 and ci.ci_low < ci.mean < ci.ci_high
    assert ci.ci_high - ci.ci_low == pytest.approx(2 * 1.96 * v.std() / 20, rel=0.15)


def test_empty_values_raise() -> None:
    with pytest.raises(ValueError, match="0 queries"):
        bootstrap_ci(np.array([]))


def test_holm_hand_example() -> None:
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 -> max(0.06, 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_randomization_p_value_sanity() -> None:
    a = np.linspace(0, 1, 100)
    same = paired_compare(a, a)
    assert (same.delta, same.p_value) == (0.0, 1.0)
    better = paired_compare(a, a + 0.2)
    assert better.delta == pytest.approx(0.2)
    assert better.p_value == pytest.approx(1 / 1001)  # no flip reaches a constant shift
    assert better.ci_low == pytest.approx(0.2) and better.mean_b > better.mean_a
    # under the null the p-value is roughly uniform
    rng = np.random.default_rng(2)
    ps = [sign_flip_p_value(rng.normal(0, 1, 50), resamples=500, seed=s) for s in range(100)]
    assert 0.0 <= np.mean(np.array(ps) < 0.05) <= 0.15
    assert 0.35 <= np.mean(ps) <= 0.65


def test_paired_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_compare(np.ones(3), np.ones(4))


def test_category_averages() -> None:
    means = category_means(np.array([1.0, 0.0, 0.5, 0.5, 1.0]), ["a", "a", "b", "b", "c"])
    assert means == {"a": (0.5, 2), "b": (0.5, 2), "c": (1.0, 1)}
    assert macro_average(means) == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert weighted_average(means) == pytest.approx(3.0 / 5)  # by query counts
    assert weighted_average(means, {"a": 2, "b": 1, "c": 1}) == pytest.approx(
        (0.5 * 2 + 0.5 + 1.0) / 4)
    with pytest.raises(ValueError, match="no traffic weight"):
        weighted_average(means, {"a": 1})


def test_completion_accounting() -> None:
    acc = CompletionAccounting(expected=10, scored=8, missing=1, timeout=0, invalid=1,
                               no_claims=0, pruned=0)
    assert not acc.complete
    with pytest.raises(dataclasses.FrozenInstanceError):
        acc.scored = 10  # type: ignore[misc]
    with pytest.raises(ValueError, match="negative"):
        CompletionAccounting(1, 1, -1, 0, 0, 0, 0)


def test_bootstrap_ci_has_nominal_coverage() -> None:
    """Percentile CIs from independent resamples cover the true mean ~95 % of the time.

    Guards the resample streams: with correlated streams (each a one-step shift of the
    previous) the quantiles collapse and coverage falls far below nominal.
    """
    rng = np.random.default_rng(7)
    trials = 200
    covered = 0
    for t in range(trials):
        v = (rng.random(300) < 0.9).astype(np.float64)
        ci = bootstrap_ci(v, resamples=1000, seed=t)
        covered += ci.ci_low <= 0.9 <= ci.ci_high
    assert 0.90 <= covered / trials <= 0.99


def test_bootstrap_resamples_are_not_shifted_copies() -> None:
    from bench_kernels import api

    v = np.arange(50, dtype=np.float64)[None, :]
    means = api.bootstrap_means(v, 200, 0)[0]
    # neighbouring resamples share (almost) nothing: their means are uncorrelated
    assert abs(np.corrcoef(means[:-1], means[1:])[0, 1]) < 0.3


def test_student_t_against_table_values() -> None:
    from bench.metrics.stats import student_t_ppf, student_t_sf

    # t table: t_{0.95, 9} = 1.833113, t_{0.975, 29} = 2.045230, t_{0.95, 1} = 6.313752
    assert student_t_ppf(0.95, 9) == pytest.approx(1.833113, abs=1e-6)
    assert student_t_ppf(0.975, 29) == pytest.approx(2.045230, abs=1e-6)
    assert student_t_ppf(0.95, 1) == pytest.approx(6.313752, abs=1e-6)
    assert student_t_ppf(0.05, 9) == pytest.approx(-1.833113, abs=1e-6)
    assert student_t_sf(0.0, 5) == pytest.approx(0.5)
    # df 1 is Cauchy: P(T > 1) = 1/2 - atan(1) / pi = 0.25
    assert student_t_sf(1.0, 1) == pytest.approx(0.25, abs=1e-12)
    assert student_t_sf(-1.0, 1) == pytest.approx(0.75, abs=1e-12)


def test_tost_hand_example() -> None:
    from bench.metrics.stats import tost

    # deltas sum to 0.05 -> mean 0.005; squared deviations sum to 1850e-6 -> sd^2 = 1850e-6 / 9
    d = np.array([0.01, -0.02, 0.03, 0.00, 0.01, -0.01, 0.02, 0.00, 0.01, 0.00])
    se = np.sqrt(1850e-6 / 9) / np.sqrt(10)  # 0.0045338
    r = tost(np.zeros(10), d, margin=0.02, alpha=0.05)
    assert (r.n, r.delta) == (10, pytest.approx(0.005))
    # 90 % t interval: 0.005 -+ 1.833113 * se = [-0.003311, 0.013311], inside +-0.02
    assert r.ci_low == pytest.approx(0.005 - 1.833113 * se, abs=1e-6)
    assert r.ci_high == pytest.approx(0.005 + 1.833113 * se, abs=1e-6)
    assert r.equivalent
    # t statistics: (0.005 + 0.02) / se = 5.514 and (0.02 - 0.005) / se = 3.3085, df 9;
    # P(T9 > 3.3085) = 0.004553 (t table interpolation: between 3.250 at 0.005 and 3.690
    # at 0.0025)
    assert r.p_upper == pytest.approx(0.0045531, abs=1e-6)
    assert r.p_lower == pytest.approx(0.00018666, abs=1e-7)
    assert r.p_value == r.p_upper < 0.05
    # a margin of 0.01 puts the upper bound 0.013311 outside: not equivalent, p > alpha
    tight = tost(np.zeros(10), d, margin=0.01)
    assert not tight.equivalent and tight.p_value > 0.05
    # consistency: equivalent iff p < alpha, across margins
    for m in np.linspace(0.005, 0.03, 26):
        t = tost(np.zeros(10), d, margin=float(m))
        assert t.equivalent == (t.p_value < 0.05)


def test_tost_without_spread_and_bad_input() -> None:
    from bench.metrics.stats import tost

    a = np.arange(20) / 8  # binary fractions: every delta is exactly 0.25
    r = tost(a, a + 0.25, margin=0.5)
    assert r.equivalent and (r.ci_low, r.ci_high, r.p_value) == (
        pytest.approx(0.25), pytest.approx(0.25), 0.0)
    assert not tost(a, a + 0.5, margin=0.5).equivalent  # the bound itself is outside
    with pytest.raises(ValueError, match="margin"):
        tost(a, a, margin=0.0)
    with pytest.raises(ValueError, match="alpha"):
        tost(a, a, margin=0.1, alpha=0.5)
