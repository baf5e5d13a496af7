"""The cheapest config that is equivalent to the best: "how much can I give up?".

Given configs with a cost (a p95 latency, index bytes, a price: lower is cheaper) and the best
config, every config is tested against the best with TOST on the paired per-query deltas of
each metric (``bench.metrics.stats.tost``, margin ``margin`` in the metric's units). A config
is equivalent when EVERY metric is: an intersection-union test, so each metric at ``alpha``
keeps the joint error at ``alpha`` without a multiplicity correction. The answer is the
cheapest equivalent config (the best itself when nothing cheaper is).

TOST is two-sided: a config significantly BETTER than the best by more than the margin on some
metric (possible on a metric other than the one that chose the best) is not "equivalent";
its row says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.metrics.pairing import PerQueryScores, paired, scope_mask
from bench.metrics.registry import find_metric
from bench.metrics.stats import Equivalence, tost


@dataclass(frozen=True)
class CostedConfig:
    """A config's per-query scores and its cost (None: not measured, cannot be chosen)."""

    key: str
    label: str
    cost: float | None
    scores: PerQueryScores


@dataclass(frozen=True)
class EquivalenceRow:
    """One config against the best: TOST per metric (None where fewer than 2 queries pair),
    the verdict, and why it is not equivalent (empty when it is)."""

    key: str
    label: str
    cost: float | None
    tests: tuple[tuple[str, Equivalence | None], ...]
    equivalent: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class CheapestEquivalent:
    best: str
    #: the cheapest equivalent config with a cost (None when none has one)
    chosen: str | None
    metrics: tuple[str, ...]
    scope: str
    margin: float
    alpha: float
    #: by cost ascending, configs without a cost last
    rows: tuple[EquivalenceRow, ...]


def _mean(c: CostedConfig, metric: str, scope: str) -> float | None:
    s = c.scores
    if metric not in s.values:
        return None
    mask = s.valued(metric) & scope_mask(np.asarray(s.categories, dtype=object), scope)
    return float(np.asarray(s.values[metric])[mask].mean()) if mask.any() else None


def best_config(configs: Sequence[CostedConfig], metric: str, scope: str = "all") -> str:
    """The key of the config with the best mean of ``metric`` (direction from the metric
    registry; an unknown metric counts higher as better). Ties: the first."""
    spec = find_metric(metric)
    sign = -1.0 if spec is not None and not spec.higher_is_better else 1.0
    scored = [(sign * m, -i, c.key) for i, c in enumerate(configs)
              if (m := _mean(c, metric, scope)) is not None]
    if not scored:
        raise ValueError(f"no config has a value of {metric!r} at scope {scope!r}")
    return max(scored)[2]


def cheapest_equivalent(configs: Sequence[CostedConfig], *, metrics: Sequence[str],
                        margin: float, alpha: float = 0.05, best: str | None = None,
                        scope: str = "all") -> CheapestEquivalent:
    """See the module docstring. ``best``: a key of ``configs`` (default: :func:`best_config`
    on the first metric)."""
    if not metrics:
        raise ValueError("name at least one metric")
    keys = [c.key for c in configs]
    if len(set(keys)) != len(keys):
        raise ValueError("config keys must be unique")
    best_key = best if best is not None else best_config(configs, metrics[0], scope)
    if best_key not in keys:
        raise ValueError(f"best config {best_key!r} is not among {keys}")
    ref = configs[keys.index(best_key)]
    rows: list[EquivalenceRow] = []
    for c in configs:
        tests: list[tuple[str, Equivalence | None]] = []
        reasons: list[str] = []
        for m in metrics:
            va, vb, cats = paired(ref.scores, c.scores, m)
            mask = scope_mask(cats, scope)
            if mask.sum() < 2:
                tests.append((m, None))
                reasons.append(f"{m}: {int(mask.sum())} paired queries (TOST needs 2)")
                continue
            t = tost(va[mask], vb[mask], margin=margin, alpha=alpha)
            tests.append((m, t))
            if not t.equivalent:
                reasons.append(f"{m}: delta {t.delta:+.4f}, {100 * (1 - 2 * alpha):g} % CI "
                               f"[{t.ci_low:+.4f}, {t.ci_high:+.4f}] not inside "
                               f"+-{margin:g} (TOST p {t.p_value:.3g})")
        rows.append(EquivalenceRow(c.key, c.label, c.cost, tuple(tests), not reasons,
                                   tuple(reasons)))
    order = sorted(range(len(rows)), key=lambda i: (rows[i].cost is None, rows[i].cost or 0.0, i))
    ranked = tuple(rows[i] for i in order)
    chosen = next((r.key for r in ranked if r.equivalent and r.cost is not None), None)
    return CheapestEquivalent(best=best_key, chosen=chosen, metrics=tuple(metrics), scope=scope,
                              margin=margin, alpha=alpha, rows=ranked)
