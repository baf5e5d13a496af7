"""A generator test double for router=llm, named by ``_target_: route_fakes.RouteGenerator``
(a module of its own, like ``rewrite_fakes``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from bench.generation.base import Generation, GenerationRequest


class RouteGenerator:
    """Names ``iterative`` for a question holding " and ", ``none`` for one holding "zzz",
    else ``one_shot``; a question holding "garble" gets non-JSON. Records every prompt."""

    prompts: ClassVar[list[str]] = []

    def cache_params(self) -> dict[str, object]:
        return {"backend": "route-fake", "model": "route-1"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            user = r.messages[-1].content
            type(self).prompts.append(user)
            q = user.split("Question:", 1)[-1].split("\n", 1)[0]
            route = "iterative" if " and " in q else "none" if "zzz" in q else "one_shot"
            text = "garbled" if "garble" in q else json.dumps({"route": route})
            out.append(Generation(r.request_id, text, "ok", "stop", 10, 3, 1.0, 0.5, 2.0))
        return out

    def close(self) -> None:
        pass
