"""The figures of the generator comparison: Wilson intervals, reference-anchored
self-preference, and the diagnosis across generators on one context."""

from __future__ import annotations

import numpy as np
import pytest

from bench.generation.compare import (
    ALL_GOOD,
    CONTEXT,
    MODEL,
    UNPLACED,
    diagnose_across,
    quality,
    ref_self_preference,
    wilson,
)
from bench.judge.base import OK, PairVerdict
from bench.results.scores import ConfigScores


def _verdict(qid: str, pref: float, status: str = OK) -> PairVerdict:
    winner = {1.0: "candidate", 0.5: "tie", 0.0: "baseline"}[pref]
    return PairVerdict(qid, "candidate", "baseline", status, winner, True, (), (pref, pref))


def _scores(rows: dict[str, dict[str, tuple[float, str]]]) -> ConfigScores:
    """metric -> {query: (value, status)} over the union of the queries."""
    qids = tuple(dict.fromkeys(q for m in rows.values() for q in m))
    values, statuses, expected = {}, {}, {}
    for metric, got in rows.items():
        values[metric] = np.asarray([got.get(q, (np.nan, ""))[0] for q in qids])
        statuses[metric] = tuple(got.get(q, (np.nan, "scored"))[1] for q in qids)
        expected[metric] = np.asarray([q in got for q in qids])
    return ConfigScores("c", qids, tuple("x" for _ in qids), values, statuses, (), expected)


def test_wilson_interval() -> None:
    p = wilson(3, 10, 0.95)
    assert p.rate == 0.3
    # Wilson score interval for 3/10 at 95 %: 0.1078 .. 0.6032
    assert p.low == pytest.approx(0.1078, abs=1e-4) and p.high == pytest.approx(0.6032, abs=1e-4)
    assert wilson(0, 0, 0.95).rate is None


def test_reference_anchored_self_preference() -> None:
    # the judge (family "a") always prefers the baseline, which is of its family
    verdicts = [_verdict(f"q{i}", 0.0) for i in range(4)] + [_verdict("q9", 0.0, "invalid")]
    base = {"q0": 1.0, "q1": 0.0, "q2": 0.5, "q3": 0.2, "q9": 1.0}   # baseline token_f1
    cand = {"q0": 0.0, "q1": 1.0, "q2": 0.5, "q3": 0.2, "q9": 0.0}
    r = ref_self_preference(verdicts, cand, base, judge_family="a", candidate_family="b",
                            baseline_family="a", resamples=200, seed=0, confidence=0.95)
    assert r.own == "baseline" and r.estimate is not None
    # per pair judge-for-own minus reference-for-own: q0 1-1, q1 1-0, q2 1-0.5, q3 1-0.5
    assert r.estimate.value == pytest.approx((0 + 1 + 0.5 + 0.5) / 4) and r.estimate.n == 4
    assert r.decided == 2 and r.own_better == (1, 1) and r.other_better == (0, 1)
    same = ref_self_preference(verdicts, cand, base, judge_family="a", candidate_family="a",
                               baseline_family="a", resamples=10, seed=0, confidence=0.95)
    assert same.estimate is None and "both generators" in same.note
    other = ref_self_preference(verdicts, cand, base, judge_family="z", candidate_family="a",
                                baseline_family="b", resamples=10, seed=0, confidence=0.95)
    assert other.estimate is None and "shares no family" in other.note


def test_quality_per_kind_of_query() -> None:
    s = _scores({"token_f1": {"q1": (0.4, "scored"), "q2": (0.0, "no_reference"),
                              "q3": (0.0, "no_reference"), "q4": (0.0, "no_reference")},
                 "claims_coverage": {"q1": (1.0, "scored"), "q2": (0.5, "scored")},
                 "abstained": {q: (1.0, "scored") for q in ("q1", "q2", "q3", "q4")}})
    # token_f1 first, claims_coverage next; abstaining counts only where it must
    assert quality(s, {"q4": True}) == {"q1": 0.4, "q2": 0.5, "q4": 1.0}


def test_diagnosis_across_generators() -> None:
    must = {"q4": True}
    a = _scores({"answer_correct": {"q1": (1.0, "scored"), "q2": (0.0, "scored"),
                                    "q3": (0.0, "scored"), "q5": (1.0, "scored")},
                 "abstained": {"q4": (0.0, "scored")},
                 "gold_in_context": {"q1": (1.0, "scored"), "q2": (1.0, "scored"),
                                     "q3": (0.0, "scored"), "q5": (1.0, "scored")}})
    b = _scores({"answer_correct": {"q1": (1.0, "scored"), "q2": (1.0, "scored"),
                                    "q3": (0.0, "scored"), "q5": (0.0, "failed")},
                 "abstained": {"q4": (0.0, "scored")}})
    got = {d.query_id: d for d in diagnose_across("ctx", [("a", a), ("b", b)], must)}
    assert got["q1"].klass == ALL_GOOD
    assert got["q2"].klass == MODEL and got["q2"].failed == ("a",)
    assert got["q3"].klass == CONTEXT and got["q3"].gold_in_context == 0.0
    assert got["q4"].klass == CONTEXT  # must-abstain, answered by both
    assert got["q5"].klass == UNPLACED and "b: answer_correct failed" in got["q5"].why
