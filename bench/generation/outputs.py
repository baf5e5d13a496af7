"""The generation stage's outputs: a generated config's TTFT / TPOT and abstention figures;
generation is its own cost component."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.pipeline.outputs import Column, Outputs, RowInput

_COLUMNS = ("ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms",
            "tpot_p99_ms", "abstention_precision", "abstention_recall", "abstention_coverage",
            "answered_accuracy", "abstention_hallucination_rate")


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    """From the config's ``GenerationSummary`` (None for a config without answers)."""
    g = row.done.generation.get(row.run.spec.config_id)
    if g is None:
        return {}
    return {"ttft_p50_ms": g.ttft_p50_ms, "ttft_p95_ms": g.ttft_p95_ms,
            "tpot_p50_ms": g.tpot_p50_ms, "tpot_p95_ms": g.tpot_p95_ms,
            "ttft_p99_ms": g.ttft_p99_ms, "tpot_p99_ms": g.tpot_p99_ms,
            "abstention_precision": g.abstention_precision,
            "abstention_recall": g.abstention_recall, "abstention_coverage": g.coverage,
            "answered_accuracy": g.answered_accuracy,
            "abstention_hallucination_rate": g.abstention_hallucination_rate}


OUTPUTS = Outputs(columns=tuple(Column(c, "float64") for c in _COLUMNS),
                  fill="bench.generation.outputs:fill",
                  # bench.cost.prices.GENERATE_STAGE (GenerateOp: one sample per answer)
                  cost=(("generate", "generation"),))
