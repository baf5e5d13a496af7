"""Set-level metrics: filter exclusions, predicates, abstention, ANN recall."""

from __future__ import annotations

import numpy as np
import pytest

from bench.metrics.setlevel import (
    EmptyDenominatorError,
    abstention_scores,
    ann_recall,
    false_exclusion_rates,
    predicate_scores,
)


def test_false_exclusion_rates() -> None:
    gold = [{"a", "b"}, {"c"}, set(), {"d", "e"}]
    passed = [{"a", "x"}, set(), {"z"}, set()]
    r = false_exclusion_rates(gold, passed)
    # eligible queries 0, 1, 3; all gold removed in 1 and 3
    assert r.query_rate == pytest.approx(2 / 3)
    # eligible gold docs 5; removed b, c, d, e
    assert r.doc_rate == pytest.approx(4 / 5)
    assert (r.n_queries, r.n_docs) == (3, 5)


def test_false_exclusion_empty_denominator_is_an_error() -> None:
    with pytest.raises(EmptyDenominatorError):
        false_exclusion_rates([set(), set()], [{"a"}, set()])


def test_predicate_scores() -> None:
    r = predicate_scores([{("y", 2020), ("t", "a")}, set()], [{("y", 2020)}, {("t", "b")}])
    assert (r.precision, r.recall) == (1 / 2, 1 / 2)
    assert predicate_scores([set()], [set()]).precision is None


def test_abstention_scores() -> None:
    abstained = [True, True, False, False, False]
    must = [True, False, True, False, False]
    correct = [False, False, False, True, False]
    s = abstention_scores(abstained, must, correct)
    assert s.precision == 1 / 2  # abstained on 0 (right) and 1 (wrong)
    assert s.recall == 1 / 2  # must-abstain 0 (abstained) and 2 (answered)
    assert s.coverage == 3 / 5
    assert s.answered_accuracy == 1 / 3  # answered 2 (must abstain), 3 (right), 4 (wrong)
    assert abstention_scores([False], [False], [True]).precision is None


def test_ann_recall_is_tie_tolerant() -> None:
    exact_ids = np.array([[1, 2, 3], [1, 2, 3]])
    exact_d = np.array([[0.1, 0.2, 0.5], [0.1, 0.2, 0.5]])
    # row 0: id 9 sits at the k-th distance (+1e-9 relative) -> counts; id 7 is farther
    ann_ids = np.array([[1, 9, 7], [3, 3, -1]])
    ann_d = np.array([[0.1, 0.5 * (1 + 1e-9), 0.6], [0.5, 0.5, 0.0]])
    r = ann_recall(ann_ids, ann_d, exact_ids, exact_d, 3)
    assert r.tolist() == [2 / 3, 1 / 3]  # row 1: a repeat and a missing result count nothing
    with pytest.raises(ValueError, match="need k=4"):
        ann_recall(ann_ids, ann_d, exact_ids, exact_d, 4)
