"""Test helper: the summary.parquet of hand-written per-query rows, as a finished run has one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_summary(d: Path, rows: list[dict[str, object]]) -> None:
    """summary.parquet of per-query rows (scope all: the mean)."""
    by: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        by.setdefault((str(r["config_id"]), str(r["metric"])), []).append(float(r["value"]))  # type: ignore[arg-type]
    pq.write_table(pa.Table.from_pylist([
        {"config_id": c, "scope": "all", "metric": m, "higher_is_better": True, "n": len(v),
         "mean": sum(v) / len(v), "ci_low": None, "ci_high": None}
        for (c, m), v in by.items()]), d / "summary.parquet")
