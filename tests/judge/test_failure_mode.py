"""A faithfulness verdict's failure mode and rationale, read from what the verdict recorded."""

from __future__ import annotations

import json

from bench.context.base import Context, ContextPassage
from bench.generation.base import Generation, GenerationRequest
from bench.judge.base import JudgeItem, failure_mode
from bench.judge.faithfulness import FaithfulnessJudge
from tests.judge.scripted import ScriptedGenerator

CTX = Context("q1", "?", (ContextPassage("d1", 0, "A trie is a prefix tree.", 1),), (), 9, 1)


def _faith(script, answer: str | None = "A trie is a tree. It was made in 1990.",  # type: ignore[no-untyped-def]
           retries: int = 0):
    [v] = FaithfulnessJudge(generator=ScriptedGenerator(script), max_retries=retries).judge(
        [JudgeItem("q1", "what is a trie?", answer, CTX)])
    return v


def _claims_then(partition: str):  # type: ignore[no-untyped-def]
    def script(r: GenerationRequest) -> str:
        if "claims" in json.loads(r.json_schema or "{}").get("properties", {}):
            return json.dumps({"claims": ["a trie is a tree", "it was made in 1990"]})
        return partition
    return script


def test_unsupported_claims_are_the_rationale() -> None:
    v = _faith(_claims_then(json.dumps({"supported": [1], "unsupported": [2]})))
    assert v.status == "ok" and v.score("faithfulness") == 0.5
    assert failure_mode(v) == ("unsupported_claims", "unsupported: it was made in 1990")
    ok = _faith(_claims_then(json.dumps({"supported": [1, 2], "unsupported": []})))
    assert failure_mode(ok) == ("", "")


def test_invalid_schema_partition_abstained_backend_and_no_answer() -> None:
    assert failure_mode(_faith(_claims_then("not json")))[0] == "schema"
    mode, why = failure_mode(_faith(_claims_then(json.dumps({"supported": [1],
                                                             "unsupported": []}))))
    assert mode == "invalid_partition" and "[2] missing" in why
    assert failure_mode(_faith(_claims_then(""), answer="I don't know.")) == (
        "abstained", "the answer abstains")
    assert failure_mode(_faith(_claims_then(""), answer=None)) == ("no_answer", "")
    down = _faith(lambda r: Generation(r.request_id, "", "error", "error", 0, 0, None, None,
                                       0.0, error="server down"))
    assert down.status == "error" and failure_mode(down)[0] == "backend"
