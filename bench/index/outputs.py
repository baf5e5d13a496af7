"""The index stage's outputs: build time and size of the vector index a config searches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.pipeline.outputs import Column, Outputs, RowInput

#: config kinds whose chain searches the run's vector index (its build time and size apply)
INDEXED = ("dense", "reranked")


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    from bench.index.stage import IndexArtifact

    index = row.run.node("index")
    info = index.value.info if index is not None and isinstance(index.value, IndexArtifact) \
        else None
    if info is None or row.run.spec.kind not in INDEXED:
        return {"build_s": None, "index_bytes": None}
    return {"build_s": info.build_s, "index_bytes": info.index_bytes}


OUTPUTS = Outputs(columns=(Column("build_s", "float64"), Column("index_bytes", "int64")),
                  fill="bench.index.outputs:fill")
