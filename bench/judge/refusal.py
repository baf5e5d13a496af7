"""Refusal correctness on ``must_abstain`` queries: did the system decline to answer?

An answer matching a refusal pattern (``bench.metrics.answer.AbstentionDetector``) is a
refusal without asking the model when ``patterns_first`` is set; otherwise, or when no
pattern matches, the judge decides (catching paraphrased refusals). Score 1 = refused.
Answerable queries are ``not_applicable`` here (their answers are checked for correctness).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from bench.context.base import strip_citations
from bench.generation.base import ChatMessage, Generator
from bench.judge.base import OK, JudgeItem, Verdict
from bench.judge.llm import LLMJudge, detail
from bench.judge.rubric import prompts
from bench.judge.structured import JudgeSchema, Task
from bench.metrics.answer import AbstentionDetector
from bench.metrics.base import ERROR, NOT_APPLICABLE

#: the prompt templates live in the rubric (conf/judge/rubrics/refusal.yaml)
SYSTEM, USER = prompts("refusal", "system", "user")


class Refusal(JudgeSchema):
    reason: str = Field(description="one sentence")
    refused: bool


class RefusalJudge(LLMJudge):
    """Extra options: ``patterns_first`` (accept a pattern match without asking the model),
    ``refusal_patterns`` (empty: the defaults)."""

    name = "refusal"
    metrics = ("refusal_correct",)
    prompts = (SYSTEM, USER)

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True,
                 patterns_first: bool = True, refusal_patterns: Sequence[str] = ()) -> None:
        super().__init__(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                         temperature=temperature, seed=seed, feedback=feedback)
        self.patterns_first = patterns_first
        self.detector = AbstentionDetector(patterns=refusal_patterns)

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (Refusal,)

    def cache_params(self) -> dict[str, object]:
        return {**super().cache_params(), "patterns_first": self.patterns_first,
                "refusal_patterns": list(self.detector.patterns)}

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out: dict[int, Verdict] = {}
        asked = []
        for i, it in enumerate(items):
            if not it.must_abstain:
                out[i] = Verdict(it.query_id, self.name, NOT_APPLICABLE, (), ())
            elif it.answer is None:
                out[i] = Verdict(it.query_id, self.name, ERROR, (), ())
            elif self.patterns_first and self.detector.abstains(it.answer):
                out[i] = Verdict(it.query_id, self.name, OK, (("refusal_correct", 1.0),), (),
                                 detail({"decided_by": "pattern"}))
            else:
                asked.append(i)
        results = self.caller(Refusal).run([
            Task(items[i].query_id, (
                ChatMessage("system", SYSTEM),
                ChatMessage("user", USER.format(query=items[i].query,
                                                answer=strip_citations(items[i].answer or "")))))
            for i in asked
        ], "refusal")
        for i, (obj, call) in zip(asked, results, strict=True):
            qid = items[i].query_id
            if obj is None:
                out[i] = Verdict(qid, self.name, call.status, (), (call,))
            else:
                out[i] = Verdict(qid, self.name, OK, (("refusal_correct", float(obj.refused)),),
                                 (call,), detail({"decided_by": "judge", **obj.model_dump()}))
        return [out[i] for i in range(len(items))]
