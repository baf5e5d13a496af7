"""Records and Protocol of the `generation` stage.

Generation is measured apart from retrieval: it only ever sees the context the pipeline
supplied, recorded with the answer so judges can check faithfulness against it.
``conf/generator/none.yaml`` (``_target_: null``) gives a retrieval-only benchmark. Judges use
the same Protocol: a request may carry a JSON schema that constrains the output (guided
decoding: vLLM structured outputs, xgrammar on CPU).

Adding a backend: implement ``Generator`` (batch-first) in a module that imports its engine
lazily (vllm only inside its module), add ``conf/generator/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class GenerationRequest:
    """One request. ``json_schema``: JSON Schema text the output must satisfy (guided
    decoding), or None for free text."""

    request_id: str
    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    json_schema: str | None = None


@dataclass(frozen=True)
class Generation:
    """One answer with its latency profile. ``status``: ok | timeout | error;
    ``finish_reason``: stop | length | error | timeout. Times in ms; ``itl_ms`` are the gaps
    between consecutive output tokens (streamed backends), ``tpot_ms`` the mean time per
    output token after the first."""

    request_id: str
    text: str
    status: str
    finish_reason: str
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float
    itl_ms: tuple[float, ...] = ()
    error: str | None = None
    #: HTTP attempts made (retries + 1); latency fields describe the last attempt only
    attempts: int = 1


class Generator(Protocol):
    def cache_params(self) -> dict[str, object]:
        """What changes answers: backend, model identity, dtype, server-side options."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the generator's own tokenizer (context budgets)."""
        ...

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """One ``Generation`` per request, same order; failures are records, not exceptions."""
        ...

    def close(self) -> None:
        """Release the engine (stop a managed server, free GPU memory). Idempotent."""
        ...


@runtime_checkable
class StreamingGenerator(Generator, Protocol):
    """Optional capability: one request's answer handed over piece by piece as it is decoded
    (``bench.serve`` streams it to its client as server-sent events)."""

    def stream(self, request: GenerationRequest, on_text: Callable[[str], None]) -> Generation:
        """Generate ``request``'s answer, calling ``on_text`` with each new piece of text as
        it is decoded (the pieces join to ``Generation.text``); the record as ``generate``."""
        ...


def generator_name(generator: Generator) -> str:
    """Short model name for labels (``smollm2-135m-instruct``)."""
    params = generator.cache_params()
    model = str(params.get("model") or params.get("backend") or type(generator).__name__)
    name = model.rstrip("/").rsplit("/", 1)[-1].lower()
    for suffix in (".gguf",):
        name = name.removesuffix(suffix)
    return name.split(".", 1)[0]
