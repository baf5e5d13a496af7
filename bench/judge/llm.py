"""What every LLM judge shares: options, the structured caller, prompt pieces, validators."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel, Field

from bench.config.build import OptionError
from bench.context.base import Context, tag
from bench.generation.base import Generator, SamplingParams
from bench.judge.base import JudgeItem, Verdict
from bench.judge.rubric import rubric
from bench.judge.structured import JudgeSchema, StructuredCaller, schema_text

M = TypeVar("M", bound=BaseModel)


class Partition(JudgeSchema):
    """Numbered items split into two lists; every number in exactly one of them."""

    supported: list[int] = Field(description="numbers of the supported items")
    unsupported: list[int] = Field(description="numbers of the unsupported items")


def partition_errors(n: int, first: Sequence[int], second: Sequence[int],
                     names: tuple[str, str] = ("supported", "unsupported")) -> str | None:
    """Why ``first`` / ``second`` are not a complete, disjoint partition of 1..n (None: they
    are). Rejects duplicates, overlaps, out-of-range numbers and omissions."""
    problems = []
    for name, seq in zip(names, (first, second), strict=True):
        dup = sorted({x for x in seq if list(seq).count(x) > 1})
        if dup:
            problems.append(f"{dup} repeated in {name}")
    both = sorted(set(first) & set(second))
    if both:
        problems.append(f"{both} in both {names[0]} and {names[1]}")
    out = sorted({x for x in (*first, *second) if not 1 <= x <= n})
    if out:
        problems.append(f"{out} out of range 1..{n}")
    missing = sorted(set(range(1, n + 1)) - set(first) - set(second))
    if missing:
        problems.append(f"{missing} missing (every number 1..{n} must be in one list)")
    return "; ".join(problems) or None


def partition_schema(n: int) -> str:
    """``Partition``'s JSON Schema with every list bounded to the numbers 1..n (an enum) and
    to n items, for guided decoding: a small model can no longer loop on a list
    (``[1, 2, 3, ..., 20, ...`` for one claim was seen with SmolLM2-135M); overlaps and
    omissions are still possible and ``check_partition`` still rejects them."""
    schema = Partition.model_json_schema()
    for name in ("supported", "unsupported"):
        prop = schema["properties"][name]
        prop["items"] = {**prop["items"], "enum": list(range(1, n + 1))}
        prop["maxItems"] = n
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


#: judges whose partition calls use ``partition_schema`` say so in their cache key
BOUNDED_PARTITION = {"partition_schema": "bounded-1..n"}


def check_partition(n: int) -> Callable[[Partition], None]:
    """A validator for a ``Partition`` over 1..n, for ``Task.validate``."""

    def validate(obj: Partition) -> None:
        err = partition_errors(n, obj.supported, obj.unsupported)
        if err:
            raise ValueError(err)

    return validate


def render_context(context: Context | None) -> str:
    if context is None or not context.passages:
        return "(no passages)"
    return "\n\n".join(f"{tag(p.doc_id)} {p.text}" for p in context.passages)


def numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(items, start=1))


def detail(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


class LLMJudge:
    """Options shared by the LLM judges (keyword-only; the config schema of each judge).

    ``generator``: the judge model's backend (supplied by the pipeline at build time);
    ``max_retries``: re-asks after a rejected output (0 = one attempt); ``max_tokens``,
    ``temperature``, ``seed``: judge sampling; ``feedback``: send the rejection reason back on
    retry.
    """

    name = "llm"
    metrics: tuple[str, ...] = ()
    #: the prompts of the judge (part of its cache key)
    prompts: tuple[str, ...] = ()

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 512,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True) -> None:
        if max_retries < 0:
            raise OptionError("max_retries", f"must be >= 0, got {max_retries}")
        if max_tokens < 1:
            raise OptionError("max_tokens", f"must be >= 1, got {max_tokens}")
        if temperature < 0:
            raise OptionError("temperature", f"must be >= 0, got {temperature}")
        self.generator = generator
        # the rubric must define every metric this judge emits (exit 2 before any work)
        self.rubric = rubric(self.name)
        self.rubric.check(self.metrics, ())
        self.max_retries = max_retries
        self.sampling = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed)
        self.feedback = feedback

    def caller(self, model: type[M]) -> StructuredCaller[M]:
        return StructuredCaller(self.generator, model, max_retries=self.max_retries,
                                sampling=self.sampling, feedback=self.feedback)

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return ()

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        raise NotImplementedError  # each judge module implements it

    def cache_params(self) -> dict[str, object]:
        return {
            "judge": self.name,
            "generator": self.generator.cache_params(),
            "max_retries": self.max_retries,
            "sampling": [self.sampling.max_tokens, self.sampling.temperature, self.sampling.seed],
            "feedback": self.feedback,
            "prompts": list(self.prompts),
            "schemas": [schema_text(m) for m in self.schemas()],
            # prompts, score definitions and examples (conf/judge/rubrics/<name>.yaml)
            "rubric": self.rubric.digest,
        }

