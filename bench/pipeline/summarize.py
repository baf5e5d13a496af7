"""Per-config summaries: mean + bootstrap CI + n per scope (all, each category, macro, weighted)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench.metrics.registry import parse_metric
from bench.metrics.stats import CompletionAccounting, bootstrap_ci


@dataclass(frozen=True)
class SummaryRow:
    config_id: str
    scope: str
    metric: str
    higher_is_better: bool
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None


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
            weights = _weights(cats, uniq, category_weights)
            for scope, w in (("macro", weights["macro"]), ("weighted", weights["weighted"])):
                rows.append(_weighted_row(config_id, scope, metric, spec.higher_is_better,
                                          vals, cats, uniq, w, resamples, confidence, seed))
    return rows


def _weights(
    cats: np.ndarray, uniq: list[str], traffic: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    counts = {c: int((cats == c).sum()) for c in uniq}
    total = sum(counts.values())
    macro = {c: 1.0 / len(uniq) for c in uniq}
    if traffic:
        z = sum(traffic.get(c, 0.0) for c in uniq)
        weighted = {c: traffic.get(c, 0.0) / z for c in uniq} if z > 0 else macro
    else:
        weighted = {c: counts[c] / total for c in uniq}
    return {"macro": macro, "weighted": weighted}


def _weighted_row(
    config_id: str, scope: str, metric: str, hib: bool, vals: np.ndarray, cats: np.ndarray,
    uniq: list[str], w: Mapping[str, float], resamples: int, confidence: float, seed: int,
) -> SummaryRow:
    groups = [vals[cats == c] for c in uniq]
    weights = np.asarray([w[c] for c in uniq])
    point = float(sum(wc * g.mean() for wc, g in zip(weights, groups, strict=True)))
    rng = np.random.default_rng(seed)
    boots = np.zeros(resamples)
    for g, wc in zip(groups, weights, strict=True):
        idx = rng.integers(0, len(g), size=(resamples, len(g)))
        boots += wc * g[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(boots, [alpha, 1.0 - alpha])
    return SummaryRow(config_id, scope, metric, hib, len(vals), point, float(lo), float(hi))


def accounting_columns(acc: CompletionAccounting) -> dict[str, int]:
    return {
        "n_expected": acc.expected,
        "n_scored": acc.scored,
        "n_missing": acc.missing,
        "n_timeout": acc.timeout,
        "n_invalid": acc.invalid,
        "n_no_claims": acc.no_claims,
        "n_pruned": acc.pruned,
    }
