"""Per-config summaries: mean + bootstrap CI + n per scope (all, each category, macro, weighted)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from bench.errors import ConfigError
from bench.metrics.registry import parse_metric
from bench.metrics.stats import (
    bootstrap_ci,
    category_means,
    macro_average,
    weighted_average,
)
from bench.results.records import SummaryRow


def summarize(
    config_id: str,
    categories: Sequence[str],
    values: Mapping[str, np.ndarray],
    *,
    category_weights: Mapping[str, float],
    resamples: int,
    confidence: float,
    seed: int,
) -> list[SummaryRow]:
    """``categories[i]`` is the category of the i-th scored query; ``values[m][i]`` its value.

    macro: each category weighs the same; weighted: per-query weights so that each category
    weighs ``category_weights[c]`` (default: its frequency, i.e. the plain mean). Both CIs come
    from the same seeded bootstrap over queries (resampled within category for macro/weighted).
    """
    cats = np.asarray(categories, dtype=object)
    uniq = sorted(set(categories))
    rows: list[SummaryRow] = []
    for metric, vals in values.items():
        spec = parse_metric(metric)
        vals = np.asarray(vals, dtype=np.float64)

        def row(scope: str, v: np.ndarray, _m: str = metric, _h: bool = spec.higher_is_better
                ) -> SummaryRow:
            if len(v) == 0:
                return SummaryRow(config_id, scope, _m, _h, 0, None, None, None)
            ci = bootstrap_ci(v, resamples=resamples, seed=seed, confidence=confidence)
            return SummaryRow(config_id, scope, _m, _h, ci.n, ci.mean, ci.ci_low, ci.ci_high)

        rows.append(row("all", vals))
        for c in uniq:
            rows.append(row(f"category:{c}", vals[cats == c]))
        if len(uniq) > 1 and len(vals):
            means = category_means(vals, list(cats))
            try:
                points = {"macro": macro_average(means),
                          "weighted": weighted_average(means, category_weights or None)}
            except ValueError as exc:  # a category without a traffic weight, or bad weights
                raise ConfigError("metrics.category_weights", str(exc)) from None
            weights = _bootstrap_weights(means, category_weights)
            for scope in ("macro", "weighted"):
                rows.append(_weighted_row(config_id, scope, metric, spec.higher_is_better,
                                          vals, cats, weights[scope], points[scope],
                                          resamples, confidence, seed))
    return rows


def _bootstrap_weights(
    means: Mapping[str, tuple[float, int]], traffic: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """Category weights of the macro and weighted scopes, for the stratified bootstrap.

    The point estimates come from ``bench.metrics.stats`` (which also validates the traffic
    weights); these are the same weights, normalised, so resampled means match them.
    """
    cats = sorted(means)  # a fixed order: the seeded draws go to the same category each run
    macro = {c: 1.0 / len(cats) for c in cats}
    raw = {c: float(traffic[c]) if traffic else float(means[c][1]) for c in cats}
    total = sum(raw.values())
    return {"macro": macro, "weighted": {c: w / total for c, w in raw.items()}}


def _weighted_row(
    config_id: str, scope: str, metric: str, hib: bool, vals: np.ndarray, cats: np.ndarray,
    w: Mapping[str, float], point: float, resamples: int, confidence: float, seed: int,
) -> SummaryRow:
    """Stratified bootstrap: resample within each category, combine with its weight."""
    rng = np.random.default_rng(seed)
    boots = np.zeros(resamples)
    for c, wc in w.items():
        g = vals[cats == c]
        idx = rng.integers(0, len(g), size=(resamples, len(g)))
        boots += wc * g[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(boots, [alpha, 1.0 - alpha])
    return SummaryRow(config_id, scope, metric, hib, len(vals), point, float(lo), float(hi))
