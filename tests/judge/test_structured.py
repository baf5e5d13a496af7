"""The schema-guided caller: strict parsing, fences, bounded retries, statuses, validity."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel
from scripted import ScriptedGenerator, queue

from bench.generation.base import ChatMessage, Generation, SamplingParams
from bench.judge.base import Verdict, schema_validity
from bench.judge.llm import partition_errors
from bench.judge.structured import StructuredCaller, Task, parse, schema_text


class Flag(BaseModel):
    flag: bool


def _caller(gen: ScriptedGenerator, retries: int = 2) -> StructuredCaller[Flag]:
    return StructuredCaller(gen, Flag, max_retries=retries, sampling=SamplingParams(seed=7))


TASK: Task[Flag] = Task("k", (ChatMessage("user", "?"),))


def test_schema_text_is_stable_json() -> None:
    text = schema_text(Flag)
    assert json.loads(text)["properties"]["flag"]["type"] == "boolean"
    assert text == schema_text(Flag) and " " not in text


def test_parse_is_strict_but_unwraps_a_fence() -> None:
    assert parse(Flag, '```json\n{"flag": true}\n```').flag is True
    assert parse(Flag, ' {"flag": false} ').flag is False
    for bad in ('{"flag": true} trailing', 'Sure! {"flag": true}', '{"flag": "maybe"}'):
        try:
            parse(Flag, bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_bounded_retries_then_invalid_with_raw_kept() -> None:
    gen = ScriptedGenerator(queue("nope", "{}", '{"flag": 1.5}'))
    [(obj, call)] = _caller(gen, retries=2).run([TASK], "s")
    assert obj is None and call.status == "invalid" and call.attempts == 3
    assert call.raw == ("nope", "{}", '{"flag": 1.5}')
    assert len(gen.requests) == 3
    # each retry uses a new seed and carries the rejected output back
    assert [r.sampling.seed for r in gen.requests] == [7, 8, 9]
    assert gen.requests[1].messages[-2] == ChatMessage("assistant", "nope")
    v = Verdict("q", "j", call.status, (), (call,))
    assert [(r.value, r.status) for r in v.values(["m"])] == [(0.0, "invalid")]


def test_backend_failure_is_error_and_only_failures_are_retried() -> None:
    err = Generation("x", "", "error", "error", 0, 0, None, None, 1.0, error="HTTP 500")
    gen = ScriptedGenerator(queue('{"flag": true}', err, err))
    res = _caller(gen, retries=1).run([Task("a", TASK.messages), Task("b", TASK.messages)], "s")
    (a, ca), (b, cb) = res
    assert a is not None and a.flag and ca.status == "ok" and ca.attempts == 1
    assert b is None and cb.status == "error" and cb.attempts == 2
    assert gen.batches == [2, 1]
    assert schema_validity([ca, cb]).rate == 1 / 2


def test_partition_errors() -> None:
    assert partition_errors(3, [1, 3], [2]) is None
    assert partition_errors(3, [1, 1], [2, 3]) == "[1] repeated in supported"
    assert partition_errors(2, [1, 2], [2]) == "[2] in both supported and unsupported"
    assert partition_errors(2, [1, 2, 3], []) == "[3] out of range 1..2"
    assert partition_errors(0, [], []) is None


@pytest.mark.slow  # importing xgrammar takes ~8 s here
def test_every_judge_schema_compiles_for_guided_decoding() -> None:
    xgr = pytest.importorskip("xgrammar")
    from bench.judge.llm import LLMJudge
    from bench.judge.pairwise import PairwisePreferenceJudge
    from bench.judge.suite import pointwise_judges

    classes: list[type[LLMJudge]] = [  # verifiers ask no model: no schema
        *(c for c in pointwise_judges().values() if issubclass(c, LLMJudge)),
        PairwisePreferenceJudge]
    for cls in classes:
        for model in cls.schemas():
            assert xgr.Grammar.from_json_schema(schema_text(model)) is not None
