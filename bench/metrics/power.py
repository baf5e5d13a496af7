"""Power of a paired comparison: the minimum detectable effect (MDE) and the n it needs.

Normal approximation of a two-sided paired test of mean(b - a) = 0 at level ``alpha``:

    MDE = (z_{1 - alpha / (2 m)} + z_{power}) * sd_delta / sqrt(n)
    n   = ceil(((z_{1 - alpha / (2 m)} + z_{power}) * sd_delta / effect) ** 2)

``sd_delta`` is the standard deviation of the per-query paired deltas and ``m`` the number of
comparisons in the Holm family (the configs compared with one baseline). Holm's first step
tests at ``alpha / m`` and later steps at larger levels, so the Bonferroni level ``alpha / m``
used here is the conservative bound: the MDE of a Holm-adjusted comparison is at most this.
The far rejection tail (a true positive effect reported as significantly negative) is left
out, as usual; it is below 1e-6 of the power at any MDE of interest.

When only one config's per-query values are known (a pilot run), the deltas' SD is not
observed. :func:`assumed_delta_sd` derives it from the per-query SD ``s`` of the metric and an
assumed correlation ``rho`` between the two configs' per-query values, assuming equal
variances: ``var(b - a) = 2 s^2 (1 - rho)``. ``rho = 0.5`` gives ``sd_delta = s``; configs of
one retrieval stack typically correlate more (smaller deltas' SD, smaller MDE), so 0.5 errs on
the side of a larger n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

_NORMAL = NormalDist()


@dataclass(frozen=True)
class Power:
    """What a paired comparison at ``n`` queries can see.

    ``mde``: the true mean delta detected with probability ``power`` at the corrected level
    ``alpha / comparisons`` (None when ``sd_delta`` is 0 or n < 2: no spread, no test);
    ``n_needed``: queries for ``target_effect`` at the same level and power (None without a
    target effect).
    """

    n: int
    sd_delta: float
    alpha: float
    power: float
    comparisons: int
    mde: float | None
    target_effect: float | None = None
    n_needed: int | None = None


def _check(alpha: float, power: float, comparisons: int) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if comparisons < 1:
        raise ValueError(f"comparisons must be >= 1, got {comparisons}")


def z_sum(*, alpha: float, power: float, comparisons: int = 1) -> float:
    """z_{1 - alpha / (2 m)} + z_{power}: the MDE in standard errors."""
    _check(alpha, power, comparisons)
    return _NORMAL.inv_cdf(1.0 - alpha / (2.0 * comparisons)) + _NORMAL.inv_cdf(power)


def mde(sd_delta: float, n: int, *, alpha: float = 0.05, power: float = 0.8,
        comparisons: int = 1) -> float | None:
    """Minimum detectable paired effect at ``n`` queries (None when it cannot be computed:
    ``n < 2`` or ``sd_delta`` is 0, where any non-zero delta is seen without error)."""
    if not math.isfinite(sd_delta) or sd_delta < 0:
        raise ValueError(f"sd_delta must be a finite value >= 0, got {sd_delta}")
    k = z_sum(alpha=alpha, power=power, comparisons=comparisons)
    if n < 2 or sd_delta == 0.0:
        return None
    return k * sd_delta / math.sqrt(n)


def n_needed(sd_delta: float, effect: float, *, alpha: float = 0.05, power: float = 0.8,
             comparisons: int = 1) -> int:
    """Queries needed to detect a true paired effect ``effect`` (its sign does not matter)."""
    if not math.isfinite(effect) or effect == 0.0:
        raise ValueError(f"effect must be finite and non-zero, got {effect}")
    if not math.isfinite(sd_delta) or sd_delta < 0:
        raise ValueError(f"sd_delta must be a finite value >= 0, got {sd_delta}")
    k = z_sum(alpha=alpha, power=power, comparisons=comparisons)
    # at least 2: one query has no spread to test against
    return max(2, math.ceil((k * sd_delta / abs(effect)) ** 2))


def achieved_power(effect: float, sd_delta: float, n: int, *, alpha: float = 0.05,
                   comparisons: int = 1) -> float:
    """Probability that the two-sided test at ``alpha / comparisons`` rejects when the true
    paired effect is ``effect`` (both tails; the inverse of :func:`mde`)."""
    _check(alpha, 0.5, comparisons)
    if sd_delta <= 0 or n < 1:
        raise ValueError("sd_delta must be > 0 and n >= 1")
    za = _NORMAL.inv_cdf(1.0 - alpha / (2.0 * comparisons))
    shift = effect * math.sqrt(n) / sd_delta
    return _NORMAL.cdf(shift - za) + _NORMAL.cdf(-shift - za)


def delta_sd(a: np.ndarray, b: np.ndarray) -> float:
    """SD (ddof 1) of the paired deltas ``b - a`` (same queries, same order)."""
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if va.shape != vb.shape:
        raise ValueError(f"paired values differ in length ({va.size} vs {vb.size})")
    if va.size < 2:
        raise ValueError("need >= 2 paired values for a standard deviation")
    return float(np.std(vb - va, ddof=1))


def assumed_delta_sd(values: np.ndarray, *, correlation: float) -> float:
    """SD of paired deltas against a config not yet run, from one config's per-query
    ``values``: ``sqrt(2 (1 - rho)) * sd(values)`` (equal variances assumed)."""
    if not -1.0 <= correlation < 1.0:
        raise ValueError(f"correlation must be in [-1, 1), got {correlation}")
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        raise ValueError("need >= 2 values for a standard deviation")
    return float(math.sqrt(2.0 * (1.0 - correlation)) * np.std(v, ddof=1))


def power_at(sd_delta: float, n: int, *, alpha: float = 0.05, power: float = 0.8,
             comparisons: int = 1, target_effect: float | None = None) -> Power:
    """:class:`Power` of a comparison with deltas' SD ``sd_delta`` at ``n`` queries."""
    return Power(
        n=n, sd_delta=sd_delta, alpha=alpha, power=power, comparisons=comparisons,
        mde=mde(sd_delta, n, alpha=alpha, power=power, comparisons=comparisons),
        target_effect=target_effect,
        n_needed=None if target_effect is None else n_needed(
            sd_delta, target_effect, alpha=alpha, power=power, comparisons=comparisons))
