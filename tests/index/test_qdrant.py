"""Qdrant through qdrant-client. There is no Qdrant server here: these tests run the client's
LOCAL MODE, which is not the Qdrant engine (a Python brute force inside qdrant-client; its
HNSW and payload indexes are not used), so they check bench's client code — collections,
uploads, build keys and reuse, filters in the request, one-line errors — and never Qdrant's
recall or latency. ``index.url`` pointed at a Qdrant server runs the same calls there."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("qdrant_client")

from bench.config.build import OptionError
from bench.errors import ConfigError
from bench.index.exact import ann_recall_at_k, exact_topk
from bench.index.qdrant import MARKER, QdrantIndex, _marker_id, close_local

N, DIM = 300, 16


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    v = np.random.default_rng(0).standard_normal((N, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def q(x: np.ndarray) -> np.ndarray:
    noisy = x[:20] + 0.3 * np.random.default_rng(1).standard_normal((20, DIM)).astype(
        np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


@pytest.fixture()
def data_dir(tmp_path: Path) -> Iterator[Path]:
    # local mode commits one sqlite transaction per point: on tmpfs when there is one (a
    # disk's fsync per point makes a 300-point upload take seconds)
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    try:
        yield root / "qdrant"
    finally:
        close_local()
        if root != tmp_path:
            shutil.rmtree(root, ignore_errors=True)


def test_local_mode_not_the_engine_build_reuse_rebuild(data_dir: Path, x: np.ndarray,
                                                       q: np.ndarray) -> None:
    idx = QdrantIndex(url="local", data_dir=str(data_dir))
    built, info = idx.build(x)
    assert (info.n_vectors, info.dim) == (N, DIM) and info.index_bytes > 0
    exact = exact_topk(x, q, 10)
    res = built.search(q, 10, {"hnsw_ef": 4})
    # local mode is brute force: hnsw_ef 4 still gives the exact top-10 (not Qdrant's HNSW)
    assert ann_recall_at_k(res, exact, 10, vectors=x, queries=q).min() == 1.0
    assert np.abs(res.scores - exact.scores).max() < 1e-5
    again, info2 = idx.build(x)
    assert again.reused and info2.build_s == info.build_s
    # a marker naming another row count: dropped and rebuilt, never reused
    client = again._client
    from qdrant_client import models

    mid = _marker_id(built.name)
    payload = client.retrieve(MARKER, ids=[mid], with_payload=True)[0].payload
    client.upsert(MARKER, points=[models.PointStruct(id=mid, vector=[1.0],
                                                     payload={**payload, "n_rows": 3})])
    rebuilt, _ = idx.build(x)
    assert not rebuilt.reused
    art = data_dir.parent / "artifact"
    art.mkdir()
    rebuilt.save(art)
    idx.drop(built.name)
    loaded = idx.load(art)
    assert not loaded.reused and loaded.search(x[:1], 1, {}).ids[0, 0] == 0


def test_filters_go_into_the_request(data_dir: Path, x: np.ndarray, q: np.ndarray) -> None:
    bucket = (np.arange(N) % 50).astype(np.int32)
    idx = QdrantIndex(url="local", data_dir=str(data_dir))
    built, _ = idx.build_with_attributes(x, {"bucket": bucket})
    values = np.arange(len(q)) % 50
    res = built.search_where(q, 10, {}, column="bucket", values=values)
    for i in range(len(q)):
        rows = np.flatnonzero(bucket == values[i])  # 6 rows: a short list of all of them
        want = rows[np.argsort(-(x[rows] @ q[i]), kind="stable")]
        assert res.ids[i].tolist() == [*want.tolist(), *[-1] * (10 - len(want))]
    # a set per query: Qdrant's MatchAny (the push-down's filter)
    allowed = [np.array([v, (v + 7) % 50]) for v in values]
    got = built.search_where_in(q, 10, {}, column="bucket", allowed=allowed)
    for i in range(len(q)):
        rows = np.flatnonzero(np.isin(bucket, allowed[i]))  # 12 rows
        want = rows[np.argsort(-(x[rows] @ q[i]), kind="stable")][:10]
        assert got.ids[i].tolist() == want.tolist()


def test_bad_options_and_an_unreachable_server() -> None:
    for kwargs, key in [({"url": "qdrant.db"}, "url"), ({"m": 1}, "m"),
                        ({"query_params": [{"ef": 10}]}, "query_params[0].ef"),
                        ({"api_key_env": "BENCH_NO_SUCH_VAR_Y"}, "api_key_env")]:
        with pytest.raises(OptionError) as err:
            QdrantIndex(**kwargs)
        assert err.value.option == key
    with pytest.raises(ConfigError) as cerr:
        QdrantIndex(url="http://127.0.0.1:9", timeout_s=2)
    assert cerr.value.key == "index.url" and "\n" not in str(cerr.value)
