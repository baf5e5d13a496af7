"""A rules router: the first rule whose conditions a query's text meets names its route.

A rule is ``{route: NAME, pattern: REGEX, min_words: N, max_words: N}`` (every condition
optional; ``pattern`` is searched case-insensitively); ``default`` is the route of a query
no rule matches. The shipped rules (conf/router/rules.yaml) send a question naming a
relation between several things ("and its connection to", "how are they related", lists)
to the iterative route and everything else to one search: text alone cannot tell an
unanswerable question from an answerable one, so these rules never choose ``none`` — the
classification table shows that class's recall at 0, which is what rules cost.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.config.build import OptionError
from bench.route.common import check_route, check_routes


@dataclass(frozen=True)
class Rule:
    route: str
    pattern: re.Pattern[str] | None
    min_words: int | None
    max_words: int | None

    def matches(self, text: str) -> bool:
        n = len(text.split())
        return ((self.pattern is None or self.pattern.search(text) is not None)
                and (self.min_words is None or n >= self.min_words)
                and (self.max_words is None or n <= self.max_words))


class RulesRouter:
    name = "rules"

    def __init__(self, *, routes: Mapping[str, str], rules: Sequence[Mapping[str, object]],
                 default: str, slo_p95_ms: Mapping[str, float | None] | None = None) -> None:
        self.routes, self.slo_p95_ms = check_routes(routes, slo_p95_ms)
        self.default = check_route(default, self.routes, "default")
        self.rules: list[Rule] = []
        self._raw = [dict(r) for r in rules]
        for i, r in enumerate(rules):
            extra = sorted(set(r) - {"route", "pattern", "min_words", "max_words"})
            if extra:
                raise OptionError(f"rules[{i}].{extra[0]}", "unknown rule field; a rule has "
                                  "route, pattern, min_words, max_words")
            if "route" not in r:
                raise OptionError(f"rules[{i}].route", "every rule names its route")
            route = check_route(str(r["route"]), self.routes, f"rules[{i}].route")
            pattern = None
            if r.get("pattern") is not None:
                try:
                    pattern = re.compile(str(r["pattern"]), re.I)
                except re.error as exc:
                    raise OptionError(f"rules[{i}].pattern", f"not a regular expression: "
                                                             f"{exc}") from None
            bounds = []
            for k in ("min_words", "max_words"):
                v = r.get(k)
                if v is not None and (not isinstance(v, int) or v < 0):
                    raise OptionError(f"rules[{i}].{k}", f"must be an integer >= 0, got {v!r}")
                bounds.append(v)
            self.rules.append(Rule(route, pattern, bounds[0], bounds[1]))

    def cache_params(self) -> dict[str, object]:
        return {"routes": dict(self.routes), "rules": self._raw, "default": self.default}

    def route_names(self) -> tuple[str, ...]:
        return tuple(self.routes)

    def choose(self, text: str) -> str:
        return next((r.route for r in self.rules if r.matches(text)), self.default)
