"""Hard predicate or soft boost? The pre-registered rule of docs/metrics.md.

Use hard only when ALL three hold:
1. the lower bound of the paired bootstrap CI of the precision gain (hard - soft, per query,
   same queries) >= ``min_precision_gain``;
2. the hard filter's false-exclusion rate <= ``max_exclusion_rate``;
3. the recall loss (soft recall - hard recall, both over the ORIGINAL eligible gold) <=
   ``max_recall_loss``.
Otherwise soft. The thresholds come from config (``MetadataFilter`` options), fixed before any
result is seen, so the rule cannot be tuned to the outcome.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from bench.metrics.stats import paired_compare

#: Float slack at the thresholds: 0.90 - 0.88 is 0.0200000000000000018, and a loss that
#: equals the bound must pass ("<=" in the rule), not fail on rounding.
_SLACK = 1e-12


@dataclass(frozen=True)
class Decision:
    """The choice, every number it was made from, and one reason per failed condition."""

    choice: Literal["hard", "soft"]
    precision_gain: float  # mean over queries of hard - soft
    gain_ci_low: float
    gain_ci_high: float
    p_value: float  # paired sign-flip test of gain = 0 (reported, not part of the rule)
    n: int  # paired queries
    exclusion_rate: float
    recall_hard: float
    recall_soft: float
    recall_loss: float  # recall_soft - recall_hard
    min_precision_gain: float
    max_exclusion_rate: float
    max_recall_loss: float
    gain_ok: bool
    exclusion_ok: bool
    recall_ok: bool
    reasons: tuple[str, ...]  # empty when hard was chosen


def _check_rate(name: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a rate in [0, 1], got {value}")


def hard_vs_soft(
    hard_values: np.ndarray,
    soft_values: np.ndarray,
    *,
    min_precision_gain: float,
    max_exclusion_rate: float,
    max_recall_loss: float,
    exclusion_rate: float,
    recall_hard: float,
    recall_soft: float,
    seed: int = 0,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> Decision:
    """Apply the rule.

    ``hard_values[i]`` / ``soft_values[i]``: the precision metric (e.g. precision@10) of query
    i under the hard filter and under the soft boost, same queries in the same order.
    ``exclusion_rate``: the hard filter's false-exclusion rate (``FilterOutcome.
    exclusion_rates().query_rate`` of the hard run). ``recall_*``: mean recall of each run
    scored against the same original eligible gold. Raises ValueError on mismatched or
    non-finite values (``paired_compare``) and on rates outside [0, 1].
    """
    _check_rate("exclusion_rate", exclusion_rate)
    _check_rate("recall_hard", recall_hard)
    _check_rate("recall_soft", recall_soft)
    cmp = paired_compare(soft_values, hard_values, resamples=resamples, seed=seed,
                         confidence=confidence)  # delta = hard - soft
    recall_loss = recall_soft - recall_hard
    gain_ok = cmp.ci_low >= min_precision_gain - _SLACK
    exclusion_ok = exclusion_rate <= max_exclusion_rate + _SLACK
    recall_ok = recall_loss <= max_recall_loss + _SLACK
    reasons: list[str] = []
    if not gain_ok:
        reasons.append(f"precision gain CI low {cmp.ci_low:.4f} < minimum {min_precision_gain}")
    if not exclusion_ok:
        reasons.append(f"exclusion rate {exclusion_rate:.4f} > maximum {max_exclusion_rate}")
    if not recall_ok:
        reasons.append(f"recall loss {recall_loss:.4f} > maximum {max_recall_loss}")
    return Decision(
        choice="hard" if not reasons else "soft",
        precision_gain=cmp.delta,
        gain_ci_low=cmp.ci_low,
        gain_ci_high=cmp.ci_high,
        p_value=cmp.p_value,
        n=cmp.n,
        exclusion_rate=exclusion_rate,
        recall_hard=recall_hard,
        recall_soft=recall_soft,
        recall_loss=recall_loss,
        min_precision_gain=min_precision_gain,
        max_exclusion_rate=max_exclusion_rate,
        max_recall_loss=max_recall_loss,
        gain_ok=gain_ok,
        exclusion_ok=exclusion_ok,
        recall_ok=recall_ok,
        reasons=tuple(reasons),
    )
