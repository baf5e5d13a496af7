"""Per-passage context relevance: which supplied passages help answer the question.

The judge partitions the numbered passages into ``relevant`` / ``irrelevant`` (complete and
disjoint, validated and retried like the faithfulness partition). Score = relevant passages /
supplied passages; the per-passage labels are kept in ``Verdict.detail``. Needs no answer: it
judges what retrieval handed the generator. A context without passages is ``not_applicable``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from bench.generation.base import ChatMessage
from bench.judge.base import OK, JudgeItem, Verdict
from bench.judge.llm import LLMJudge, detail, partition_errors
from bench.judge.rubric import prompts
from bench.judge.structured import JudgeSchema, Task
from bench.metrics.base import NOT_APPLICABLE

#: the prompt templates live in the rubric (conf/judge/rubrics/context_relevance.yaml)
SYSTEM, USER = prompts("context_relevance", "system", "user")


class PassageRelevance(JudgeSchema):
    relevant: list[int] = Field(description="numbers of the helpful passages")
    irrelevant: list[int] = Field(description="numbers of the other passages")


def _validator(n: int):  # type: ignore[no-untyped-def]
    def validate(obj: PassageRelevance) -> None:
        err = partition_errors(n, obj.relevant, obj.irrelevant, ("relevant", "irrelevant"))
        if err:
            raise ValueError(err)
    return validate


class ContextRelevanceJudge(LLMJudge):
    name = "context_relevance"
    metrics = ("context_relevance",)
    prompts = (SYSTEM, USER)

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (PassageRelevance,)

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        asked = [i for i, it in enumerate(items) if it.context is not None and it.context.passages]
        tasks = []
        for i in asked:
            ctx = items[i].context
            assert ctx is not None
            listing = "\n\n".join(f"{n}. {p.text}" for n, p in enumerate(ctx.passages, start=1))
            tasks.append(Task(items[i].query_id, (
                ChatMessage("system", SYSTEM),
                ChatMessage("user", USER.format(query=items[i].query, passages=listing))),
                _validator(len(ctx.passages))))
        results = self.caller(PassageRelevance).run(tasks, "passages")
        out: dict[int, Verdict] = {}
        for i, (obj, call) in zip(asked, results, strict=True):
            qid, ctx = items[i].query_id, items[i].context
            assert ctx is not None
            if obj is None:
                out[i] = Verdict(qid, self.name, call.status, (), (call,))
                continue
            labels = [(p.doc_id, p.chunk_idx, n in obj.relevant)
                      for n, p in enumerate(ctx.passages, start=1)]
            out[i] = Verdict(qid, self.name, OK,
                             (("context_relevance", len(obj.relevant) / len(ctx.passages)),),
                             (call,), detail({"passages": labels}))
        return [out.get(i) or Verdict(it.query_id, self.name, NOT_APPLICABLE, (), ())
                for i, it in enumerate(items)]
