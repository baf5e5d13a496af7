"""A corpus that does not fit the disk is refused before its vectors or its index are written
(``bench.cache.space``): one line naming ``cache_dir``, exit 2, nothing half written. The file
system's free space is scripted (``shutil.disk_usage`` below the run's cache folder)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.cache.space import MARGIN_BYTES, require_free
from bench.errors import ConfigError
from tests.cli import bench_in_process

REAL = shutil.disk_usage


def _scripted(monkeypatch: pytest.MonkeyPatch, under: Path, free: int) -> None:
    def usage(path: Any) -> Any:
        real = REAL(path)
        if Path(path).resolve().is_relative_to(under.resolve()):
            return type(real)(real.total, real.total - free, free)
        return real
    monkeypatch.setattr(shutil, "disk_usage", usage)


def test_require_free_names_the_key_the_need_and_the_free_space(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _scripted(monkeypatch, tmp_path, 100 * 2**20)
    require_free(tmp_path, 100 * 2**20 - MARGIN_BYTES, "fits exactly")
    with pytest.raises(ConfigError) as exc:
        require_free(tmp_path, 100 * 2**20 - MARGIN_BYTES + 1, "the vectors")
    assert exc.value.key == "cache_dir"
    assert "the vectors needs 36.0 MiB on disk" in str(exc.value)
    assert "has 100.0 MiB free" in str(exc.value)


@pytest.mark.parametrize(("spare_kib", "stage", "extra"), [
    (50, "embed_docs", []),  # 60 chunks x 384 float32 = 90 KiB of vectors do not fit in 50
    # 100 KiB hold the vectors; an HNSW32 graph over them (its links on top) does not fit
    (100, "the index (HNSW32 on 60 x 384)", ["index=hnsw"]),
])
def test_a_pass_that_cannot_fit_stops_before_writing(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     spare_kib: int, stage: str,
                                                     extra: list[str]) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    _scripted(monkeypatch, cache, MARGIN_BYTES + spare_kib * 1024)
    res = bench_in_process("+experiment=quickstart", "dataset=synthetic", f"cache_dir={cache}",
                           f"hydra.run.dir={tmp_path / 'run'}", "report.plot=false", *extra)
    assert res.returncode == 2, res.stderr[-2000:]
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("bench:")]
    assert len(said) == 1, said
    assert said[0].startswith("bench: error: config key cache_dir: " + stage), said
    assert "Traceback" not in res.stderr and "KiB on disk" in said[0]
    written = {p.relative_to(cache).parts[0] for p in cache.rglob("vectors.npy")}
    assert "embed_docs" not in written if stage == "embed_docs" else "embed_docs" in written
    assert not list(cache.rglob("index.faiss"))  # no index of either case was written
    assert not (tmp_path / "run" / "per_query.parquet").exists()


def test_ray_shards_count_with_the_sparse_vectors_they_share_a_disk_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """embedding=ray writes every shard to embedding.shards_dir before assembling the
    memory-mapped vectors: on one file system both need their bytes (the memmap is sparse
    until filled, so the artifact's own check saw them as free)."""
    import numpy as np

    from bench.embedding.engine import _check_disk

    shards = tmp_path / "shards"
    shards.mkdir()
    vectors = np.lib.format.open_memmap(tmp_path / "vectors.npy", mode="w+", dtype=np.float32,
                                        shape=(1000, 384))  # 1,536,000 bytes
    _scripted(monkeypatch, tmp_path, MARGIN_BYTES + 2 * 2**20)
    # (the check both sharded passes make: embedding=ray, embedding=local with shard_rows)
    _check_disk(shards, 1_000_000, np.zeros((1000, 384), np.float32), "embedding=ray")  # fits
    with pytest.raises(ConfigError) as exc:  # 1 MB of shards + 1.46 MiB of vectors: not
        _check_disk(shards, 1_000_000, vectors, "embedding=ray")
    assert exc.value.key == "embedding.shards_dir"
    assert "embedding=ray's shards (2.4 MiB of vectors" in str(exc.value)
