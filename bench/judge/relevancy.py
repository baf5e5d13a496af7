"""Answer relevancy: how well the answer addresses the question, rated 1-5 -> (r - 1) / 4.

The rating is an integer the schema bounds to 1..5 (an out-of-range or missing rating is a
schema failure, retried). A refusal is rated like any answer: it addresses the question
poorly, which is what this metric should say; abstention itself is scored elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from bench.context.base import strip_citations
from bench.generation.base import ChatMessage
from bench.judge.base import OK, JudgeItem, Verdict
from bench.judge.llm import LLMJudge, detail
from bench.judge.rubric import prompts
from bench.judge.structured import JudgeSchema, Task
from bench.metrics.base import ERROR

#: the prompt templates live in the rubric (conf/judge/rubrics/answer_relevancy.yaml)
SYSTEM, USER = prompts("answer_relevancy", "system", "user")


class Rating(JudgeSchema):
    reason: str = Field(description="one sentence")
    rating: int = Field(ge=1, le=5, description="1 (not at all) .. 5 (fully)")


class AnswerRelevancyJudge(LLMJudge):
    name = "answer_relevancy"
    metrics = ("answer_relevancy",)
    prompts = (SYSTEM, USER)

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (Rating,)

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        asked = [i for i, it in enumerate(items) if it.answer is not None]
        results = self.caller(Rating).run([
            Task(items[i].query_id, (
                ChatMessage("system", SYSTEM),
                ChatMessage("user", USER.format(query=items[i].query,
                                                answer=strip_citations(items[i].answer or "")))))
            for i in asked
        ], "rate")
        out: dict[int, Verdict] = {}
        for i, (obj, call) in zip(asked, results, strict=True):
            qid = items[i].query_id
            if obj is None:
                out[i] = Verdict(qid, self.name, call.status, (), (call,))
            else:
                out[i] = Verdict(qid, self.name, OK, (("answer_relevancy", (obj.rating - 1) / 4),),
                                 (call,), detail(obj.model_dump()))
        return [out.get(i) or Verdict(it.query_id, self.name, ERROR, (), ())
                for i, it in enumerate(items)]
