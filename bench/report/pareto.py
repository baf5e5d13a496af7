"""Pareto fronts over configs (docs/metrics.md), with confidence intervals and statistical ties.

**On the front**: no other config is at least as good on every objective and strictly better
on one (:func:`pareto_front`, point estimates).

**Statistically tied** (:func:`quality_cost_front`, one quality metric against one cost such as
p95 latency, peak VRAM or cost per query; costs are lower-is-better point estimates): a config
that is off the front is *statistically tied* with it when its quality CI overlaps the quality
CI of the *best front config that costs no more than it does* — for a higher-is-better metric,
``c.ci_high >= f.ci_low`` where ``f`` is the front config of highest quality among those with
``cost(f) <= cost(c)`` (mirrored for lower-is-better metrics). In words: at its own cost, the
front's best quality is not resolved from this config's by the 95 % intervals. Overlapping
intervals are a conservative screen, not a test of equality: "tied" means "do not discard it
on this evidence", and the paired per-query comparisons say more. A config with no cheaper-or-
equal front config cannot be dominated, so it is on the front itself.

Pruned configs are never on a front; they are listed with status ``pruned``. Configs without a
quality value or without the cost are ``no data`` for that front (listed, never dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """One config for a quality-vs-cost front. ``quality``/``cost`` None = not measured."""

    key: str
    quality: float | None
    ci_low: float | None
    ci_high: float | None
    cost: float | None
    pruned: bool = False


@dataclass(frozen=True)
class FrontPoint:
    key: str
    status: Status
    #: the front config this one was compared with (tied or dominated), else None
    reference: str | None = None


def quality_cost_front(items: Sequence[FrontInput], *,
                       higher_is_better: bool) -> list[FrontPoint]:
    """Front / tied / dominated / pruned / no data for each item, in input order."""
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
        out.append(FrontPoint(i.key, "tied" if _overlaps(i, best, sign) else "dominated",
                              best.key))
    return out


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
