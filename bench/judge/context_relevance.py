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


#: more passages than this: ``exact`` falls back to :func:`bounded_schema` (2**n choices)
EXACT_MAX_PASSAGES = 8


def exact_schema(n: int) -> str:
    """A JSON Schema whose only instances are the complete, disjoint partitions of the
    passage numbers 1..n (``anyOf`` of the 2**n ``const`` pairs, each list ascending): a
    guided decoder can emit nothing the validator rejects, so even a tiny model gives a
    verdict (SmolLM2-135M put passage 1 in both lists on every item under
    :func:`bounded_schema`). For n > :data:`EXACT_MAX_PASSAGES` it is
    :func:`bounded_schema`, whose overlaps are still rejected and retried."""
    if n > EXACT_MAX_PASSAGES:
        return bounded_schema(n)
    cases = []
    for mask in range(2 ** n):
        relevant = [k for k in range(1, n + 1) if mask >> (k - 1) & 1]
        irrelevant = [k for k in range(1, n + 1) if not mask >> (k - 1) & 1]
        cases.append({"type": "object",
                      "properties": {"relevant": {"const": relevant},
                                     "irrelevant": {"const": irrelevant}},
                      "required": ["relevant", "irrelevant"], "additionalProperties": False})
    # not key-sorted: a guided decoder emits the properties in schema order, and the prompt
    # asks for "relevant" first
    return json.dumps({"anyOf": cases}, separators=(",", ":"))


class ContextRelevanceJudge(LLMJudge):
    """Extra options, both off by default (the cache keys and verdicts of earlier runs stay as
    they were): ``bounded`` — guide decoding with :func:`bounded_schema`; ``exact`` — guide it
    with :func:`exact_schema` (every output a valid partition; wins over ``bounded``)."""

    name = "context_relevance"
    metrics = ("context_relevance",)
    prompts = (SYSTEM, USER)

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 512,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True,
                 bounded: bool = False, exact: bool = False) -> None:
        super().__init__(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                         temperature=temperature, seed=seed, feedback=feedback)
        self.bounded = bounded
        self.exact = exact

    def cache_params(self) -> dict[str, object]:
        if self.exact:
            return {**super().cache_params(), "partition_schema": "exact-partitions"}
        return {**super().cache_params(), **(BOUNDED_PARTITION if self.bounded else {})}

    def _schema(self, n: int) -> str | None:
        if self.exact:
            return exact_schema(n)
        return bounded_schema(n) if self.bounded else None

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
                self._schema(len(ctx.passages))))
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
