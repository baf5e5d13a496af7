"""Minimum detectable effect and n needed: closed form, inverse, and simulated power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.metrics.power import (
    achieved_power,
    assumed_delta_sd,
    delta_sd,
    mde,
    n_needed,
    power_at,
    z_sum,
)
from bench.metrics.stats import sign_flip_p_value

# z_{0.975} and z_{0.8} from a normal table
Z975, Z80 = 1.959964, 0.841621


def test_closed_form_values() -> None:
    assert z_sum(alpha=0.05, power=0.8) == pytest.approx(Z975 + Z80, abs=1e-6)
    # sd 0.3 over 600 queries: (1.959964 + 0.841621) * 0.3 / sqrt(600)
    assert mde(0.3, 600) == pytest.approx((Z975 + Z80) * 0.3 / math.sqrt(600), rel=1e-6)
    # Bonferroni over 4 comparisons: z_{1 - 0.05 / 8} = 2.497705
    assert mde(0.3, 600, comparisons=4) == pytest.approx(
        (2.497705 + Z80) * 0.3 / math.sqrt(600), rel=1e-6)
    # n for an effect of 0.02 at sd 0.3: ((2.801585 * 0.3) / 0.02) ** 2 = 1765.9 -> 1766
    assert n_needed(0.3, 0.02) == 1766
    assert n_needed(0.3, -0.02) == 1766
    assert mde(0.0, 600) is None and mde(0.3, 1) is None


def test_mde_and_n_needed_are_inverse() -> None:
    for sd, n, m in [(0.25, 600, 1), (0.4, 120, 5), (0.1, 3000, 2)]:
        effect = mde(sd, n, comparisons=m)
        assert effect is not None
        assert n_needed(sd, effect, comparisons=m) in (n, n + 1)  # ceil of a float round-trip
        assert achieved_power(effect, sd, n, comparisons=m) == pytest.approx(0.8, abs=1e-6)


def test_power_record_and_bad_input() -> None:
    p = power_at(0.3, 600, comparisons=2, target_effect=0.01)
    assert p.mde == mde(0.3, 600, comparisons=2)
    assert p.n_needed == n_needed(0.3, 0.01, comparisons=2)
    with pytest.raises(ValueError, match="alpha"):
        mde(0.3, 100, alpha=1.5)
    with pytest.raises(ValueError, match="comparisons"):
        mde(0.3, 100, comparisons=0)
    with pytest.raises(ValueError, match="effect"):
        n_needed(0.3, 0.0)


def test_delta_sd_and_assumed_correlation() -> None:
    a = np.array([0.0, 1.0, 0.5, 0.25])
    b = a + np.array([0.1, -0.1, 0.1, -0.1])
    # deltas +-0.1, mean 0: sample variance 4 * 0.01 / 3
    assert delta_sd(a, b) == pytest.approx(math.sqrt(0.04 / 3))
    v = np.random.default_rng(0).random(500)
    s = float(np.std(v, ddof=1))
    assert assumed_delta_sd(v, correlation=0.5) == pytest.approx(s)
    assert assumed_delta_sd(v, correlation=0.0) == pytest.approx(math.sqrt(2) * s)
    with pytest.raises(ValueError, match="correlation"):
        assumed_delta_sd(v, correlation=1.0)


def _simulated_power(deltas: np.ndarray, alpha: float, m: int) -> float:
    """Share of trials (rows) whose two-sided z test on the mean rejects at alpha / m."""
    n = deltas.shape[1]
    z = deltas.mean(axis=1) / (deltas.std(axis=1, ddof=1) / math.sqrt(n))
    crit = z_sum(alpha=alpha, power=0.5, comparisons=m)  # z_{0.5} = 0: the critical value
    return float(np.mean(np.abs(z) > crit))


def test_simulated_power_at_the_mde_is_about_80_percent() -> None:
    rng = np.random.default_rng(7)
    trials, n, sd = 4000, 300, 0.3
    for m in (1, 3):
        effect = mde(sd, n, comparisons=m)
        assert effect is not None
        got = _simulated_power(rng.normal(effect, sd, (trials, n)), 0.05, m)
        # binomial SE of a share of 4000 at 0.8 is 0.0063
        assert got == pytest.approx(0.8, abs=0.025), m


def test_simulated_power_holds_for_ternary_deltas() -> None:
    # per-query deltas of a hit-rate-like metric: -1, 0 or +1 (far from normal)
    rng = np.random.default_rng(11)
    trials, n = 4000, 400
    probs = np.array([0.10, 0.76, 0.14])  # mean +0.04
    support = np.array([-1.0, 0.0, 1.0])
    mean = float(probs @ support)
    sd = math.sqrt(float(probs @ support**2) - mean**2)
    effect = mde(sd, n)
    assert effect is not None
    # scale n so the true mean sits exactly at the MDE
    n_at = n_needed(sd, mean)
    deltas = rng.choice(support, size=(trials, n_at), p=probs)
    assert _simulated_power(deltas, 0.05, 1) == pytest.approx(0.8, abs=0.03)


def test_bench_sign_flip_test_reaches_the_power_at_the_mde() -> None:
    # the test the comparisons actually use (sign-flip p at the Bonferroni level)
    rng = np.random.default_rng(3)
    trials, n, sd, m = 200, 150, 0.3, 2
    effect = mde(sd, n, comparisons=m)
    assert effect is not None
    hits = sum(sign_flip_p_value(rng.normal(effect, sd, n), resamples=2000, seed=t)
               < 0.05 / m for t in range(trials))
    # SE of a share of 200 at 0.8 is 0.028; the randomization test is close to the z test
    assert hits / trials == pytest.approx(0.8, abs=0.09)
