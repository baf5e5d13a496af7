"""Test double for the judge tests: a scripted generator giving prescribed outputs per
request and logging every request."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.generation.base import Generation, GenerationRequest

Script = Callable[[GenerationRequest], str | Generation]


class ScriptedGenerator:
    """``script(request)`` gives the raw text (or a whole ``Generation``, e.g. a timeout) of
    each request; ``requests`` records every request in order."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[GenerationRequest] = []
        self.batches: list[int] = []

    def cache_params(self) -> dict[str, object]:
        return {"backend": "scripted"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.batches.append(len(requests))
        out = []
        for r in requests:
            self.requests.append(r)
            got = self.script(r)
            if isinstance(got, Generation):
                out.append(got)
            else:
                out.append(Generation(r.request_id, got, "ok", "stop", 1, len(got.split()),
                                      1.0, 1.0, 2.0))
        return out

    def close(self) -> None:
        pass


def queue(*outputs: str | Generation) -> Script:
    """A script answering requests with ``outputs`` in order."""
    it = iter(outputs)
    return lambda _r: next(it)
