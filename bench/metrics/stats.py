"""Statistics of per-query values: bootstrap CIs, paired comparisons, Holm, category averages.

All resampling is seeded and runs in ``bench_kernels`` (counter-based RNG: the same seed gives
the same numbers on any thread count or device). Conventions: docs/metrics.md
("Statistics and reports").
"""

from __future__ import annotations

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
