"""A generate node's answers on disk: one Parquet row per ``Generation`` (explicit schema).

Read and written by the generate stage (``bench.generation.stage``) and by the prompt memo
(``bench.generation.memo``), which is below the stage and must not import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.generation.base import Generation

_GEN_SCHEMA = pa.schema([
    pa.field("request_id", pa.string()), pa.field("text", pa.string()),
    pa.field("status", pa.string()), pa.field("finish_reason", pa.string()),
    pa.field("prompt_tokens", pa.int64()), pa.field("output_tokens", pa.int64()),
    pa.field("ttft_ms", pa.float64()), pa.field("tpot_ms", pa.float64()),
    pa.field("e2e_ms", pa.float64()), pa.field("itl_ms", pa.list_(pa.float64())),
    pa.field("error", pa.string()), pa.field("attempts", pa.int64()),
])


def save_generations(gens: Sequence[Generation], path: Path) -> None:
    cols = {f.name: [getattr(g, f.name) for g in gens] for f in _GEN_SCHEMA}
    cols["itl_ms"] = [list(g.itl_ms) for g in gens]
    pq.write_table(pa.table(cols, schema=_GEN_SCHEMA), path)


def load_generations(path: Path) -> list[Generation]:
    rows = pq.read_table(path).cast(_GEN_SCHEMA).to_pylist()
    return [Generation(**{**r, "itl_ms": tuple(r["itl_ms"] or ())}) for r in rows]
