"""Schema-guided calls: Pydantic model -> JSON Schema text -> guided decoding -> parse.

One ``StructuredCaller`` asks a batch of questions whose answers must satisfy one Pydantic
model (and optionally a semantic validator), retrying only the rejected ones — each retry
carries the rejected output and the reason back to the model — up to ``max_retries`` times.
Parsing is strict: the raw output must be one JSON object of the schema; the only leniency is
unwrapping a Markdown code fence (servers without guided decoding add one). The first
attempt's validity is recorded so the schema-validity rate can be reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bench.generation.base import (
    ChatMessage,
    GenerationRequest,
    Generator,
    SamplingParams,
)
from bench.judge.base import OK, JudgeCall
from bench.metrics.base import ERROR, INVALID

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_MAX_ECHO_CHARS = 2000  # a rejected output echoed back in a retry prompt is cut to this


class JudgeSchema(BaseModel):
    """Base of every judge output model: unknown keys are rejected, and the schema says so
    (``additionalProperties: false``), which guided decoders and strict servers need."""

    model_config = ConfigDict(extra="forbid")


def schema_text(model: type[BaseModel]) -> str:
    """The model's JSON Schema as compact, key-sorted text (stable: it keys judge caches)."""
    return json.dumps(model.model_json_schema(), sort_keys=True, separators=(",", ":"))


def parse(model: type[M], raw: str) -> M:
    """Parse ``raw`` as ``model``; raises ``ValidationError`` / ``ValueError``."""
    fenced = _FENCE.match(raw)
    return model.model_validate_json(fenced.group(1) if fenced else raw.strip())


@dataclass(frozen=True)
class Task(Generic[M]):
    """One question: ``key`` is unique in the batch; ``validate`` raises ``ValueError`` with a
    reason the model can act on (sent back on retry)."""

    key: str
    messages: tuple[ChatMessage, ...]
    validate: Callable[[M], None] | None = None
    #: a tighter JSON Schema (text) for this task's guided decoding, e.g. claim numbers
    #: bounded to 1..n; the output is still parsed as the caller's model and validated.
    #: None: the model's own schema.
    schema: str | None = None


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()[:3]
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'output'}: {e['msg']}" for e in errs)
    return " ".join(str(exc).split())


class StructuredCaller(Generic[M]):
    """Asks ``Task`` s of one schema through a ``Generator`` with bounded retries."""

    def __init__(self, generator: Generator, model: type[M], *, max_retries: int,
                 sampling: SamplingParams, feedback: bool = True) -> None:
        self.generator = generator
        self.model = model
        self.schema = schema_text(model)
        self.max_retries = max_retries
        self.sampling = sampling
        self.feedback = feedback

    def _retry_messages(self, task: Task[M], raw: str, reason: str) -> tuple[ChatMessage, ...]:
        if not self.feedback:
            return task.messages
        return (*task.messages, ChatMessage("assistant", raw[:_MAX_ECHO_CHARS]),
                ChatMessage("user", f"That output was rejected: {reason}. Reply again with only "
                                    "a JSON object that follows the schema."))

    def run(self, tasks: Sequence[Task[M]], step: str) -> list[tuple[M | None, JudgeCall]]:
        """One (parsed or None, call record) per task, same order."""
        raws: list[list[str]] = [[] for _ in tasks]
        errors: list[list[str]] = [[] for _ in tasks]
        parsed: list[M | None] = [None] * len(tasks)
        last_gen_error = [False] * len(tasks)
        messages = [t.messages for t in tasks]
        pending = list(range(len(tasks)))
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            # a new seed per attempt: a sampled judge should not repeat a rejected output
            sampling = replace(self.sampling, seed=self.sampling.seed + attempt)
            requests = [
                GenerationRequest(f"{tasks[i].key}/{step}/{attempt}", messages[i], sampling,
                                  tasks[i].schema or self.schema)
                for i in pending
            ]
            outputs = self.generator.generate(requests)
            if len(outputs) != len(requests):
                raise RuntimeError(f"generator returned {len(outputs)} of {len(requests)}")
            still = []
            for i, gen in zip(pending, outputs, strict=True):
                if gen.status != "ok":
                    raws[i].append(gen.text)
                    errors[i].append(f"generation {gen.status}: {gen.error or gen.finish_reason}")
                    last_gen_error[i] = True
                    still.append(i)
                    continue
                raws[i].append(gen.text)
                last_gen_error[i] = False
                try:
                    obj = parse(self.model, gen.text)
                    validate = tasks[i].validate
                    if validate is not None:
                        validate(obj)
                except (ValidationError, ValueError) as exc:
                    reason = _reason(exc)
                    errors[i].append(reason)
                    messages[i] = self._retry_messages(tasks[i], gen.text, reason)
                    still.append(i)
                    continue
                errors[i].append("")
                parsed[i] = obj
            pending = still
        out = []
        for i in range(len(tasks)):
            status = OK if parsed[i] is not None else ERROR if last_gen_error[i] else INVALID
            out.append((parsed[i], JudgeCall(
                step=step, status=status, attempts=len(raws[i]),
                first_valid=bool(errors[i]) and errors[i][0] == "",
                raw=tuple(raws[i]), errors=tuple(errors[i]),
            )))
        return out
