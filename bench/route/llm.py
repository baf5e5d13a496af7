"""An LLM classifier router: a generator block (``router.generator``, any backend) reads the
query and names its route in JSON constrained by a schema (``{"route": one of the routes}``).

The prompt is a template with a ``{query}`` and a ``{routes}`` slot; ``{routes}`` becomes one
line per route, ``- NAME: DESCRIPTION`` (``descriptions``, route -> text; a route without
one shows its name only). Decoding is greedy (temperature 0, ``seed``), one request per
query, the same request in batch and per request, so a routed request's latency is that
call plus its route's chain (the ``route`` stage times it). A failed generation or an output
that is not a valid ``{"route": ...}`` object sends the query down ``default`` and is logged
(counted in ``failures``); the routing report scores the routes taken like any router's.

Labels are the derived route labels (``bench.route.labels``), so, like the embedding
router, ``routes`` must name none, one_shot and iterative; nothing is fitted, so no query is
held out for it.
"""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Mapping

from bench.config.build import OptionError
from bench.generation.base import ChatMessage, GenerationRequest, Generator, SamplingParams
from bench.route.common import check_route, check_routes

log = logging.getLogger("bench")

DEFAULT_PROMPT = (
    "Choose how to answer this question from a computing dictionary.\n"
    "Routes:\n{routes}\n\nQuestion: {query}\n"
    'Reply with JSON: {{"route": "<route name>"}}.'
)
DEFAULT_DESCRIPTIONS = {
    "none": "the dictionary cannot answer it (not about computing, or asks for something "
            "no entry holds); do not search",
    "one_shot": "it asks about one term: one search",
    "iterative": "it asks about several terms or how they relate: a search per term",
}


def _slots(template: str) -> set[str]:
    try:
        return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise OptionError("prompt", f"not a valid template ({exc})") from None


class LLMRouter:
    """``generator``: built from the ``router.generator`` block by the route stage's builder.
    ``prompt`` (slots ``{query}``, ``{routes}``), ``system``, ``descriptions``, ``default``
    (the route of a failed decision), ``max_tokens``, ``seed``."""

    name = "llm"

    def __init__(self, *, generator: Generator, routes: Mapping[str, str],
                 default: str = "one_shot", prompt: str = DEFAULT_PROMPT,
                 system: str | None = None,
                 descriptions: Mapping[str, str] | None = None, max_tokens: int = 16,
                 seed: int = 0, slo_p95_ms: Mapping[str, float | None] | None = None) -> None:
        from bench.route.labels import LABELS

        self.routes, self.slo_p95_ms = check_routes(routes, slo_p95_ms)
        missing = [c for c in LABELS if c not in self.routes]
        if missing:
            raise OptionError("routes", f"the router is scored against the labels "
                                        f"{', '.join(LABELS)}; routes lacks {missing}")
        self.default = check_route(default, self.routes, "default")
        slots = _slots(prompt)
        if not {"query", "routes"} <= slots or slots - {"query", "routes"}:
            raise OptionError("prompt", "the template must hold {query} and {routes} and no "
                                        f"other slot; it has {sorted(slots)}")
        desc = dict(DEFAULT_DESCRIPTIONS if descriptions is None else descriptions)
        unknown = sorted(set(desc) - set(self.routes))
        if descriptions is not None and unknown:
            raise OptionError(f"descriptions.{unknown[0]}", "not a route of routes")
        if max_tokens < 1:
            raise OptionError("max_tokens", f"must be >= 1, got {max_tokens}")
        self.generator = generator
        self.prompt = prompt
        self.system = system
        self.descriptions = {r: desc[r] for r in self.routes if r in desc}
        self.max_tokens = max_tokens
        self.seed = seed
        self.schema = json.dumps({
            "type": "object", "properties": {"route": {"type": "string",
                                                       "enum": list(self.routes)}},
            "required": ["route"], "additionalProperties": False})
        #: decisions that fell back to ``default`` (failed or invalid output)
        self.failures = 0

    def cache_params(self) -> dict[str, object]:
        return {"routes": dict(self.routes), "default": self.default, "prompt": self.prompt,
                "system": self.system, "descriptions": dict(self.descriptions),
                "max_tokens": self.max_tokens, "seed": self.seed,
                "generator": self.generator.cache_params()}

    def route_names(self) -> tuple[str, ...]:
        return tuple(self.routes)

    def request(self, text: str) -> GenerationRequest:
        listing = "\n".join(f"- {r}: {self.descriptions[r]}" if r in self.descriptions
                            else f"- {r}" for r in self.routes)
        user = self.prompt.format(query=text, routes=listing)
        msgs = ((ChatMessage("system", self.system),) if self.system else ()) + (
            ChatMessage("user", user),)
        return GenerationRequest("route:llm", msgs,
                                 SamplingParams(max_tokens=self.max_tokens, temperature=0.0,
                                                seed=self.seed), json_schema=self.schema)

    def parse(self, text: str) -> str | None:
        """The route an output names, or None when it names none of the routes."""
        try:
            value = json.loads(text)
        except ValueError:
            return None
        route = value.get("route") if isinstance(value, dict) else None
        return route if isinstance(route, str) and route in self.routes else None

    def choose(self, text: str) -> str:
        (gen,) = self.generator.generate([self.request(text)])
        route = self.parse(gen.text) if gen.status == "ok" else None
        if route is None:
            self.failures += 1
            log.warning("router llm: %s (%r): routed to %s", gen.status if gen.status != "ok"
                        else "no route in the output", gen.text[:80], self.default)
            return self.default
        return route
