"""Pareto fronts over configs (docs/metrics.md), with confidence intervals and statistical ties.

**On the front**: no other config is at least as good on every objective and strictly better
on one (:func:`pareto_front`, point estimates).

**Statistically tied** (:func:`quality_cost_front`, one quality metric against one cost such as
p95 latency, peak VRAM or cost per query; costs are lower-is-better): a config off the front is
compared with its *reference*, the front config of highest quality among those with
``cost(f) <= cost(c)`` (so the reference is at least as good on both axes by point estimate).
It is *dominated* only where one axis resolves it: the **paired** per-query CI of the quality
delta (reference minus config, on the queries both scored, ``bench.metrics.pairing``) excludes
0, or the reference is cheaper beyond doubt (latency: the bootstrap CIs of the two p95s
separate, and by more than a stated margin if one is given; an exact cost such as bytes only by
more than a stated margin). Else
it is *tied* with the front: "do not discard it on this evidence". Where two configs' values do
not pair (different datasets, a run without per_query.parquet), the quality axis falls back to
the older screen, overlap of the marginal CIs (``c.ci_high >= f.ci_low`` for a higher-is-better
metric); each point records which basis decided it and what that screen alone said. A config
with no cheaper-or-equal front config cannot be dominated, so it is on the front itself.

Pruned configs are never on a front; they are listed with status ``pruned``. Configs without a
quality value or without the cost are ``no data`` for that front (listed, never dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["front", "tied", "dominated", "pruned", "no data"]


def pareto_front(points: Sequence[Sequence[float]], higher_is_better: Sequence[bool]) -> list[bool]:
    """``points[i][j]``: config i's value of objective j. Returns on-front flags per config."""
    sign = [1.0 if h else -1.0 for h in higher_is_better]
    scored = [[s * v for s, v in zip(sign, p, strict=True)] for p in points]
    flags = []
    for i, p in enumerate(scored):
        dominated = any(
            all(q[j] >= p[j] for j in range(len(p))) and any(q[j] > p[j] for j in range(len(p)))
            for k, q in enumerate(scored)
            if k != i
        )
        flags.append(not dominated)
    return flags


@dataclass(frozen=True)
class FrontInput:
    """One config for a quality-vs-cost front. ``quality``/``cost`` None = not measured.
    ``cost_ci_low``/``cost_ci_high``: the cost's CI where it is an estimate (a latency
    percentile over requests); None for a cost measured exactly (bytes)."""

    key: str
    quality: float | None
    ci_low: float | None
    ci_high: float | None
    cost: float | None
    pruned: bool = False
    cost_ci_low: float | None = None
    cost_ci_high: float | None = None


@dataclass(frozen=True)
class FrontPoint:
    key: str
    status: Status
    #: the front config this one was compared with (tied or dominated), else None
    reference: str | None = None
    #: what decided tied vs dominated: "paired" (the paired per-query CI of the quality
    #: delta and the cost CIs) or "ci overlap" (the marginal-CI screen, when no per-query
    #: values pair); None for front / pruned / no data
    basis: str | None = None
    #: the marginal-CI-overlap screen's verdict for the same config (what reports showed
    #: before paired dominance), to show which configs the paired evidence moves
    screen: Status | None = None


#: (reference key, config key) -> the paired CI (low, high) of quality(reference) -
#: quality(config) on the queries both scored, or None when they do not pair
PairedCI = Callable[[str, str], tuple[float, float] | None]


def quality_cost_front(items: Sequence[FrontInput], *, higher_is_better: bool,
                       paired: PairedCI | None = None,
                       cost_margin: float = 0.0) -> list[FrontPoint]:
    """Front / tied / dominated / pruned / no data for each item, in input order.

    The front is the point-estimate Pareto front. An off-front config is compared with its
    reference, the best front config costing no more (which is at least as good on both
    axes by point estimate): it is **dominated** only where that is resolved on one axis —
    the paired CI of the quality delta excludes 0 in the reference's favour (``paired``; the
    marginal-CI screen when the two do not pair), or the reference is cheaper beyond doubt
    (its latency CI's upper end below this config's lower end, and more than ``cost_margin``
    cheaper; an exact cost by more than a stated ``cost_margin``) — otherwise it is **tied**
    with the front.
    """
    usable = [i for i in items if not i.pruned and i.quality is not None and i.cost is not None]
    # means of the same per-query values summed in another order differ in the last bits;
    # that must not decide who is on the front
    flags = pareto_front([(round(i.quality, 12), round(i.cost, 12))  # type: ignore[arg-type]
                          for i in usable], (higher_is_better, False)) if usable else []
    front = [i for i, f in zip(usable, flags, strict=True) if f]
    sign = 1.0 if higher_is_better else -1.0
    on_front = {i.key for i in front}
    out: list[FrontPoint] = []
    for i in items:
        if i.pruned:
            out.append(FrontPoint(i.key, "pruned"))
            continue
        if i.quality is None or i.cost is None:
            out.append(FrontPoint(i.key, "no data"))
            continue
        if i.key in on_front:
            out.append(FrontPoint(i.key, "front"))
            continue
        affordable = [f for f in front if f.cost <= i.cost]  # type: ignore[operator]
        best = max(affordable, key=lambda f: sign * f.quality)  # type: ignore[operator]
        screen: Status = "tied" if _overlaps(i, best, sign) else "dominated"
        ci = None if paired is None else paired(best.key, i.key)
        if ci is None:
            quality_resolved, basis = screen == "dominated", "ci overlap"
        else:
            low, high = ci
            quality_resolved, basis = (low > 0 if sign > 0 else high < 0), "paired"
        status: Status = ("dominated" if quality_resolved or _cheaper(best, i, cost_margin)
                          else "tied")
        out.append(FrontPoint(i.key, status, best.key, basis, screen))
    return out


def _cheaper(f: FrontInput, c: FrontInput, margin: float) -> bool:
    """Whether front config f costs less than c beyond doubt: an estimated cost (latency)
    when the two CIs separate, and by more than ``margin``; an exact cost (bytes, a price)
    only by more than a stated ``margin`` > 0 (without one, cost alone never dominates)."""
    assert f.cost is not None and c.cost is not None  # usable items only
    gap = c.cost - f.cost
    if f.cost_ci_high is None and c.cost_ci_low is None:
        return margin > 0 and gap > margin
    f_hi = f.cost if f.cost_ci_high is None else max(f.cost_ci_high, f.cost)
    c_lo = c.cost if c.cost_ci_low is None else min(c.cost_ci_low, c.cost)
    return f_hi < c_lo and gap > margin


def _overlaps(c: FrontInput, f: FrontInput, sign: float) -> bool:
    """Whether c's CI reaches f's CI from c's side (c is the worse of the two)."""
    c_lo, c_hi = _ci(c)
    f_lo, f_hi = _ci(f)
    return c_hi >= f_lo if sign > 0 else c_lo <= f_hi


def _ci(i: FrontInput) -> tuple[float, float]:
    q = float(i.quality)  # type: ignore[arg-type]
    lo = q if i.ci_low is None else min(i.ci_low, q)
    hi = q if i.ci_high is None else max(i.ci_high, q)
    return lo, hi
