"""Plan operation of the `filters` stage: one filter mode applied to one pool."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bench.data.base import Dataset
from bench.filters.base import FilterOutcome, ResultFilter
from bench.pipeline.lanes import PlanState, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.retrieval.base import Pool, order_key
from bench.telemetry.base import TimingLog

FILTERS_STAGE = "filters"


@dataclass(frozen=True)
class FilteredPool(Pool):
    """A pool after a filter, with what the filter did (removals, exclusions, leaks)."""

    outcome: FilterOutcome | None = None


@dataclass(frozen=True)
class FilterInputs:
    pool: Pool
    data: Dataset


@dataclass(frozen=True)
class FilterOp(OpTraits):
    """(Pool, Dataset) -> FilteredPool. ``mode`` names a member of a hard-vs-soft pair
    ("hard" / "soft"), "" for a single filter."""

    flt: ResultFilter
    mode: str
    relevance_level: int
    stage: str = FILTERS_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = FilterInputs
    latency_stages: ClassVar[tuple[str, ...]] = (FILTERS_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (FILTERS_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {"filter": self.flt.cache_params(), "kind": type(self.flt).__name__,
                "mode": self.mode, "relevance_level": self.relevance_level}

    def _apply(self, inputs: FilterInputs, id_key: np.ndarray) -> FilteredPool:
        outcome = self.flt.apply(inputs.pool.hits, inputs.data, id_key=id_key,
                                 relevance_level=self.relevance_level)
        return FilteredPool(outcome.hits, inputs.pool.chunk_result, outcome,
                            **inputs.pool.statuses())

    def run(self, inputs: FilterInputs, timing: TimingLog) -> FilteredPool:
        with timing.measure("total", inputs.pool.hits.n_queries):
            return self._apply(inputs, order_key(inputs.data.doc_ids))

    def run_one(self, inputs: FilterInputs, query: OneQuery, timer: QueryTimer
                ) -> FilteredPool:
        with timer.measure(FILTERS_STAGE):
            return self._apply(inputs, query.id_key)


def expand(s: PlanState) -> PlanState:
    """Each config so far, once per filter mode (one filter: the same label; a hard-vs-soft
    pair: ``LABEL|hard`` and ``LABEL|soft``, paired for the pre-registered decision). With
    ``pushdown`` a dense lane over a database index searches with the filter inside the engine
    (``bench.filters.pushdown``; label ``...(where)``) and the filter then runs on that pool."""
    from bench.filters.base import PushableFilter
    from bench.filters.hard_vs_soft import HardVsSoft
    from bench.filters.pushdown import pushed_down

    f = s.comps.filters
    if f is None:
        return s
    members = f.members() if isinstance(f, HardVsSoft) else [("", f)]
    out = []
    shared: dict[str, Node] = {}
    for c in s.configs:
        for name, flt in members:
            label = f"{c.label}|{name}" if name else c.label
            pool, params = c.leaf, dict(c.params)
            if isinstance(flt, PushableFilter) and flt.pushdown:
                # a dense lane over a database index: the engine filters (its WHERE)
                where = pushed_down(s, flt, c.leaf, shared)
                if where is not None:
                    pool, label, params = where, f"{label}(where)", {**params,
                                                                     "pushdown": True}
            node = Node.of(FilterOp(flt, name, s.relevance_level), label, pool=pool,
                           data=s.node("data"))
            out.append(lane(label, c.kind, node, params,
                            filter_pair=(c.label, name) if name else None,
                            reference=c.reference))
    return s.with_configs(out)
