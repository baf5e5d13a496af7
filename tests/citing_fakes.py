"""A generator test double that cites, named by ``_target_: citing_fakes.CitingGenerator``
(a module of its own, like ``rewrite_fakes``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from bench.generation.base import Generation, GenerationRequest

_TAG = re.compile(r"\[doc:([^\]\s]+)\]\s*")
_PAIR = re.compile(r"^\d+\. Sentence:", re.MULTILINE)


class CitingGenerator:
    """Answers with the first passage's first ``words`` words and its ``[doc:ID]`` tag (one
    cited sentence); a citation judge request (JSON schema with ``supported``) gets every
    numbered pair supported. Deterministic."""

    def __init__(self, *, words: int = 8) -> None:
        self.words = words

    def cache_params(self) -> dict[str, object]:
        return {"backend": "citing-fake", "model": "citing-1", "words": self.words}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _text(self, r: GenerationRequest) -> str:
        user = r.messages[-1].content
        if r.json_schema is not None:
            n = len(_PAIR.findall(user))
            return json.dumps({"supported": list(range(1, n + 1)), "unsupported": []})
        context = user.split("Context:\n", 1)[-1]
        m = _TAG.match(context)
        if m is None:
            return "I don't know"
        first = context[m.end():].split("\n\n[doc:", 1)[0]
        return " ".join(first.split()[: self.words]) + f" [doc:{m.group(1)}]."

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = self._text(r)
            out.append(Generation(r.request_id, text, "ok", "stop", 10, len(text.split()), 1.0,
                                  0.5, 2.0))
        return out

    def close(self) -> None:
        pass
