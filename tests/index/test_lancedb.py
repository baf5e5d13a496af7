"""LanceDB (embedded) with its HNSW index: build once, ef swept, a table reused only when its
completion marker matches, filters pushed into the LanceDB query (pre- or post-filtered)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lancedb")

from bench.config.build import OptionError
from bench.index.exact import ann_recall_at_k, exact_topk
from bench.index.lancedb_index import LanceIndex

N, DIM = 1500, 32


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    v = np.random.default_rng(0).standard_normal((N, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def q(x: np.ndarray) -> np.ndarray:
    noisy = x[:40] + 0.3 * np.random.default_rng(1).standard_normal((40, DIM)).astype(
        np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def test_hnsw_recall_and_reuse(tmp_path: Path, x: np.ndarray, q: np.ndarray) -> None:
    idx = LanceIndex(data_dir=str(tmp_path / "db"), m=8, ef_construction=32)
    built, info = idx.build(x)
    assert (info.n_vectors, info.dim) == (N, DIM) and info.index_bytes > 0
    exact = exact_topk(x, q, 10)
    res = built.search(q, 10, {"ef": 200})
    # SQ-compressed scores are approximate: recall on exact scores of the returned rows
    assert ann_recall_at_k(res, exact, 10, vectors=x, queries=q).mean() >= 0.9
    assert np.abs(res.scores[:, 0] - (q * x[res.ids[:, 0]]).sum(1)).max() < 0.02
    # an ef below the LIMIT is raised to it (LanceDB refuses it): a full list
    assert (built.search(q[:2], 30, {"ef": 5}).ids >= 0).all()
    again, info2 = idx.build(x)
    assert again.reused and info2.build_s == info.build_s
    # a marker that no longer matches the table: dropped and rebuilt, never reused
    marker = tmp_path / "db" / f"{built.name}.complete.json"
    marker.write_text(marker.read_text().replace(f'"n_rows": {N}', '"n_rows": 3'))
    rebuilt, _ = idx.build(x)
    assert not rebuilt.reused
    # the cached artifact rebuilds a lost table
    art = tmp_path / "artifact"
    art.mkdir()
    rebuilt.save(art)
    idx.drop(built.name)
    loaded = idx.load(art)
    assert not loaded.reused and loaded.search(x[:1], 1, {"ef": 40}).ids[0, 0] == 0


def test_filters_pre_and_post(tmp_path: Path, x: np.ndarray, q: np.ndarray) -> None:
    bucket = (np.arange(N) % 100).astype(np.int32)
    idx = LanceIndex(data_dir=str(tmp_path / "db"), m=8, ef_construction=32)
    built, _ = idx.build_with_attributes(x, {"bucket": bucket})
    values = np.full(len(q), 3)
    pre = built.search_where(q, 10, {"ef": 40}, column="bucket", values=values)
    post = built.search_where(q, 10, {"ef": 40, "postfilter": 1}, column="bucket",
                              values=values)
    for res in (pre, post):
        assert (bucket[res.ids[res.ids >= 0]] == 3).all()
    assert (pre.ids >= 0).all()  # pre-filtered: the 15 matching rows are searched
    assert (post.ids >= 0).sum(axis=1).mean() < 5  # post-filtered: short lists at 1 %


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"index_type": "HNSW"}, "index_type"),
    ({"num_partitions": 0}, "num_partitions"),
    ({"num_sub_vectors": 8}, "num_sub_vectors"),
    ({"index_type": "IVF_PQ", "query_params": [{"ef": 10}]}, "query_params[0].ef"),
    ({"query_params": [{"probes": 1}]}, "query_params[0].probes"),
    ({"query_params": [{"postfilter": 3}]}, "query_params[0].postfilter"),
])
def test_bad_options_name_the_key(kwargs: dict, key: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(OptionError) as err:
        LanceIndex(**kwargs)
    assert err.value.option == key
