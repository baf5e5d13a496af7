"""Several rewriters in one run, and the gain each must show to be adopted (pre-registered).

``conf/rewriter/query_rewrite.yaml`` lists its members under ``rewriters`` (name -> an
option block with ``_target_``, built like a single rewriter option) and fixes, before the
run, the decision rule: ``min_gain`` (``metric``, ``scope``, ``delta``) — a rewriter is
ADOPTED at a slice when the lower bound of the paired CI of its gain over the raw query on
the same lane is >= ``delta``, REJECTED when the upper bound is < ``delta``, INCONCLUSIVE
otherwise (``bench.rewrite.decide``); its overall verdict is the one at ``scope``. Slices:
``all``, each category, ``low_confidence`` (queries whose first-stage top-1 score is in the
lowest ``low_confidence_quantile`` of the lane's), and ``in_domain`` / ``out_of_domain``
(categories listed in ``in_domain``, or a JSONL mapping ``{"query_id", "domain": "in"|"out"}``
in ``domain_map``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.config.build import OptionError

#: the slices a decision may be scoped to besides ``category:<name>``
SLICES = ("all", "low_confidence", "high_confidence", "in_domain", "out_of_domain")


@dataclass(frozen=True)
class MinGain:
    metric: str
    scope: str
    delta: float


def check_min_gain(value: Mapping[str, Any] | None) -> MinGain | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise OptionError("min_gain", f"must be a mapping (metric, scope, delta), got {value!r}")
    unknown = sorted(set(value) - {"metric", "scope", "delta"})
    if unknown:
        raise OptionError(f"min_gain.{unknown[0]}", "unknown key; allowed: delta, metric, scope")
    metric = value.get("metric")
    if not isinstance(metric, str) or not metric:
        raise OptionError("min_gain.metric", f"must name a metric, got {metric!r}")
    scope = value.get("scope", "all")
    if not isinstance(scope, str) or not (scope in SLICES or (scope.startswith("category:")
                                                              and len(scope) > 9)):
        raise OptionError("min_gain.scope", f"must be one of {', '.join(SLICES)} or "
                                            f"category:<name>, got {scope!r}")
    delta = value.get("delta")
    if isinstance(delta, bool) or not isinstance(delta, int | float):
        raise OptionError("min_gain.delta", f"must be a number, got {delta!r}")
    return MinGain(metric, scope, float(delta))


class RewriterSuite:
    """The members are built by ``bench.rewrite.stage.build`` (each like a single option);
    this holds them and the decision settings."""

    name = "suite"

    def __init__(self, *, members: Mapping[str, Any], min_gain: Mapping[str, Any] | None = None,
                 low_confidence_quantile: float = 0.25,
                 in_domain: Sequence[str] | None = None,
                 domain_map: str | None = None) -> None:
        if not members:
            raise OptionError("rewriters", "lists no rewriter")
        if not 0.0 < low_confidence_quantile < 1.0:
            raise OptionError("low_confidence_quantile",
                              f"must be in (0, 1), got {low_confidence_quantile}")
        if in_domain is not None and domain_map is not None:
            raise OptionError("domain_map", "give in_domain (categories) or domain_map, "
                                            "not both")
        if domain_map is not None and not Path(domain_map).expanduser().is_file():
            raise OptionError("domain_map", f"no such file: {domain_map}")
        self.members = dict(members)
        self.min_gain = check_min_gain(min_gain)
        self.low_confidence_quantile = float(low_confidence_quantile)
        self.in_domain = None if in_domain is None else tuple(in_domain)
        self.domain_map = domain_map
