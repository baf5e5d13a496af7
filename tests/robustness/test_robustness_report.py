from __future__ import annotations

import math

import pytest

from bench.robustness.base import CaseOutcome
from bench.robustness.report import type_rows, wilson


def test_wilson_matches_the_closed_form() -> None:
    k, n, z = 3, 10, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    r = wilson(k, n, 0.95)
    assert r.ci_low == pytest.approx(centre - half) and r.ci_high == pytest.approx(centre + half)
    assert r.value == 0.3 and r.cell() == "30.0 % [10.8 %, 60.3 %]"
    assert wilson(0, 0, 0.95).cell() == "n/a"


def test_rows_count_failed_generations_apart_and_controls_not_at_all() -> None:
    def o(t: str, outcome: str, attacked: bool = True) -> CaseOutcome:
        return CaseOutcome("c", t, "q", outcome, None if outcome == "generation_failed"
                           else "a", "ok", attacked)

    rows = type_rows([o("negation", "answered"), o("negation", "drifted_wrong"),
                      o("negation", "drifted_other"), o("negation", "generation_failed"),
                      o("poison_mono", "abstained"), o("poison_mono", "answered", False)], 0.95)
    neg, mono = rows
    assert (neg.n, neg.failed, neg.answered.k, neg.drifted.k, neg.drifted_wrong.k) == \
        (3, 1, 1, 2, 1)
    assert neg.desired == "answered"
    assert (mono.n, mono.abstained.k, mono.answered.k) == (1, 1, 0)
