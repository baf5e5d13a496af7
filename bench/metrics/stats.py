"""Statistics of per-query values: bootstrap CIs, paired comparisons, Holm, category averages,
equivalence (TOST).

All resampling is seeded and runs in ``bench_kernels`` (counter-based RNG: the same seed gives
the same numbers on any thread count or device). Conventions: docs/metrics.md
("Statistics and reports").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench_kernels import api


@dataclass(frozen=True)
class MeanCI:
    """A mean with its bootstrap percentile CI over ``n`` values."""

    mean: float
    ci_low: float
    ci_high: float
    n: int


@dataclass(frozen=True)
class PairedComparison:
    """B versus A on the same queries: delta = mean(b - a), its CI, sign-flip p-value."""

    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int


@dataclass(frozen=True)
class CompletionAccounting:
    """Where every expected query went (docs/metrics.md): reported with every result."""

    expected: int
    scored: int
    missing: int
    timeout: int
    invalid: int
    no_claims: int
    pruned: int

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 0:
                raise ValueError(f"CompletionAccounting.{name} is negative ({value})")

    @property
    def complete(self) -> bool:
        """True when every expected query was scored."""
        return self.scored == self.expected


def _values(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        raise ValueError("no values: a mean over 0 queries is undefined (check n first)")
    if not np.isfinite(v).all():
        raise ValueError("values hold NaN or infinity")
    return v


def _percentiles(means: np.ndarray, confidence: float) -> tuple[float, float]:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def bootstrap_ci(
    values: np.ndarray,
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    device: str = "cpu",
) -> MeanCI:
    """Mean of ``values`` and its bootstrap percentile CI. Raises ValueError when empty."""
    v = _values(values)
    means = api.bootstrap_means(v[None, :], resamples, seed, device=device)[0]
    lo, hi = _percentiles(means, confidence)
    return MeanCI(mean=float(v.mean()), ci_low=lo, ci_high=hi, n=int(v.size))


@dataclass(frozen=True)
class PercentileCI:
    """The ``q``-th percentile of ``n`` values (e.g. request latencies) and its bootstrap
    percentile CI: resampling the requests, so a p99 of 50 requests shows how little it
    rests on."""

    q: float
    value: float
    ci_low: float
    ci_high: float
    n: int


def percentile_ci(values: np.ndarray, q: float, *, resamples: int = 1000, seed: int = 0,
                  confidence: float = 0.95) -> PercentileCI:
    """``np.percentile(values, q)`` (linear interpolation) and its CI from ``resamples``
    bootstrap resamples of the values. Raises ValueError when empty."""
    v = _values(values)
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be in [0, 100], got {q}")
    rng = np.random.default_rng(seed)
    boot = np.empty(resamples)
    for start in range(0, resamples, 256):  # bounded memory for long request logs
        idx = rng.integers(0, v.size, size=(min(256, resamples - start), v.size))
        boot[start:start + idx.shape[0]] = np.percentile(v[idx], q, axis=1)
    lo, hi = _percentiles(boot, confidence)
    return PercentileCI(q, float(np.percentile(v, q)), lo, hi, int(v.size))


def sign_flip_p_value(
    deltas: np.ndarray, *, resamples: int = 1000, seed: int = 0, device: str = "cpu"
) -> float:
    """Two-sided paired randomization test of mean(deltas) = 0 (random sign flips).

    p = (1 + #{|flipped mean| >= |observed mean|}) / (1 + resamples): never 0, and 1 when
    every delta is 0. The comparison allows a relative 1e-9 so float noise counts as a tie.
    """
    d = _values(deltas)
    observed = abs(float(d.mean()))
    threshold = observed - 1e-9 * max(observed, float(np.abs(d).max()), 1e-300)
    count = api.sign_flip_count(d, resamples, seed, threshold, device=device)
    return (1.0 + count) / (1.0 + resamples)


def paired_compare(
    a: np.ndarray,
    b: np.ndarray,
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    device: str = "cpu",
) -> PairedComparison:
    """Paired comparison of configs A and B on the same queries (``a[i]``, ``b[i]`` pair up).

    delta = b - a: positive means B scores higher.
    """
    va, vb = _values(a), _values(b)
    if va.shape != vb.shape:
        raise ValueError(f"paired values differ in length ({va.size} vs {vb.size})")
    d = vb - va
    means = api.bootstrap_means(d[None, :], resamples, seed, device=device)[0]
    lo, hi = _percentiles(means, confidence)
    return PairedComparison(
        mean_a=float(va.mean()),
        mean_b=float(vb.mean()),
        delta=float(d.mean()),
        ci_low=lo,
        ci_high=hi,
        p_value=sign_flip_p_value(d, resamples=resamples, seed=seed, device=device),
        n=int(d.size),
    )


@dataclass(frozen=True)
class Equivalence:
    """TOST of B versus A on the same queries: is |mean(b - a)| < ``margin``?

    ``ci_low`` / ``ci_high``: the (1 - 2 alpha) t interval of the mean delta; ``p_lower`` tests
    H0 delta <= -margin, ``p_upper`` H0 delta >= +margin, ``p_value`` is the larger.
    ``equivalent`` iff the interval lies strictly inside (-margin, +margin), which is the same
    as ``p_value < alpha``.
    """

    mean_a: float
    mean_b: float
    delta: float
    margin: float
    alpha: float
    ci_low: float
    ci_high: float
    p_lower: float
    p_upper: float
    p_value: float
    n: int
    equivalent: bool


def tost(a: np.ndarray, b: np.ndarray, *, margin: float, alpha: float = 0.05) -> Equivalence:
    """Two one-sided paired t tests (Schuirmann's TOST) of ``b - a`` against +-``margin``.

    A closed-form t test rather than the bootstrap: its interval and p-value agree exactly
    (equivalent iff p < alpha) and it can be checked by hand. Deltas without spread (every
    delta equal) are equivalent iff that delta is strictly inside the margin.
    """
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be > 0, got {margin}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    va, vb = _values(a), _values(b)
    if va.shape != vb.shape:
        raise ValueError(f"paired values differ in length ({va.size} vs {vb.size})")
    if va.size < 2:
        raise ValueError("TOST needs >= 2 paired values")
    d = vb - va
    n, mean = int(d.size), float(d.mean())
    se = float(np.std(d, ddof=1)) / math.sqrt(n)
    if se == 0.0:
        p_lo = 0.0 if mean > -margin else 1.0
        p_hi = 0.0 if mean < margin else 1.0
        lo = hi = mean
    else:
        df = n - 1
        p_lo = student_t_sf((mean + margin) / se, df)
        p_hi = student_t_sf((margin - mean) / se, df)
        half = student_t_ppf(1.0 - alpha, df) * se
        lo, hi = mean - half, mean + half
    return Equivalence(
        mean_a=float(va.mean()), mean_b=float(vb.mean()), delta=mean, margin=margin,
        alpha=alpha, ci_low=lo, ci_high=hi, p_lower=p_lo, p_upper=p_hi,
        p_value=max(p_lo, p_hi), n=n, equivalent=-margin < lo and hi < margin)


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _beta_inc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (no SciPy in the core)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    tail = 0.5 * _beta_inc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def student_t_ppf(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`student_t_sf`)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -student_t_ppf(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while student_t_sf(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if student_t_sf(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order (monotone, capped at 1)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m, dtype=np.float64)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def category_means(values: np.ndarray, categories: Sequence[str]) -> dict[str, tuple[float, int]]:
    """``{category: (mean, n)}`` in first-seen order."""
    v = np.asarray(values, dtype=np.float64)
    cats = np.asarray(categories, dtype=object)
    if v.shape != cats.shape:
        raise ValueError("values and categories differ in length")
    out: dict[str, tuple[float, int]] = {}
    for c in dict.fromkeys(cats.tolist()):
        sel = v[cats == c]
        out[str(c)] = (float(sel.mean()), int(sel.size))
    return out


def macro_average(means: Mapping[str, tuple[float, int]]) -> float:
    """Each category counts equally (input: ``category_means`` output)."""
    if not means:
        raise ValueError("no category to average")
    return float(np.mean([m for m, _ in means.values()]))


def weighted_average(
    means: Mapping[str, tuple[float, int]], weights: Mapping[str, float] | None = None
) -> float:
    """Traffic-weighted average over categories.

    ``weights`` (any positive scale, normalised here) come from config; None weights each
    category by its query count (= the plain mean over queries). A category without a weight
    is an error: dropping it silently would change the number.
    """
    if not means:
        raise ValueError("no category to average")
    if weights is None:
        w = {c: float(n) for c, (_, n) in means.items()}
    else:
        missing = sorted(set(means) - set(weights))
        if missing:
            raise ValueError(f"no traffic weight for categories {missing}")
        w = {c: float(weights[c]) for c in means}
    total = sum(w.values())
    if total <= 0 or any(x < 0 for x in w.values()):
        raise ValueError("traffic weights must be >= 0 and not all 0")
    return float(sum(means[c][0] * w[c] for c in means) / total)
