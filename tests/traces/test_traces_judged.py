"""Judge metrics of the shadow replay (bench.traces.judged): each side's answer judged against
its own context by the real judges of bench.judge, over a scripted judge model, and paired
candidate vs production with what was not scored counted apart."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest

from bench.data.base import Document
from bench.generation.base import Generation, GenerationRequest
from bench.judge.base import JudgeItem
from bench.traces.judged import (
    PRODUCTION,
    build_judges,
    corpus_texts,
    judge_generator,
    judge_sides,
    paired,
    side_context,
    table,
)

DOCS = [Document("cat", "X is a cat that purrs."), Document("dog", "Y is a dog."),
        Document("fish", "Z is a fish.", title="Fish")]
TEXTS = corpus_texts(DOCS)


class JudgeModel:
    """A judge model that reads the prompt: a claim or an answer is good when it says "cat";
    a passage is relevant when it does."""

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def cache_params(self) -> dict[str, object]:
        return {"backend": "test-judge"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _answer(self, r: GenerationRequest) -> str:
        user = r.messages[-1].content
        schema = r.json_schema or ""
        if '"claims"' in schema:  # faithfulness, step 1: the answer is one claim
            answer = user.rsplit("nswer:", 1)[-1].strip()
            return json.dumps({"claims": [answer.splitlines()[0]]})
        if '"supported"' in schema:  # step 2: numbered claims after the context
            claims = re.findall(r"^(\d+)\. (.*)$", user, re.M)
            n = claims[-1][0]
            sup = [int(i) for i, c in claims if "cat" in c and i == n]
            return json.dumps({"supported": sup,
                               "unsupported": [int(n)] if not sup else []})
        if '"rating"' in schema:
            return json.dumps({"reason": "r", "rating": 5 if "cat" in user.rsplit(
                "nswer:", 1)[-1] else 2})
        passages = re.findall(r"^(\d+)\. (.*)$", user, re.M)
        rel = [int(i) for i, t in passages if "cat" in t]
        return json.dumps({"relevant": rel, "irrelevant": [int(i) for i, _ in passages
                                                           if int(i) not in rel]})

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.requests += requests
        return [Generation(r.request_id, self._answer(r), "ok", "stop", 1, 1, 1.0, 1.0, 2.0)
                for r in requests]

    def close(self) -> None:
        pass


def test_an_item_identical_to_one_judged_before_repeats_its_verdict() -> None:
    model = JudgeModel()
    judges = build_judges(model, max_retries=0, max_tokens=64)
    docs = {"t1": ["cat", "dog"], "t2": ["dog", "fish"], "t3": ["cat", "dog"]}
    # t3 asks t1's question with t1's answer and documents: one input under two trace ids
    prod = [JudgeItem(t, "What is X?", a, side_context(t, "What is X?", docs[t], TEXTS, k=2,
                                                       passage_chars=600))
            for t, a in (("t1", "X is a cat."), ("t2", "X is a dog."), ("t3", "X is a cat."))]
    # the candidate answered t1 as production did, t2 otherwise, and did not answer t3
    cand = [prod[0], JudgeItem("t2", "What is X?", "X is a fish.", prod[1].context),
            JudgeItem("t3", "What is X?", None, prod[2].context)]
    rows = judge_sides({PRODUCTION: prod, "cand": cand}, judges)
    got = {(r.side, r.trace_id, r.metric): r for r in rows}
    assert len(rows) == 2 * 3 * 3 and len(got) == len(rows)
    for m in ("faithfulness", "answer_relevancy", "context_relevance"):
        p1, p3, c1 = got[(PRODUCTION, "t1", m)], got[(PRODUCTION, "t3", m)], got[("cand", "t1", m)]
        assert (p1.shared_with, p3.shared_with, c1.shared_with) == ("", PRODUCTION, PRODUCTION)
        assert (p3.status, p3.value) == (c1.status, c1.value) == (p1.status, p1.value)
        assert got[("cand", "t2", m)].shared_with == got[("cand", "t3", m)].shared_with == ""
    assert got[(PRODUCTION, "t1", "faithfulness")].value == 1.0
    assert got[("cand", "t2", "faithfulness")].value == 0.0
    assert got[("cand", "t3", "faithfulness")].status == "error"
    # the judge calls are those of the four distinct inputs, each judged once
    alone = JudgeModel()
    judge_sides({"distinct": [prod[0], prod[1], cand[1], cand[2]]},
                build_judges(alone, max_retries=0, max_tokens=64))
    assert sorted(q.messages[-1].content for q in model.requests) == sorted(
        q.messages[-1].content for q in alone.requests)
    rated = [q.messages[-1].content.split("Answer: ", 1)[1].splitlines()[0]
             for q in model.requests if '"rating"' in (q.json_schema or "")]
    assert sorted(rated) == ["X is a cat.", "X is a dog.", "X is a fish."]


def test_side_context_is_the_first_k_distinct_documents() -> None:
    ctx = side_context("t1", "q", ["dog", "dog", "cat", "fish"], TEXTS, k=2, passage_chars=6)
    assert [p.doc_id for p in ctx.passages] == ["dog", "cat"]
    assert [p.text for p in ctx.passages] == ["Y is a", "X is a"]
    assert all(p.truncated for p in ctx.passages) and ctx.n_candidates == 4
    assert TEXTS["fish"] == "Fish. Z is a fish."  # the title, as a reader sees it


def _items(side: str, answers: dict[str, str | None], docs: dict[str, list[str]]
           ) -> list[JudgeItem]:
    return [JudgeItem(t, f"What is {t}?", a, side_context(t, f"What is {t}?", docs[t], TEXTS,
                                                         k=2, passage_chars=600))
            for t, a in answers.items()]


def test_both_sides_judged_alike_and_paired_per_request() -> None:
    model = JudgeModel()
    judges = build_judges(model, max_retries=0, max_tokens=64)
    assert [j.name for j in judges] == ["faithfulness", "answer_relevancy", "context_relevance"]
    docs_p = {"t1": ["cat", "dog"], "t2": ["dog", "fish"], "t3": ["cat", "fish"]}
    docs_c = {"t1": ["dog", "fish"], "t2": ["dog", "cat"], "t3": ["fish", "dog"]}
    rows = judge_sides({
        PRODUCTION: _items(PRODUCTION, {"t1": "X is a cat.", "t2": "I don't know.",
                                        "t3": None}, docs_p),
        "cand": _items("cand", {"t1": "X is a dog.", "t2": "Y is a dog.", "t3": "Z."}, docs_c),
    }, judges)
    got = {(r.side, r.trace_id, r.metric): (r.status, r.value) for r in rows}
    # production: t2 abstains (no claims, never 1.0), t3 was never answered (error)
    assert got[(PRODUCTION, "t1", "faithfulness")] == ("ok", 1.0)
    assert got[(PRODUCTION, "t2", "faithfulness")] == ("no_claims", None)
    assert got[(PRODUCTION, "t3", "faithfulness")] == ("error", None)
    assert got[("cand", "t1", "faithfulness")] == ("ok", 0.0)
    # relevancy (rating - 1) / 4; context relevance = relevant passages / passages
    assert got[(PRODUCTION, "t2", "answer_relevancy")] == ("ok", (2 - 1) / 4)
    assert got[(PRODUCTION, "t3", "context_relevance")] == ("ok", 1 / 2)
    assert got[("cand", "t2", "context_relevance")] == ("ok", 1 / 2)

    pairs = {p.metric: p for p in paired(rows, resamples=200)}
    f = pairs["faithfulness"]
    assert (f.requests, f.n) == (3, 1)  # only t1 is scored on both sides
    assert f.delta.delta == 0.0 - 1.0 and f.production.mean == 1.0
    assert f.not_scored_production == {"no_claims": 1, "error": 1}
    assert f.not_scored_candidate == {}
    r = pairs["answer_relevancy"]  # t1, t2 paired: production 1.0, 0.25; candidate 0.25, 0.25
    assert r.n == 2 and r.production.mean == pytest.approx((1.0 + 0.25) / 2)
    assert r.delta.delta == pytest.approx(0.25 - 0.625)
    c = pairs["context_relevance"]  # every side has a context: t1 1/2 vs 0, t2 0 vs 1/2,
    assert c.n == 3                  # t3 1/2 vs 0
    assert c.delta.delta == pytest.approx((0 - 0.5 + 0.5 - 0 + 0 - 0.5) / 3)
    assert c.delta.ci_low <= c.delta.delta <= c.delta.ci_high
    md = table(list(pairs.values()))
    assert "| cand | faithfulness | 3 | 1 | 1.000 [1.000, 1.000] | 0.000 [0.000, 0.000] | " \
           "-1.000 [-1.000, -1.000] (p 1.000) | error 1, no_claims 1 / 0 |" in md
    # the candidate's context went to the judge, not production's
    verify = [q for q in model.requests if '"supported"' in (q.json_schema or "")]
    assert any("Y is a dog" in q.messages[-1].content and "X is a cat" not in
               q.messages[-1].content for q in verify)


def test_an_unknown_judge_model_option_names_the_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bench.errors import ConfigError

    with pytest.raises(ConfigError, match="generator"):
        judge_generator("nope", cache_dir=tmp_path)
