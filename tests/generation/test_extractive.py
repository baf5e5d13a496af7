"""The extractive (non-LLM) generator reads the context builder's prompt and answers with the
best-matching sentence, cited; what it cannot read is a per-request error."""

from __future__ import annotations

import pytest

from bench.context.base import ContextPassage
from bench.context.budgeted import BudgetedContext
from bench.errors import ConfigError
from bench.generation.base import ChatMessage, GenerationRequest
from bench.generation.extractive import ExtractiveGenerator, read_prompt


def _prompt(query: str, *passages: tuple[str, str]) -> tuple[ChatMessage, ...]:
    return BudgetedContext().messages(query, [ContextPassage(d, i, t, i)
                                              for i, (d, t) in enumerate(passages)])


def test_reads_the_budgeted_prompt() -> None:
    q, ps = read_prompt(_prompt("Who wrote Unix?", ("a", "One. Two."), ("b", "Three.")),
                        "Question:")
    assert q == "Who wrote Unix?"
    assert [(p.doc_id, p.text) for p in ps] == [("a", "One. Two."), ("b", "Three.")]


def test_answers_with_the_best_sentence_and_its_tag() -> None:
    msgs = _prompt("Which company made the VAX minicomputer?",
                   ("d1", "Unix was written at Bell Labs. It ran on the VAX."),
                   ("d2", "The PDP-11 came first. The VAX minicomputer was made by DEC."))
    (g,) = ExtractiveGenerator().generate([GenerationRequest("q1", msgs)])
    assert (g.status, g.finish_reason) == ("ok", "stop")
    assert g.text == "The VAX minicomputer was made by DEC. [doc:d2]"
    assert g.output_tokens == len(g.text.split()) and g.ttft_ms is None
    two = ExtractiveGenerator(max_sentences=2).generate([GenerationRequest("q1", msgs)])[0]
    # the two best sentences, in passage order (a sentence sharing no term is never chosen)
    assert two.text == ("It ran on the VAX. [doc:d1] "
                        "The VAX minicomputer was made by DEC. [doc:d2]")


def test_abstains_without_a_matching_sentence() -> None:
    msgs = _prompt("zebra stripes?", ("d1", "Unix was written at Bell Labs."))
    gen = ExtractiveGenerator(abstain_phrase="I don't know")
    assert gen.generate([GenerationRequest("q", msgs)])[0].text == "I don't know"
    empty = _prompt("Which company made the VAX?")
    assert gen.generate([GenerationRequest("q", empty)])[0].text == "I don't know"


def test_an_unreadable_prompt_is_a_per_request_error() -> None:
    gen = ExtractiveGenerator()
    ok = _prompt("Who made the VAX?", ("d", "DEC made the VAX."))
    got = gen.generate([GenerationRequest("bad", (ChatMessage("user", "hello"),)),
                        GenerationRequest("ok", ok),
                        GenerationRequest("schema", ok, json_schema="{}")])
    assert [g.status for g in got] == ["error", "ok", "error"]
    assert got[0].error == "no 'Question:' in the user message"
    assert "JSON schema" in (got[2].error or "")


def test_options_are_checked_and_keyed() -> None:
    from bench.config.build import build

    with pytest.raises(ConfigError, match=r"generator\.max_sentences"):
        build({"_target_": "bench.generation.extractive.ExtractiveGenerator",
               "max_sentences": 0}, "generator")
    a = ExtractiveGenerator().cache_params()
    assert a != ExtractiveGenerator(max_sentences=2).cache_params()
    assert a["backend"] == "extractive"
