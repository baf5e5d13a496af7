"""RAGChecker's generator diagnostics from a scripted judge model: which claims the reference,
the relevant passages and the irrelevant passages entail, and the four shares."""

from __future__ import annotations

import json

import pytest

from bench.context.base import Context, ContextPassage
from bench.generation.base import GenerationRequest
from bench.judge.base import JudgeItem, failure_mode
from bench.judge.diagnostics import GeneratorDiagnosticsJudge, diagnostic_scores
from tests.judge.scripted import ScriptedGenerator

CLAIMS = ["a trie is a prefix tree", "tries were invented in 1990", "tries are heaps"]


def _ctx() -> Context:
    # passage 1 covers the required claim (relevant), passage 2 does not (irrelevant)
    return Context("q1", "what is a trie?", (
        ContextPassage("d1", 0, "A trie is a prefix tree used for strings.", 1),
        ContextPassage("d2", 5, "Heaps are trees with an order property.", 2)), (), 20, 2)


def _script(entailed: dict[str, list[int]]):  # type: ignore[no-untyped-def]
    def script(r: GenerationRequest) -> str:
        if "claims" in json.loads(r.json_schema or "{}").get("properties", {}):
            return json.dumps({"claims": CLAIMS})
        group = r.request_id.split("/")[1]
        sup = entailed[group]
        return json.dumps({"supported": sup, "unsupported": [c for c in (1, 2, 3)
                                                             if c not in sup]})
    return script


def _item(**kw: object) -> JudgeItem:
    base: dict[str, object] = {"query_id": "q1", "query": "what is a trie?",
                               "answer": "A trie is a prefix tree, invented in 1990; tries are "
                               "heaps.", "context": _ctx(), "reference": "a prefix tree",
                               "required_claims": ("a trie is a prefix tree",)}
    return JudgeItem(**{**base, **kw})  # type: ignore[arg-type]


def test_the_four_shares_from_the_three_entailment_calls() -> None:
    # claim 1 correct (reference) and grounded; 2 incorrect, entailed by the relevant passage;
    # 3 incorrect, entailed only by the irrelevant passage
    gen = ScriptedGenerator(_script({"reference": [1], "relevant": [1, 2],
                                     "irrelevant": [3]}))
    [v] = GeneratorDiagnosticsJudge(generator=gen).judge([_item()])
    assert v.status == "ok"
    assert dict(v.scores) == {"noise_sensitivity_relevant": 1 / 3,
                              "noise_sensitivity_irrelevant": 1 / 3,
                              "hallucination": 0.0, "self_knowledge": 0.0}
    # the relevant group holds only the passage that covers the required claim
    by_group = {r.request_id.split("/")[1]: r.messages[1].content for r in gen.requests
                if "/" in r.request_id}
    assert "prefix tree used" in by_group["relevant"] and "Heaps" not in by_group["relevant"]
    assert "Heaps" in by_group["irrelevant"]
    assert by_group["reference"].startswith("Context:\n[reference] a prefix tree")


def test_hallucination_and_self_knowledge() -> None:
    # nothing grounded: claim 1 correct -> self-knowledge; 2 and 3 incorrect -> hallucination
    gen = ScriptedGenerator(_script({"reference": [1], "relevant": [], "irrelevant": []}))
    [v] = GeneratorDiagnosticsJudge(generator=gen).judge([_item()])
    assert dict(v.scores)["hallucination"] == 2 / 3
    assert dict(v.scores)["self_knowledge"] == 1 / 3
    assert diagnostic_scores(2, {1, 2}, {1, 2}, set()) == (
        ("noise_sensitivity_relevant", 0.0), ("noise_sensitivity_irrelevant", 0.0),
        ("hallucination", 0.0), ("self_knowledge", 0.0))


@pytest.mark.parametrize(("kw", "status"), [
    ({"must_abstain": True}, "not_applicable"),
    ({"reference": None, "required_claims": ()}, "not_applicable"),
    ({"answer": "I don't know."}, "no_claims"),
    ({"answer": None}, "error"),
])
def test_statuses(kw: dict[str, object], status: str) -> None:
    gen = ScriptedGenerator(_script({}))
    [v] = GeneratorDiagnosticsJudge(generator=gen).judge([_item(**kw)])
    assert v.status == status and gen.requests == []


def test_an_invalid_partition_makes_the_verdict_invalid_with_its_failure_mode() -> None:
    def script(r: GenerationRequest) -> str:
        if "claims" in json.loads(r.json_schema or "{}").get("properties", {}):
            return json.dumps({"claims": CLAIMS})
        return json.dumps({"supported": [1, 2], "unsupported": [2]})  # 2 twice, 3 missing
    [v] = GeneratorDiagnosticsJudge(generator=ScriptedGenerator(script),
                                    max_retries=0).judge([_item()])
    assert v.status == "invalid" and v.scores == ()
    mode, why = failure_mode(v)
    assert mode == "invalid_partition" and "in both" in why
