"""Test doubles the Hydra configs of tests name by ``_target_`` (a module of its own: a
``conftest`` module name is ambiguous once several test folders have one)."""

from __future__ import annotations

from typing import ClassVar


class RewriteGenerator:
    """Deterministic test double of the Generator protocol for query rewrites (referenced by
    ``_target_: rewrite_fakes.RewriteGenerator``): the answer repeats the prompt's last line's
    query words, plus ``variant <seed>`` for seeds > 0; ``fail_every`` > 0 fails every
    request whose seed is a multiple of it (status error). Records every request id."""

    calls: ClassVar[list[str]] = []

    def __init__(self, *, fail_every: int = 0) -> None:
        self.fail_every = fail_every

    def cache_params(self) -> dict[str, object]:
        return {"backend": "rewrite-fake", "model": "fake-1", "fail_every": self.fail_every}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests):  # type: ignore[no-untyped-def]
        from bench.generation.base import Generation

        out = []
        for r in requests:
            type(self).calls.append(r.request_id)
            seed = r.sampling.seed
            if self.fail_every and seed % self.fail_every == 0:
                out.append(Generation(r.request_id, "", "error", "error", 0, 0, None, None,
                                      1.0, error="scripted failure"))
                continue
            user = r.messages[-1].content
            query = next((ln.split(":", 1)[1] for ln in user.splitlines()
                          if ln.startswith(("Query:", "Question:"))), user).strip()
            text = query + (f" variant {seed}" if seed else "")
            out.append(Generation(r.request_id, text, "ok", "stop", len(user.split()),
                                  len(text.split()), 1.0, 0.5, 2.0))
        return out

    def close(self) -> None:
        pass
