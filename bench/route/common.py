"""Options every router shares: the route -> target map and the per-route SLOs."""

from __future__ import annotations

import math
from collections.abc import Mapping

from bench.config.build import OptionError


def check_routes(routes: Mapping[str, str], slo_p95_ms: Mapping[str, float | None] | None
                 ) -> tuple[dict[str, str], dict[str, float]]:
    """The route -> target map and the routes' SLOs (a null SLO: none for that route)."""
    if not routes:
        raise OptionError("routes", "name at least one route: {route name: target}")
    out = {}
    for name, target in routes.items():
        if not isinstance(target, str) or not target.strip():
            raise OptionError(f"routes.{name}", "the target must be none, one_shot, "
                                                "iterative or a config label")
        out[str(name)] = target
    slo = {}
    for name, ms in (slo_p95_ms or {}).items():
        if name not in out:
            raise OptionError(f"slo_p95_ms.{name}", f"unknown route {name!r}; routes: "
                                                    f"{', '.join(out)}")
        if ms is None:
            continue
        if not ms > 0 or not math.isfinite(ms):
            raise OptionError(f"slo_p95_ms.{name}", f"must be > 0, got {ms}")
        slo[str(name)] = float(ms)
    return out, slo


def check_route(route: str, routes: Mapping[str, str], key: str) -> str:
    if route not in routes:
        raise OptionError(key, f"unknown route {route!r}; routes: {', '.join(routes)}")
    return route
