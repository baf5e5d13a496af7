"""Plan operation of the `filters` stage: one filter mode applied to one pool."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.filters.base import FilterOutcome, ResultFilter
from bench.retrieval.base import Pool, order_key
from bench.telemetry.base import TimingLog


@dataclass(frozen=True)
class FilteredPool(Pool):
    """A pool after a filter, with what the filter did (removals, exclusions, leaks)."""

    outcome: FilterOutcome | None = None


@dataclass(frozen=True)
class FilterOp:
    """(Pool, Dataset) -> FilteredPool. ``mode`` names a member of a hard-vs-soft pair
    ("hard" / "soft"), "" for a single filter."""

    flt: ResultFilter
    mode: str
    relevance_level: int
    stage: str = "filters"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {"filter": self.flt.cache_params(), "kind": type(self.flt).__name__,
                "mode": self.mode, "relevance_level": self.relevance_level}

    def run(self, inputs: Sequence[Any], timing: TimingLog) -> FilteredPool:
        pool, dataset = inputs
        with timing.measure("total", pool.hits.n_queries):
            outcome = self.flt.apply(pool.hits, dataset, id_key=order_key(dataset.doc_ids),
                                     relevance_level=self.relevance_level)
        return FilteredPool(outcome.hits, pool.chunk_result, outcome)
