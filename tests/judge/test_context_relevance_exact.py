"""context_relevance with ``exact``: the guided schema admits every valid partition and
nothing else, so a tiny judge model cannot produce an invalid verdict."""

from __future__ import annotations

import json
from itertools import product

import pytest
from scripted import ScriptedGenerator

from bench.context.base import Context, ContextPassage
from bench.generation.base import ChatMessage, GenerationRequest
from bench.judge.base import JudgeItem
from bench.judge.context_relevance import (
    EXACT_MAX_PASSAGES,
    ContextRelevanceJudge,
    PassageRelevance,
    bounded_schema,
    exact_schema,
)
from bench.judge.llm import partition_errors


def _item(n: int) -> JudgeItem:
    passages = tuple(ContextPassage(f"d{k}", 0, f"passage {k}", k + 1) for k in range(n))
    ctx = Context("q0", "what is a passage?", passages, (ChatMessage("user", "..."),), 10, n)
    return JudgeItem("q0", "what is a passage?", "an answer", ctx)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_schema_holds_exactly_the_valid_partitions(n: int) -> None:
    cases = json.loads(exact_schema(n))["anyOf"]
    assert len(cases) == 2 ** n
    seen = set()
    for case in cases:
        props = case["properties"]
        assert list(props) == ["relevant", "irrelevant"]  # the order the prompt asks for
        obj = PassageRelevance(relevant=props["relevant"]["const"],
                               irrelevant=props["irrelevant"]["const"])
        assert partition_errors(n, obj.relevant, obj.irrelevant) is None
        seen.add(tuple(obj.relevant))
    # every subset of 1..n is the relevant list of exactly one case
    assert seen == {tuple(k for k, b in zip(range(1, n + 1), bits, strict=True) if b)
                    for bits in product([False, True], repeat=n)}


def test_a_guided_decoder_accepts_only_valid_partitions() -> None:
    xgr = pytest.importorskip("xgrammar")
    grammar = xgr.Grammar.from_json_schema(exact_schema(2))
    accepts = xgr.testing._is_grammar_accept_string
    assert accepts(grammar, '{"relevant": [2], "irrelevant": [1]}')
    assert accepts(grammar, '{"relevant":[1,2],"irrelevant":[]}')
    assert not accepts(grammar, '{"relevant": [1], "irrelevant": [1, 2]}')  # overlap
    assert not accepts(grammar, '{"relevant": [], "irrelevant": [2]}')  # omission
    assert not accepts(grammar, '{"irrelevant": [2], "relevant": [1]}')  # another order


def test_exact_is_in_the_cache_key_and_sent_with_every_request() -> None:
    seen: list[str | None] = []

    def script(r: GenerationRequest) -> str:
        seen.append(r.json_schema)
        return json.dumps({"relevant": [2], "irrelevant": [1, 3]})

    judge = ContextRelevanceJudge(generator=ScriptedGenerator(script), exact=True, bounded=True)
    assert judge.cache_params()["partition_schema"] == "exact-partitions"
    plain = ContextRelevanceJudge(generator=ScriptedGenerator(script))
    assert "partition_schema" not in plain.cache_params()  # earlier keys unchanged
    [verdict] = judge.judge([_item(3)])
    assert verdict.score("context_relevance") == pytest.approx(1 / 3)
    assert seen == [exact_schema(3)]
    # past EXACT_MAX_PASSAGES (2**n choices) the bounded schema is sent instead
    assert exact_schema(EXACT_MAX_PASSAGES + 1) == bounded_schema(EXACT_MAX_PASSAGES + 1)
