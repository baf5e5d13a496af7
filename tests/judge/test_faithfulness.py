"""Faithfulness: claim extraction, partition validation with retries, no_claims, errors."""

from __future__ import annotations

import json

from scripted import ScriptedGenerator, queue

from bench.context.base import Context, ContextPassage
from bench.generation.base import ChatMessage, Generation
from bench.judge.base import JudgeItem, schema_validity
from bench.judge.faithfulness import Claims, FaithfulnessJudge
from bench.judge.llm import Partition, partition_schema
from bench.judge.structured import schema_text

CTX = Context("q1", "What is X?", (ContextPassage("d1", 0, "X is a cat. X is black.", 1),),
              (ChatMessage("user", "..."),), 10, 1)


def _item(qid: str = "q1", answer: str | None = "X is a cat [doc:d1]. X is black. X flies.",
          ) -> JudgeItem:
    return JudgeItem(qid, "What is X?", answer, CTX)


def test_score_is_supported_over_extracted() -> None:
    gen = ScriptedGenerator(queue(
        json.dumps({"claims": ["X is a cat", "X is black", "X flies"]}),
        json.dumps({"supported": [1, 2], "unsupported": [3]}),
    ))
    [v] = FaithfulnessJudge(generator=gen).judge([_item()])
    assert v.status == "ok" and v.score("faithfulness") == 2 / 3
    assert v.attempts == 2 and len(v.raw) == 2
    # schema-guided: every request carries its model's JSON schema text
    # (the verification's is Partition's with the claim numbers bounded to 1..3)
    assert [r.json_schema for r in gen.requests] == [schema_text(Claims), partition_schema(3)]
    # citation tags are not shown to the claim extractor
    assert "[doc:" not in gen.requests[0].messages[1].content
    assert [c.first_valid for c in v.calls] == [True, True]


def test_overlapping_or_incomplete_partition_is_retried_then_invalid() -> None:
    claims = json.dumps({"claims": ["a b", "c d"]})
    overlap = json.dumps({"supported": [1, 2], "unsupported": [2]})
    omission = json.dumps({"supported": [1], "unsupported": []})
    gen = ScriptedGenerator(queue(claims, overlap, omission, "not json"))
    [v] = FaithfulnessJudge(generator=gen, max_retries=2).judge([_item()])
    assert v.status == "invalid" and v.scores == ()
    verify = v.calls[1]
    assert verify.attempts == 3 and verify.first_valid is False
    assert "[2] in both" in verify.errors[0] and "[2] missing" in verify.errors[1]
    # the rejection reason goes back to the model on retry
    assert "[2] in both" in gen.requests[2].messages[-1].content
    assert [v.query_id for v in v.values(("faithfulness",))] == ["q1"]
    [row] = v.values(("faithfulness",))
    assert (row.value, row.status) == (0.0, "invalid")


def test_retry_that_succeeds_counts_as_first_attempt_invalid() -> None:
    gen = ScriptedGenerator(queue(
        "```json\n" + json.dumps({"claims": ["a b"]}) + "\n```",  # fence: unwrapped, valid
        json.dumps({"supported": [1, 1], "unsupported": []}),  # repeated -> rejected
        json.dumps({"supported": [], "unsupported": [1]}),
    ))
    [v] = FaithfulnessJudge(generator=gen).judge([_item()])
    assert v.status == "ok" and v.score("faithfulness") == 0 / 1
    rate = schema_validity(v.calls)
    assert (rate.numerator, rate.denominator, rate.rate) == (1, 2, 1 / 2)


def test_no_claims_is_not_scored() -> None:
    gen = ScriptedGenerator(queue(json.dumps({"claims": [" "]})))
    [v] = FaithfulnessJudge(generator=gen).judge([_item(answer="Well, hmm.")])
    assert v.status == "no_claims" and v.score("faithfulness") is None
    assert len(gen.requests) == 1  # no verification call
    # a refusal has no claims and needs no judge call
    [r] = FaithfulnessJudge(generator=gen).judge([_item(answer="I don't know [doc:d1].")])
    assert r.status == "no_claims" and r.calls == () and len(gen.requests) == 1
    [row] = v.values(("faithfulness",))
    assert (row.value, row.status) == (0.0, "no_claims")


def test_failed_generation_and_backend_error() -> None:
    timeout = Generation("x", "", "timeout", "timeout", 0, 0, None, None, 5.0, error="slow")
    gen = ScriptedGenerator(queue(timeout))
    a, b = FaithfulnessJudge(generator=gen, max_retries=0).judge(
        [_item("q1", answer=None), _item("q2")])
    assert a.status == "error" and a.calls == ()  # no answer: nothing asked
    assert b.status == "error" and b.calls[0].errors == ("generation timeout: slow",)
    assert len(gen.requests) == 1


def test_batch_first() -> None:
    outputs = {"extract": json.dumps({"claims": ["a b"]}),
               "verify": json.dumps({"supported": [1], "unsupported": []})}
    gen = ScriptedGenerator(lambda r: outputs[r.request_id.split("/")[1]])
    verdicts = FaithfulnessJudge(generator=gen).judge([_item(f"q{i}") for i in range(4)])
    assert [v.score("faithfulness") for v in verdicts] == [1.0] * 4
    assert gen.batches == [4, 4]


def test_partition_schema_bounds_the_claim_numbers() -> None:
    schema = json.loads(partition_schema(3))
    for name in ("supported", "unsupported"):
        prop = schema["properties"][name]
        assert prop["items"]["enum"] == [1, 2, 3] and prop["maxItems"] == 3
    # the same object shape as Partition: an output of the bounded schema parses as one
    base = json.loads(schema_text(Partition))
    assert schema["required"] == base["required"]
    assert schema["additionalProperties"] is False
    assert Partition.model_validate_json('{"supported": [1, 3], "unsupported": [2]}')


def test_guided_decoding_stops_a_looping_partition() -> None:
    # SmolLM2-135M was seen answering '{"supported": [1, 2, 3, 4, ...' for ONE claim until it
    # ran out of tokens; under the bounded schema the grammar itself rejects that.
    import pytest

    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string as accepts

    grammar = xgr.Grammar.from_json_schema(partition_schema(1), any_whitespace=False)
    assert accepts(grammar, '{"supported": [1], "unsupported": []}')
    assert not accepts(grammar, '{"supported": [1, 2, 3], "unsupported": []}')
    assert not accepts(grammar, '{"supported": [1, 1], "unsupported": []}')
    assert not accepts(grammar, '{"supported": [2], "unsupported": []}')
    # overlaps within 1..n stay possible: check_partition rejects them (tests above)
    grammar2 = xgr.Grammar.from_json_schema(partition_schema(2), any_whitespace=False)
    assert accepts(grammar2, '{"supported": [1, 2], "unsupported": [1]}')


def test_bounded_partition_is_in_the_cache_key() -> None:
    params = FaithfulnessJudge(generator=ScriptedGenerator(queue())).cache_params()
    assert params["partition_schema"] == "bounded-1..n"
