"""Faithfulness: extract the answer's atomic claims, then verify each against the context.

Score = supported claims / extracted claims. The verification must be a complete, disjoint
partition of the extracted claims (every claim number in exactly one of ``supported`` /
``unsupported``); anything else is rejected and retried. An answer with no claims (a refusal,
an empty answer) is ``no_claims``: excluded from the mean, never scored 1.0. An answer that
matches a refusal pattern is ``no_claims`` without asking the model (a small judge would
otherwise extract "the assistant does not know" as a claim).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from bench.context.base import strip_citations
from bench.generation.base import ChatMessage, Generator
from bench.judge.base import OK, JudgeItem, Verdict
from bench.judge.llm import (
    BOUNDED_PARTITION,
    LLMJudge,
    Partition,
    check_partition,
    detail,
    numbered,
    partition_schema,
    render_context,
)
from bench.judge.rubric import prompts
from bench.judge.structured import JudgeSchema, Task
from bench.metrics.answer import AbstentionDetector
from bench.metrics.base import ERROR, NO_CLAIMS

#: the prompt templates live in the rubric (conf/judge/rubrics/faithfulness.yaml)
EXTRACT_SYSTEM, EXTRACT_USER, VERIFY_SYSTEM, VERIFY_USER = prompts(
    "faithfulness", "extract_system", "extract_user", "verify_system", "verify_user")


class Claims(JudgeSchema):
    claims: list[str] = Field(description="atomic factual claims made by the answer")


class FaithfulnessJudge(LLMJudge):
    """Extra option: ``refusal_patterns`` (empty: the defaults of
    ``bench.metrics.answer.AbstentionDetector``)."""

    name = "faithfulness"
    metrics = ("faithfulness",)
    prompts = (EXTRACT_SYSTEM, EXTRACT_USER, VERIFY_SYSTEM, VERIFY_USER)

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 512,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True,
                 refusal_patterns: Sequence[str] = ()) -> None:
        super().__init__(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                         temperature=temperature, seed=seed, feedback=feedback)
        self.detector = AbstentionDetector(patterns=refusal_patterns)

    def cache_params(self) -> dict[str, object]:
        return {**super().cache_params(), **BOUNDED_PARTITION,
                "refusal_patterns": list(self.detector.patterns)}

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (Claims, Partition)

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        verdicts: dict[int, Verdict] = {}
        asked = []
        for i, it in enumerate(items):
            if it.answer is not None and self.detector.abstains(strip_citations(it.answer)):
                verdicts[i] = Verdict(it.query_id, self.name, NO_CLAIMS, (), (),
                                      detail({"abstained": True}))
            elif it.answer is not None:
                asked.append(i)
        extract = self.caller(Claims).run([
            Task(items[i].query_id, (
                ChatMessage("system", EXTRACT_SYSTEM),
                ChatMessage("user", EXTRACT_USER.format(
                    query=items[i].query, answer=strip_citations(items[i].answer or "")))))
            for i in asked
        ], "extract")
        claims_of: dict[int, list[str]] = {}
        for i, (obj, call) in zip(asked, extract, strict=True):
            it = items[i]
            if obj is None:
                verdicts[i] = Verdict(it.query_id, self.name, call.status, (), (call,))
                continue
            claims = [c.strip() for c in obj.claims if c.strip()]
            if not claims:
                verdicts[i] = Verdict(it.query_id, self.name, NO_CLAIMS, (), (call,),
                                      detail({"claims": []}))
                continue
            claims_of[i] = claims
        to_verify = sorted(claims_of)
        verify = self.caller(Partition).run([
            Task(items[i].query_id, (
                ChatMessage("system", VERIFY_SYSTEM),
                ChatMessage("user", VERIFY_USER.format(
                    context=render_context(items[i].context), claims=numbered(claims_of[i])))),
                check_partition(len(claims_of[i])),  # type: ignore[arg-type]
                partition_schema(len(claims_of[i])))
            for i in to_verify
        ], "verify")
        extract_call = {i: call for i, (_, call) in zip(asked, extract, strict=True)}
        for i, (part, call) in zip(to_verify, verify, strict=True):
            it, claims = items[i], claims_of[i]
            calls = (extract_call[i], call)
            if part is None:
                verdicts[i] = Verdict(it.query_id, self.name, call.status, (), calls,
                                      detail({"claims": claims}))
                continue
            score = len(part.supported) / len(claims)
            verdicts[i] = Verdict(it.query_id, self.name, OK, (("faithfulness", score),), calls,
                                  detail({"claims": claims, "supported": sorted(part.supported),
                                          "unsupported": sorted(part.unsupported)}))
        return [verdicts.get(i) or Verdict(it.query_id, self.name, ERROR, (), ())
                for i, it in enumerate(items)]
