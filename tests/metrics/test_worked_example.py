"""The worked example of docs/metrics.md, computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.metrics.engine import Qrels, Run, evaluate

QRELS = {"q1": {"d3": 1}, "q2": {"d7": 1, "d2": 1}, "q3": {"d11": 1}, "q4": {"d5": 1}}
RANKINGS = {
    "q1": ["d8", "d3", "d1", "d4", "d2"],
    "q2": ["d2", "d6", "d4", "d7", "d9"],
    "q3": ["d11", "d12", "d13", "d14", "d15"],
    "q4": [f"d{20 + i}" for i in range(10)],
}


def _run(scored: bool) -> Run:
    ids = [d for r in RANKINGS.values() for d in r]
    offsets = np.cumsum([0] + [len(r) for r in RANKINGS.values()])
    # descending scores reproduce the listed order; without scores the order is kept
    scores = np.concatenate([np.arange(len(r), 0, -1) for r in RANKINGS.values()])
    return Run(tuple(RANKINGS), offsets, np.array(ids), scores.astype(float) if scored else None)


@pytest.mark.parametrize("scored", [True, False])
def test_worked_example(scored: bool) -> None:
    ev = evaluate(Qrels.from_mapping(QRELS), _run(scored), ["recall@5", "mrr", "ndcg@5"])
    lg = math.log2
    recall = [1 / 1, 2 / 2, 1 / 1, 0 / 1]
    mrr = [1 / 2, 1 / 1, 1 / 1, 0.0]
    ndcg = [
        (1 / lg(3)) / 1.0,  # d3 at rank 2
        (1 / lg(2) + 1 / lg(5)) / (1 / lg(2) + 1 / lg(3)),  # d2 at 1, d7 at 4
        1.0,
        0.0,
    ]
    assert ev.query_ids == ("q1", "q2", "q3", "q4")
    np.testing.assert_allclose(ev.values["recall@5"], recall, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ev.values["mrr"], mrr, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ev.values["ndcg@5"], ndcg, rtol=0, atol=1e-15)
    agg = ev.aggregate()
    assert agg["recall@5"] == pytest.approx(3 / 4, abs=1e-15)
    assert agg["mrr"] == pytest.approx((0.5 + 1 + 1 + 0) / 4, abs=1e-15)
    assert agg["ndcg@5"] == pytest.approx(sum(ndcg) / 4, abs=1e-15)


def test_missing_runs_and_unanswerable_queries_are_counted() -> None:
    qrels = Qrels.from_mapping({**QRELS, "q5": {"d1": 0}, "q6": {"d9": 2}})
    ev = evaluate(qrels, _run(True), ["recall@5", "precision@5"])
    assert ev.num_queries == 5  # q1-q4 and q6; q5 has no relevant doc
    assert ev.missing_runs == ("q6",)
    assert ev.queries_without_relevant == ("q5",)
    assert ev.values["recall@5"][-1] == 0.0  # a missing run is an empty ranking
    # precision divides by k even for short rankings: q1 has 1 relevant in 5
    assert ev.values["precision@5"][0] == pytest.approx(1 / 5)


def test_graded_gain_ndcg_and_exp_gain() -> None:
    qrels = Qrels.from_mapping({"q": {"a": 2, "b": 1, "c": 3}})
    run = Run(("q",), np.array([0, 3]), np.array(["b", "a", "x"]), None)
    ev = evaluate(qrels, run, ["ndcg@3", "ndcg_exp@3", "map", "r_precision", "hit_rate@1"])
    lg = math.log2
    assert ev.values["ndcg@3"][0] == pytest.approx(
        (1 + 2 / lg(3)) / (3 + 2 / lg(3) + 1 / lg(4)), abs=1e-15)
    assert ev.values["ndcg_exp@3"][0] == pytest.approx(
        (1 + 3 / lg(3)) / (7 + 3 / lg(3) + 1 / lg(4)), abs=1e-15)
    assert ev.values["map"][0] == pytest.approx((1 / 1 + 2 / 2) / 3, abs=1e-15)
    assert ev.values["r_precision"][0] == pytest.approx(2 / 3, abs=1e-15)
    assert ev.values["hit_rate@1"][0] == 1.0


def test_str_and_bytes_ids_give_the_same_values() -> None:
    qrels = Qrels.from_mapping(QRELS)
    text = _run(True)
    raw = Run(text.query_ids, text.offsets, np.char.encode(text.doc_ids, "utf-8"), text.scores)
    names = ["recall@5", "mrr", "ndcg@5", "map"]
    a, b = evaluate(qrels, text, names), evaluate(qrels, raw, names)  # one Qrels, both kinds
    raw_qrels = Qrels(qrels.query_ids, qrels.offsets, np.char.encode(qrels.doc_ids, "utf-8"),
                      qrels.rels)
    c = evaluate(raw_qrels, text, names)
    for m in names:
        assert np.array_equal(a.values[m], b.values[m]) and np.array_equal(a.values[m], c.values[m])
