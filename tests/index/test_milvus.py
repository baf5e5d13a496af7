"""Milvus through pymilvus, against a real Milvus Lite server process started by bench (the
milvus-lite 2.x wheel's server binary): build once, a collection reused only when its marker
row matches, filter expressions pushed into the search, one-line errors.

Milvus Lite searches exactly (its local mode never indexes its one growing segment): these
tests pin that, so the docs' statement that Milvus Lite figures are exact search, not
Milvus's ANN, fails loudly if a Milvus Lite release starts indexing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus")

from bench.config.build import OptionError
from bench.errors import BenchError, ConfigError
from bench.index.exact import ann_recall_at_k, exact_topk
from bench.index.milvus import MARKER, MilvusIndex, lite_binary, stop_lite

try:
    lite_binary()
except BenchError:
    pytest.skip("milvus-lite 2.x (the Milvus server binary) is not installed",
                allow_module_level=True)

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


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("milvus")
    try:
        yield d
    finally:
        stop_lite()


def test_lite_ivf_build_reuse_and_rebuild(data_dir: Path, x: np.ndarray,
                                          q: np.ndarray) -> None:
    idx = MilvusIndex(index_type="IVF_FLAT", nlist=16, data_dir=str(data_dir))
    built, info = idx.build(x)
    assert (info.n_vectors, info.dim) == (N, DIM) and info.index_bytes > 0
    assert built.server is not None and built.server.pid > 0
    exact = exact_topk(x, q, 10)
    one_probe = built.search(q, 10, {"nprobe": 1})
    # Milvus Lite: 1 probe of 16 lists still returns the exact top-10 (see the module doc)
    assert ann_recall_at_k(one_probe, exact, 10, vectors=x, queries=q).min() == 1.0
    # IP scores are the inner products of the returned rows
    got = (q[:, None, :] * x[one_probe.ids]).sum(-1)
    assert np.abs(one_probe.scores - got).max() < 1e-5
    assert (built.search(x[:3], 1, {"nprobe": 4}).ids[:, 0] == [0, 1, 2]).all()

    again, info2 = idx.build(x)
    assert again.reused and info2.build_s == info.build_s
    # a marker that no longer matches the collection: dropped and rebuilt, never reused
    client = again._client
    row = client.query(MARKER, filter=f'name == "{built.name}"', output_fields=["*"])[0]
    client.upsert(MARKER, [{**row, "n_rows": 3}])
    rebuilt, _ = idx.build(x)
    assert not rebuilt.reused
    # the cached artifact rebuilds a lost collection
    art = data_dir / "artifact"
    art.mkdir()
    rebuilt.save(art)
    idx.drop(built.name)
    loaded = idx.load(art)
    assert not loaded.reused and loaded.search(x[:1], 1, {"nprobe": 1}).ids[0, 0] == 0


def test_filter_expressions_are_pushed_down(data_dir: Path, x: np.ndarray,
                                            q: np.ndarray) -> None:
    bucket = (np.arange(N) % 100).astype(np.int32)
    other = (np.arange(N) % 7).astype(np.int32)
    idx = MilvusIndex(index_type="IVF_FLAT", nlist=16, data_dir=str(data_dir))
    built, _ = idx.build_with_attributes(x, {"bucket": bucket, "other": other})
    assert built.columns == ("bucket", "other")
    values = np.arange(len(q)) % 100
    res = built.search_where(q, 10, {"nprobe": 1}, column="bucket", values=values)
    for i in range(len(q)):
        rows = np.flatnonzero(bucket == values[i])  # 15 rows: a full list of the exact top 10
        want = rows[np.argsort(-(x[rows] @ q[i]), kind="stable")][:10]
        assert res.ids[i].tolist() == want.tolist()
    # a set per query (the push-down's `fclass in [...]`), and an empty set: no request
    allowed = [np.array([values[i], (values[i] + 1) % 100]) if i else np.array([], np.int64)
               for i in range(len(q))]
    got = built.search_where_in(q, 10, {"nprobe": 1}, column="bucket", allowed=allowed)
    for i in range(1, len(q)):
        rows = np.flatnonzero(np.isin(bucket, allowed[i]))
        want = rows[np.argsort(-(x[rows] @ q[i]), kind="stable")][:10]
        assert got.ids[i].tolist() == want.tolist()
    assert (got.ids[0] == -1).all()
    with pytest.raises(ValueError, match="no attribute column"):
        built.search_where(q[:1], 10, {}, column="nope", values=values[:1])


def test_hnsw_needs_a_server_and_bad_options_name_the_key() -> None:
    with pytest.raises(OptionError) as err:
        MilvusIndex(index_type="HNSW")  # Milvus Lite refuses HNSW: say so before any work
    assert err.value.option == "uri"
    for kwargs, key in [({"index_type": "DISKANN"}, "index_type"),
                        ({"index_type": "IVF_FLAT", "query_params": [{"ef": 10}]},
                         "query_params[0].ef"),
                        ({"index_type": "IVF_FLAT", "nlist": 0}, "nlist"),
                        ({"uri": "./milvus.db"}, "uri"),
                        ({"index_type": "IVF_FLAT", "token_env": "BENCH_NO_SUCH_VAR_X"},
                         "token_env")]:
        with pytest.raises(OptionError) as err:
            MilvusIndex(**kwargs)
        assert err.value.option == key


def test_an_unreachable_server_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        MilvusIndex(index_type="HNSW", uri="http://127.0.0.1:9", timeout_s=2)
    assert err.value.key == "index.uri" and "\n" not in str(err.value)
