"""trec_eval ordering of runs and RRF fusion."""

from __future__ import annotations

import numpy as np
import pytest

from bench.metrics.base import DuplicateDocError
from bench.metrics.engine import Qrels, Run, evaluate, rank, rrf


def test_rank_orders_by_float32_score_then_doc_id_desc() -> None:
    run = Run.from_mapping({"q": {"a": 0.5, "b": 1.0, "c": 0.5, "d": 0.5 + 1e-12}})
    assert rank(run).ranking("q") == ["b", "d", "c", "a"]


def test_rank_rejects_duplicates() -> None:
    run = Run(("q",), np.array([0, 3]), np.array(["a", "b", "a"]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(DuplicateDocError, match="'a' appears twice"):
        rank(run)
    with pytest.raises(DuplicateDocError):
        evaluate(Qrels.from_mapping({"q": {"a": 1}}), run, ["mrr"])


def test_duplicates_in_unevaluated_queries_are_errors_too() -> None:
    run = Run(("q", "other"), np.array([0, 1, 3]), np.array(["a", "x", "x"]), None)
    with pytest.raises(DuplicateDocError, match="query 'other'") as err:
        evaluate(Qrels.from_mapping({"q": {"a": 1}}), run, ["mrr"])
    assert err.value.position == 2


def test_rrf_hand_example() -> None:
    a = Run.from_mapping({"q": {"x": 3.0, "y": 2.0, "z": 1.0}})
    b = Run(("q", "p"), np.array([0, 2, 3]), np.array(["z", "w", "x"]), None)  # order as given
    fused = rrf([a, b], k=60)
    assert fused.query_ids == ("q", "p") and fused.scores is not None
    # x: 1/61; y: 1/62; z: 1/63 + 1/61; w: 1/62 (ties y: id desc -> y before w)
    assert fused.ranking("q") == ["z", "x", "y", "w"]
    want = np.array([1 / 63 + 1 / 61, 1 / 61, 1 / 62, 1 / 62])
    np.testing.assert_allclose(fused.scores[:4], want, rtol=0, atol=1e-15)
    assert fused.ranking("p") == ["x"]
    # ordering equals re-ranking the fused scores: export and re-read give the same metrics
    assert rank(fused).ranking("q") == fused.ranking("q")


def test_rrf_depth_cuts_each_input() -> None:
    a = Run.from_mapping({"q": {"x": 3.0, "y": 2.0, "z": 1.0}})
    fused = rrf([a, a], k=1, depth=2)
    assert fused.ranking("q") == ["x", "y"]
    np.testing.assert_allclose(np.asarray(fused.scores), np.array([2 / 2, 2 / 3]))


def test_rrf_mixes_bytes_and_str_ids() -> None:
    a = Run(("q",), np.array([0, 2]), np.array([b"d1", b"d2"]), None)
    b = Run(("q",), np.array([0, 2]), np.array(["d2", "d3"]), None)
    assert rrf([a, b]).ranking("q") == ["d2", "d1", "d3"]
