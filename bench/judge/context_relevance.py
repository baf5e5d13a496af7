"""Per-passage context relevance: which supplied passages help answer the question.

The judge partitions the numbered passages into ``relevant`` / ``irrelevant`` (complete and
disjoint, validated and retried like the faithfulness partition). Score = relevant passages /
supplied passages; the per-passage labels are kept in ``Verdict.detail``. Needs no answer: it
judges what retrieval handed the generator. A context without passages is ``not_applicable``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, Field

from bench.generation.base import ChatMessage, Generator
from bench.judge.base import OK, JudgeItem, Verdict
from bench.judge.llm import BOUNDED_PARTITION, LLMJudge, detail, partition_errors
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


def bounded_schema(n: int) -> str:
    """``PassageRelevance``'s JSON Schema with both lists bounded to the passage numbers
    1..n (an enum) and to n items, for guided decoding (as the faithfulness judge's
    ``partition_schema``): a small model can no longer name passage 2 of a one-passage
    context; overlaps are still possible and still rejected."""
    schema = PassageRelevance.model_json_schema()
    for name in ("relevant", "irrelevant"):
        prop = schema["properties"][name]
        prop["items"] = {**prop["items"], "enum": list(range(1, n + 1))}
        prop["maxItems"] = n
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


class ContextRelevanceJudge(LLMJudge):
    """Extra option: ``bounded`` — guide decoding with :func:`bounded_schema` (off by
    default, so the cache keys and verdicts of earlier runs stay as they were)."""

    name = "context_relevance"
    metrics = ("context_relevance",)
    prompts = (SYSTEM, USER)

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 512,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True,
                 bounded: bool = False) -> None:
        super().__init__(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                         temperature=temperature, seed=seed, feedback=feedback)
        self.bounded = bounded

    def cache_params(self) -> dict[str, object]:
        return {**super().cache_params(), **(BOUNDED_PARTITION if self.bounded else {})}

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
                _validator(len(ctx.passages)),
                bounded_schema(len(ctx.passages)) if self.bounded else None))
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
