"""Tamper with every artifact kind the pipeline writes; the next run detects, quarantines and
rebuilds it, and reports exactly the numbers of the undamaged run (synthetic corpus, CPU)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.cache.events import read_events

# stage folder -> file of each kind the pipeline writes
TARGETS = {
    "chunk": "chunks.parquet",
    "embed_docs": "vectors.npy",
    "index": "index.faiss",
    "chunk_stats": "chunk_stats.json",
}


def truncate(p: Path) -> None:
    os.truncate(p, p.stat().st_size // 2)


def zero(p: Path) -> None:
    p.write_bytes(bytes(p.stat().st_size))


def alter_one_byte(p: Path) -> None:
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 0x10  # mid-file: data pages, vector values, index payload
    p.write_bytes(bytes(raw))


def _rows(run_dir: Path) -> list[tuple[str, str, str, float, str]]:
    rows = pq.read_table(run_dir / "per_query.parquet").to_pylist()
    return sorted((r["config_id"], r["query_id"], r["metric"], r["value"], r["status"])
                  for r in rows)


@pytest.mark.slow
def test_tampered_artifacts_heal_with_identical_numbers(
        compose_cfg: Callable[[list[str]], object], tmp_path: Path) -> None:
    from bench.pipeline.run import run

    cache = tmp_path / "cache"
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={cache}",
                       "metrics.bootstrap_resamples=200"])
    base = run(cfg, tmp_path / "base")  # type: ignore[arg-type]
    expected = _rows(base.run_dir)
    assert expected
    print("\n| damage | artifact | detected (reason) | rebuilt | rows identical |")
    for i, damage in enumerate((truncate, zero, alter_one_byte)):
        for stage, name in TARGETS.items():
            [path] = list((cache / stage).glob(f"*/*/{name}"))
            damage(path)
        n_before = len(read_events(cache))
        res = run(cfg, tmp_path / f"r{i}")  # type: ignore[arg-type]
        new = read_events(cache)[n_before:]
        quarantined = {e["stage"]: e["reason"] for e in new if e["event"] == "quarantine"}
        rebuilt = {e["stage"] for e in new if e["event"] == "miss"}
        same = _rows(res.run_dir) == expected
        for stage, name in TARGETS.items():
            print(f"| {damage.__name__} | {stage}/{name} | {quarantined.get(stage, 'NO')} | "
                  f"{stage in rebuilt} | {same} |")
        assert set(quarantined) == set(TARGETS), quarantined
        assert all(name in quarantined[s] for s, name in TARGETS.items())
        assert rebuilt == set(TARGETS)  # downstream keys unchanged: everything else hits
        assert same
        assert res.exit_code == 0
    assert len(list((cache / "_quarantine").glob("*/*"))) == 3 * len(TARGETS)
