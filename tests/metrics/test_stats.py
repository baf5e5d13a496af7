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
