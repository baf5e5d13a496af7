"""Answer-level damage of filtered ANN on hand-checkable inputs: contexts from filtered top-k
ids (one passage per document), answers through the prompt memo (an identical context is
answered once), paired deltas against the exact answers."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from bench.context.budgeted import BudgetedContext
from bench.data.base import Dataset, Document, Query
from bench.generation.base import Generation, GenerationRequest, SamplingParams
from bench.generation.memo import MemoGenerator
from bench.index.filtered_answers import FilteredAnswers
from bench.metrics.answer import AnswerChecks

TEXTS = ("alpha beta", "zeta", "gamma delta", "omega")


class FirstPassage:
    """Answers with the text of the first passage in the prompt; counts what it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def cache_params(self) -> dict[str, object]:
        return {"backend": "first-passage"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.asked += len(requests)
        out = []
        for r in requests:
            m = re.search(r"\[doc:d(\d)\]", r.messages[-1].content)
            text = TEXTS[int(m.group(1))] if m else "I don't know"
            out.append(Generation(r.request_id, text, "ok", "stop", 10, 2, 1.0, 1.0, 2.0))
        return out

    def close(self) -> None:
        pass


@pytest.fixture()
def setup() -> tuple[FilteredAnswers, FirstPassage]:
    docs = tuple(Document(f"d{i}", t) for i, t in enumerate(TEXTS))
    queries = (Query("q0", "what is alpha", qrels=(("d0", 1),), expected_answer="alpha beta"),
               Query("q1", "what is gamma", qrels=(("d2", 1),), expected_answer="gamma delta"),
               Query("q2", "not answered", qrels=(("d1", 1),), expected_answer="zeta"))
    ds = Dataset("tiny", docs, queries)
    inner = FirstPassage()
    fa = FilteredAnswers(ds, [0, 1], np.arange(4), TEXTS, BudgetedContext(top_k=2),
                         MemoGenerator(inner, None), AnswerChecks(),
                         SamplingParams(max_tokens=8), resamples=200)
    return fa, inner


def test_damage_is_paired_against_exact(setup: tuple[FilteredAnswers, FirstPassage]) -> None:
    fa, inner = setup
    exact_ids = np.asarray([[0, 1], [2, 3], [1, 0]])
    engine_ids = np.asarray([[0, 0], [3, -1], [0, 1]])  # q0: a repeated chunk; q1 lost d2
    exact = fa.answer(exact_ids)
    assert [g.text for g in exact.generations] == ["alpha beta", "gamma delta"]
    got = fa.answer(engine_ids)
    assert [g.text for g in got.generations] == ["alpha beta", "omega"]
    # q0's engine context is d0 alone (its repeat dropped), so it differs from exact's (d0, d1)
    # although its answer does not
    row = fa.damage("engine", "ef=1", 0.01, exact, got)
    assert (row.n_queries, row.n_context_changed, row.n_answer_changed, row.n_failed) == \
        (2, 2, 1, 0)
    f1 = row.delta("token_f1")
    assert (f1.n, f1.exact_mean, f1.mean, f1.delta) == (2, 1.0, 0.5, (0.0 - 1.0) / 2)
    assert f1.ci_low is not None and f1.ci_high is not None
    assert f1.ci_low <= f1.delta <= f1.ci_high
    assert row.delta("answer_correct").delta == -0.5
    # 2 exact answers + 2 engine answers asked of the generator: no prompt repeated yet
    assert inner.asked == 4
    # the exact ids again: every prompt is a memo hit, nothing is generated
    again = fa.answer(exact_ids)
    assert inner.asked == 4 and again.generations == exact.generations
    same = fa.damage("exact", "", 0.01, exact, again)
    assert (same.n_context_changed, same.n_answer_changed) == (0, 0)
    assert same.delta("token_f1").delta == 0.0


def test_sampled_decoding_is_refused(setup: tuple[FilteredAnswers, FirstPassage]) -> None:
    fa, _ = setup
    with pytest.raises(ValueError, match="greedy"):
        FilteredAnswers(fa.dataset, [0], np.arange(4), TEXTS, fa.builder, fa.generator,
                        fa.checks, SamplingParams(temperature=0.7))
