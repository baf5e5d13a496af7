"""Records and Protocol of the `generation` stage.

Generation is measured apart from retrieval: it only ever sees the context the pipeline
supplied, recorded with the answer so judges can check faithfulness against it.
``conf/generator/none.yaml`` (``_target_: null``) gives a retrieval-only benchmark.

Adding a backend: implement ``Generator`` (batch-first) in a module that imports its engine
lazily (vllm only inside its module), add ``conf/generator/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class GenerationRequest:
    query_id: str
    prompt: str
    context_chunk_ids: tuple[int, ...]
    max_tokens: int


@dataclass(frozen=True)
class Generation:
    """One answer with its latency profile (ms); ``status``: ok | timeout | error."""

    query_id: str
    text: str
    status: str
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float
    prompt_tokens: int
    output_tokens: int


class Generator(Protocol):
    def cache_params(self) -> dict[str, object]: ...

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """One ``Generation`` per request, same order; failures are records, not exceptions."""
        ...
