"""The retrieval stage's outputs: first-stage search figures of a config's chain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.pipeline.outputs import Column, Outputs, RowInput, percentiles


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    """QPS in batch mode and p50/p95/p99 in single-query mode of the config's first-stage
    search (a dense or lexical search; none for a fused config: two searches, no one's)."""
    c = row.run
    fused = c.node("fusion") is not None
    search = None if fused else (c.node("retrieve") or c.node("lexical"))
    first = [] if search is None else list(search.timings)
    batch = [t for t in first if t.sample_kind == "batch"]
    single = [t.wall_ms for t in first if t.sample_kind == "query"]
    qps = None
    total_ms = sum(t.wall_ms for t in batch)
    if batch and total_ms > 0:
        qps = sum(t.n_items for t in batch) / (total_ms / 1000.0)
    p50, p95, p99 = percentiles(single)
    return {"qps": qps, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99,
            "n_latency_samples": len(single)}


OUTPUTS = Outputs(
    columns=(Column("qps", "float64"), Column("p50_ms", "float64"),
             Column("p95_ms", "float64"), Column("p99_ms", "float64"),
             Column("n_latency_samples", "int64", nullable=False)),
    fill="bench.retrieval.outputs:fill")
