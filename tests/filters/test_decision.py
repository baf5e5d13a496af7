"""The pre-registered hard-vs-soft rule: hard only when all three conditions hold."""

from __future__ import annotations

import numpy as np
import pytest

from bench.filters.decision import Decision, hard_vs_soft
from bench.filters.metadata import MetadataFilter

SOFT = np.array([0.2, 0.4, 0.3, 0.5, 0.1, 0.6, 0.3, 0.2] * 5)
# every query gains exactly 0.1: the bootstrap CI of the gain is [0.1, 0.1]
HARD = SOFT + 0.1


def rule(hard: np.ndarray, soft: np.ndarray, *, exclusion_rate: float = 0.04,
         recall_hard: float = 0.88, recall_soft: float = 0.90) -> Decision:
    """The rule with thresholds 0.01 / 0.05 / 0.02; defaults pass conditions 2 and 3."""
    return hard_vs_soft(hard, soft, min_precision_gain=0.01, max_exclusion_rate=0.05,
                        max_recall_loss=0.02, exclusion_rate=exclusion_rate,
                        recall_hard=recall_hard, recall_soft=recall_soft)


def test_hard_when_all_three_conditions_hold() -> None:
    d = rule(HARD, SOFT)
    assert d.choice == "hard" and d.reasons == ()
    assert d.precision_gain == pytest.approx(0.1)
    assert d.gain_ci_low == pytest.approx(0.1) and d.n == 40
    assert d.recall_loss == pytest.approx(0.90 - 0.88)  # at the bound: "<=" passes


def test_soft_when_the_gain_ci_is_too_low() -> None:
    # half the queries gain 0.1, half lose 0.1: mean 0, the CI straddles 0
    d = rule(SOFT + np.tile([0.1, -0.1], 20), SOFT)
    assert d.choice == "soft" and not d.gain_ok and d.exclusion_ok and d.recall_ok
    assert d.gain_ci_low < 0.0 < d.gain_ci_high
    assert len(d.reasons) == 1 and "precision gain" in d.reasons[0]


def test_soft_when_too_many_queries_are_excluded() -> None:
    d = rule(HARD, SOFT, exclusion_rate=3 / 40)
    assert d.choice == "soft" and d.gain_ok and not d.exclusion_ok and d.recall_ok
    assert d.reasons == ("exclusion rate 0.0750 > maximum 0.05",)


def test_soft_when_recall_drops_too_much() -> None:
    d = rule(HARD, SOFT, recall_hard=0.80)
    assert d.choice == "soft" and d.gain_ok and d.exclusion_ok and not d.recall_ok
    assert d.recall_loss == pytest.approx(0.90 - 0.80)


def test_every_failed_condition_is_reported() -> None:
    d = rule(SOFT, SOFT, exclusion_rate=0.5, recall_hard=0.1, recall_soft=0.9)
    assert d.choice == "soft" and len(d.reasons) == 3


def test_filter_decides_with_its_preregistered_thresholds() -> None:
    for f, rate, choice in ((MetadataFilter(), 0.02, "hard"),
                            # a pre-registered minimum gain above the observed 0.1 keeps soft
                            (MetadataFilter(min_precision_gain=0.2), 0.02, "soft")):
        d = f.decide(HARD, SOFT, exclusion_rate=rate, recall_hard=0.88, recall_soft=0.90)
        assert d.choice == choice and d.min_precision_gain == f.min_precision_gain


def test_default_epsilon_is_the_seeds_two_percent() -> None:
    # 4 % false exclusion passed the old 5 % default; the seed's 1-2 % rejects it
    assert MetadataFilter().max_exclusion_rate == 0.02
    d = MetadataFilter().decide(HARD, SOFT, exclusion_rate=0.04, recall_hard=0.88,
                                recall_soft=0.90)
    assert d.choice == "soft" and d.reasons == ("exclusion rate 0.0400 > maximum 0.02",)


@pytest.mark.parametrize(("exclusion_rate", "recall_hard"), [(1.5, 0.88), (0.04, float("nan"))])
def test_rates_outside_0_1_are_rejected(exclusion_rate: float, recall_hard: float) -> None:
    with pytest.raises(ValueError):
        rule(HARD, SOFT, exclusion_rate=exclusion_rate, recall_hard=recall_hard)


def test_unpaired_values_are_rejected() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        rule(HARD[:-1], SOFT)
