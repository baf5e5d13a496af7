"""What the calibration loop and judge ensembles share: whether a score approves, a metric's
direction, and a statistic with its percentile bootstrap CI over items.

Kept apart from ``bench.judge.labelling`` / ``bench.judge.calibration`` (which read run
results and the judge stage) so that a judge (``bench.judge.ensemble``) can use them without
an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.judge.rubric import ScoreDef


def approves(sd: ScoreDef, hib: bool, value: float) -> bool:
    """Whether ``value`` (on the rubric's scale) is an approval under ``sd.approve_at``
    (``hib``: the metric is higher-is-better)."""
    return value >= sd.approve_at if hib else value <= sd.approve_at


def higher_is_better(metric: str) -> bool:
    from bench.metrics.registry import find_metric

    spec = find_metric(metric)
    return True if spec is None else spec.higher_is_better


@dataclass(frozen=True)
class Stat:
    """A statistic with its percentile bootstrap CI (None: undefined on this sample, e.g.
    kappa when both raters used one label; ``n_boot``: resamples where it was defined)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n_boot: int


@dataclass(frozen=True)
class Boot:
    """How CIs are drawn: percentile bootstrap over the items."""

    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95


def bootstrap(fn: Callable[[Sequence[Any]], float | None], items: Sequence[Any],
              boot: Boot) -> Stat:
    """``fn`` on ``items`` and the percentile CI of ``fn`` over resamples of the items."""
    resamples, seed, confidence = boot.resamples, boot.seed, boot.confidence
    value = fn(items)
    if value is None or not items:
        return Stat(value, None, None, 0)
    rng = np.random.default_rng(seed)
    got = []
    for _ in range(resamples):
        idx = rng.integers(0, len(items), len(items))
        x = fn([items[i] for i in idx])
        if x is not None:
            got.append(x)
    if not got:
        return Stat(value, None, None, 0)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(got, [tail, 100 - tail])
    return Stat(value, float(lo), float(hi), len(got))
