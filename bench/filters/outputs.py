"""The filters stage's outputs: what a config's filter removed and its false exclusions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.pipeline.outputs import Column, Outputs, RowInput


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    """The seed's rates (over the eligible corpus), then the pool-relative ones; None where
    no eligible gold makes a rate undefined (never 0)."""
    from bench.errors import BenchError

    outcome = row.run.filter_outcome
    rates: tuple[float | None, ...] = (None, None, None, None)
    if outcome is not None:
        try:
            r, p = outcome.exclusion_rates(), outcome.pool_exclusion_rates()
            rates = (r.query_rate, r.doc_rate, p.query_rate, p.doc_rate)
        except BenchError:
            pass
    return {"filter_removed": None if outcome is None else outcome.removed,
            "false_exclusion_rate": rates[0], "doc_false_exclusion_rate": rates[1],
            "pool_false_exclusion_rate": rates[2], "pool_doc_false_exclusion_rate": rates[3]}


OUTPUTS = Outputs(
    columns=(Column("filter_removed", "int64"), Column("false_exclusion_rate", "float64"),
             Column("doc_false_exclusion_rate", "float64"),
             Column("pool_false_exclusion_rate", "float64"),
             Column("pool_doc_false_exclusion_rate", "float64")),
    fill="bench.filters.outputs:fill")
