"""Decision views over loaded runs: quality-vs-cost fronts and saturated metrics.

Cost axes (all lower-is-better): p95 single-query latency (end to end along the config's
chain where the run recorded it: fused lanes sum their inputs; see ``load.Latency``),
peak VRAM (device-wide NVML peak, or torch's peak allocated when the run recorded only that),
cost per query (a ``cost_per_query`` column, or GPU/CPU-hour price × mean single-query time
when a price is given). An axis no config measured is reported as such, never drawn empty.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.metrics.pairing import paired, scope_mask
from bench.metrics.stats import paired_compare
from bench.report.fmt import common_value
from bench.report.load import ConfigView, Merged
from bench.report.pareto import FrontInput, FrontPoint, PairedCI, quality_cost_front


@dataclass(frozen=True)
class CostAxis:
    name: str
    unit: str
    value: Callable[[ConfigView], float | None]
    #: the value's CI where it is an estimate (None: measured exactly)
    ci: Callable[[ConfigView], tuple[float | None, float | None]] | None = None


def _p95(c: ConfigView) -> float | None:
    return c.latency.p95_ms


def _p95_ci(c: ConfigView) -> tuple[float | None, float | None]:
    return c.latency.p95_ci_low, c.latency.p95_ci_high


def _vram(c: ConfigView) -> float | None:
    return None if c.peak_vram_bytes is None else c.peak_vram_bytes / 2**20


def cost_axes(price_per_hour: float | None = None) -> list[CostAxis]:
    """The three cost axes. ``price_per_hour`` prices a config's mean single-query time when
    configs.parquet has no ``cost_per_query`` column (p50 stands in for the mean)."""

    def cost(c: ConfigView) -> float | None:
        if c.cost_per_query is not None:
            return float(c.cost_per_query)
        if price_per_hour is None or c.latency.p50_ms is None:
            return None
        return price_per_hour * c.latency.p50_ms / 1000.0 / 3600.0

    return [CostAxis("p95 latency", "ms", _p95, _p95_ci), CostAxis("peak VRAM", "MiB", _vram),
            CostAxis("cost per query", "$", cost)]


@dataclass(frozen=True)
class Front:
    metric: str
    higher_is_better: bool
    axis: CostAxis
    points: tuple[FrontPoint, ...]
    inputs: tuple[FrontInput, ...]

    @property
    def measured(self) -> bool:
        return any(p.status in ("front", "tied", "dominated") for p in self.points)


def paired_quality(merged: Merged, metric: str, scope: str = "all", *, resamples: int = 1000,
                   seed: int = 0, confidence: float = 0.95) -> PairedCI:
    """(reference key, config key) -> the paired bootstrap CI of quality(reference) -
    quality(config) on the queries both scored (the one pairing rule), or None when they do
    not pair: another dataset, no per-query values, no shared query."""
    by_key = {c.key: c for c in merged.configs}
    prints = {r.run_dir: (r.manifest.get("dataset") or {}).get("fingerprint")
              for r in merged.runs}

    def ci(ref: str, key: str) -> tuple[float, float] | None:
        a, b = by_key[ref], by_key[key]
        if a.scores is None or b.scores is None or prints[a.run_dir] != prints[b.run_dir]:
            return None
        va, vb, cats = paired(b.scores, a.scores, metric)
        sel = scope_mask(cats, scope)
        if not sel.any():
            return None
        cmp = paired_compare(va[sel], vb[sel], resamples=resamples, seed=seed,
                             confidence=confidence)
        return cmp.ci_low, cmp.ci_high

    return ci


def front(merged: Merged, metric: str, axis: CostAxis, scope: str = "all") -> Front:
    hib = merged.higher_is_better(metric)
    inputs = []
    for c in merged.configs:
        row = c.mean(metric, scope)
        lo, hi = axis.ci(c) if axis.ci is not None else (None, None)
        inputs.append(FrontInput(
            c.key, None if row is None else row.mean, None if row is None else row.ci_low,
            None if row is None else row.ci_high, axis.value(c), pruned=not c.kept,
            cost_ci_low=lo, cost_ci_high=hi))
    points = quality_cost_front(inputs, higher_is_better=hib,
                                paired=paired_quality(merged, metric, scope))
    return Front(metric, hib, axis, tuple(points), tuple(inputs))


def saturated(merged: Merged, metric: str, scope: str = "all", tol: float = 1e-9) -> float | None:
    """The common value when every kept config with a mean has the same mean (within ``tol``),
    e.g. Recall@100 = 1.0 everywhere; None otherwise. Such a metric is flagged in reports
    instead of drawn as a row of equal bars. One config alone is never "saturated"."""
    return common_value((row.mean for c in merged.configs if c.kept
                         for row in [c.mean(metric, scope)]
                         if row is not None and row.mean is not None), tol)


def scopes(merged: Merged, metric: str) -> list[str]:
    """``all`` then the categories, in first-seen order."""
    seen: dict[str, None] = {"all": None}
    for c in merged.configs:
        for scope, m in c.summary:
            if m == metric and scope.startswith("category:"):
                seen.setdefault(scope, None)
    return list(seen)


def pages(items: Sequence[ConfigView], per_page: int) -> list[list[ConfigView]]:
    """Every config on some page, in order (never a silent cut)."""
    if per_page < 1:
        raise ValueError("per_page must be >= 1")
    return [list(items[i:i + per_page]) for i in range(0, len(items), per_page)] or [[]]
