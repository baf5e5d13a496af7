"""``bench.pipeline.answers.merge_answer_scores`` on hand-made scores: a generated config's
retrieval values stay as they are, answer metrics are expected only where they apply, and
answer/judge statuses map to per-query statuses (no pipeline run, no generator)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.data.base import Dataset, Document, Query
from bench.generation.base import Generation
from bench.metrics.base import QueryValue
from bench.pipeline.answers import merge_answer_scores
from bench.pipeline.scoring import SummarySettings
from bench.results.scores import ConfigScores

SETTINGS = SummarySettings(category_weights={}, resamples=200, confidence=0.95, seed=0)


def _dataset() -> Dataset:
    docs = (Document("d0", "zero"), Document("d1", "one"))
    qs = (Query("a", "qa", category="c1"), Query("b", "qb", category="c1"),
          Query("c", "qc", category="c2"), Query("x", "abstain", category="c2"))
    return Dataset("fake", docs, qs)


def _base() -> ConfigScores:
    # retrieval values over the queries with a relevant document (x has none)
    return ConfigScores("cfg", ("a", "b", "c"), ("c1", "c1", "c2"),
                        {"ndcg@10": np.array([1.0, 0.5, np.nan])},
                        {"ndcg@10": ("scored", "scored", "failed")}, ())


def _gen(qid: str, status: str = "ok") -> Generation:
    return Generation(qid, "text", status, "stop" if status == "ok" else status, 3, 2, 1.0,
                      1.0, 5.0)


def test_answer_metrics_merge_beside_untouched_retrieval_values() -> None:
    gens = [_gen("a"), _gen("b", "timeout"), _gen("x")]
    rows = [QueryValue("a", "exact_match", 1.0, "scored"),
            QueryValue("b", "exact_match", 0.0, "error"),  # the generation timed out
            QueryValue("x", "exact_match", 0.0, "not_applicable"),  # must-abstain: no EM
            QueryValue("a", "refusal_correct", 0.0, "not_applicable"),
            QueryValue("x", "refusal_correct", 1.0, "scored"),
            QueryValue("a", "faithfulness", 0.0, "no_claims"),
            QueryValue("b", "faithfulness", 0.0, "invalid")]
    s = merge_answer_scores(_base(), _dataset(), rows, gens, SETTINGS)
    # the answered query without a relevant document is appended, with its category
    assert s.query_ids == ("a", "b", "c", "x") and s.categories == ("c1", "c1", "c2", "c2")
    # retrieval untouched on its queries; the appended query is not expected for it
    np.testing.assert_array_equal(s.values["ndcg@10"][:3], [1.0, 0.5, np.nan])
    assert s.expects("ndcg@10").tolist() == [True, True, True, False]
    assert s.statuses["ndcg@10"] == ("scored", "scored", "failed", "failed")
    # exact match: expected where it applies; a timed-out generation is a timeout
    assert s.expects("exact_match").tolist() == [True, True, False, False]
    assert s.statuses["exact_match"][:2] == ("scored", "timeout")
    assert s.values["exact_match"][0] == 1.0 and np.isnan(s.values["exact_match"][1])
    assert s.accounting("exact_match").n_expected == 2
    assert s.expects("refusal_correct").tolist() == [False, False, False, True]
    assert s.statuses["faithfulness"][:2] == ("no_claims", "invalid")
    assert np.isnan(s.values["faithfulness"]).all()
    # summary rows only for the new metrics (the base's are the base's)
    assert {r.metric for r in s.summary} == {"exact_match", "refusal_correct", "faithfulness"}
    em = next(r for r in s.summary if r.metric == "exact_match" and r.scope == "all")
    assert em.mean == pytest.approx(1.0)


def test_an_error_without_a_timed_out_generation_is_failed() -> None:
    gens = [_gen("a", "error")]
    rows = [QueryValue("a", "exact_match", 0.0, "error")]
    s = merge_answer_scores(_base(), _dataset(), rows, gens, SETTINGS)
    assert s.statuses["exact_match"][0] == "failed"
    # a metric no answered query has a reference for is not expected anywhere
    s = merge_answer_scores(_base(), _dataset(), [QueryValue("a", "number_match", 0.0,
                                                             "no_reference")], gens, SETTINGS)
    assert not s.expects("number_match").any() and s.accounting("number_match").n_expected == 0
