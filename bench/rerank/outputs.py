"""The rerank stage's outputs: the reranker's per-query latency at a config's depth and its
throughput in pairs/s; its latency stages are rerank work in the cost model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.pipeline.outputs import Column, Outputs, RowInput, percentiles


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    c = row.run
    rr = c.node("rerank")
    rerank_ms = [] if rr is None else [t.wall_ms for t in rr.timings if t.sample_kind == "query"]
    r50, r95, r99 = percentiles(rerank_ms)
    scored = c.node("rerank_scores")
    pairs_per_s = None
    if scored is not None:
        ms = sum(t.wall_ms for t in scored.timings)
        pairs_per_s = sum(t.n_items for t in scored.timings) / (ms / 1000.0) if ms > 0 else None
    return {"rerank_p50_ms": r50, "rerank_p95_ms": r95, "rerank_p99_ms": r99,
            "rerank_pairs_per_s": pairs_per_s}


OUTPUTS = Outputs(
    columns=(Column("rerank_p50_ms", "float64"), Column("rerank_p95_ms", "float64"),
             Column("rerank_p99_ms", "float64"), Column("rerank_pairs_per_s", "float64")),
    fill="bench.rerank.outputs:fill",
    # bench.rerank.stage.RERANK_STAGE / RERANK_CUT_STAGE (tests/results check they agree)
    cost=(("rerank", "rerank"), ("rerank_cut", "rerank")))
