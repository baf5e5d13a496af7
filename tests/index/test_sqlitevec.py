"""sqlite-vec (a ``vec0`` table in a SQLite file, the fifth engine on bench.index.remote's
template), against the real extension: exact KNN, filters inside the scan, build reuse only
when the marker and the table agree, a failed build leaves nothing behind, the artifact
rebuilds a lost table, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("apsw")
pytest.importorskip("sqlite_vec")

from bench.config.build import OptionError
from bench.index.exact import exact_topk
from bench.index.remote import IndexBackendError
from bench.index.sqlitevec_index import MARKER, SqliteVecIndex

N, DIM = 400, 16


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    v = np.random.default_rng(0).standard_normal((N, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def q(x: np.ndarray) -> np.ndarray:
    noisy = x[:20] + 0.3 * np.random.default_rng(1).standard_normal((20, DIM)).astype(
        np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def test_exact_search_reuse_and_rebuild(tmp_path: Path, x: np.ndarray, q: np.ndarray) -> None:
    idx = SqliteVecIndex(data_dir=str(tmp_path / "db"))
    built, info = idx.build(x)
    assert (info.n_vectors, info.dim) == (N, DIM) and info.index_bytes > 0
    assert not built.reused
    exact = exact_topk(x, q, 10)
    res = built.search(q, 10, {})
    assert (res.ids == exact.ids).all()  # a full scan: the exact top-10
    np.testing.assert_allclose(res.scores, (q[:, None, :] * x[res.ids]).sum(-1), atol=1e-5)
    again, info2 = idx.build(x)
    assert again.reused and info2.build_s == info.build_s
    # a marker that no longer matches the table: dropped and rebuilt, never reused
    again._db.execute(f"UPDATE {MARKER} SET n_rows = 3 WHERE name = ?", (built.name,))
    rebuilt, _ = idx.build(x)
    assert not rebuilt.reused and idx.build(x)[0].reused
    # the cached artifact rebuilds a lost table
    art = tmp_path / "artifact"
    art.mkdir()
    rebuilt.save(art)
    idx.drop(built.name)
    loaded = idx.load(art)
    assert not loaded.reused and loaded.search(x[:1], 1, {}).ids[0, 0] == 0
    # other vectors are another table, the first one untouched
    other, _ = idx.build(x[::-1].copy())
    assert other.name != built.name and idx.build(x)[0].reused


def test_filters_inside_the_scan(tmp_path: Path, x: np.ndarray, q: np.ndarray) -> None:
    bucket = (np.arange(N) % 50).astype(np.int32)
    idx = SqliteVecIndex(data_dir=str(tmp_path / "db"))
    built, _ = idx.build_with_attributes(x, {"bucket": bucket})
    values = np.full(len(q), 7)
    res = built.search_where(q, 10, {}, column="bucket", values=values)
    # 8 rows match: all of them, best first, then -1 padding (never another bucket)
    keep = np.flatnonzero(bucket == 7)
    order = keep[np.argsort(-(q @ x[keep].T), axis=1, kind="stable")]
    assert (res.ids[:, :8] == order).all() and (res.ids[:, 8:] == -1).all()
    allowed = [np.array([1, 2]) if i % 2 else np.array([], dtype=np.int64)
               for i in range(len(q))]
    got = built.search_where_in(q, 5, {}, column="bucket", allowed=allowed)
    assert (np.isin(bucket[got.ids[1::2]], [1, 2])).all()
    assert (got.ids[0::2] == -1).all()  # an empty set sees nothing
    with pytest.raises(ValueError, match="no attribute column"):
        built.search_where(q, 5, {}, column="nope", values=values)


def test_a_failed_build_leaves_nothing(tmp_path: Path, x: np.ndarray,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    idx = SqliteVecIndex(data_dir=str(tmp_path / "db"))

    def broken(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(idx, "_build_index", broken)
    with pytest.raises(IndexBackendError, match=r"index build of bench_.*disk full"):
        idx.build(x)
    monkeypatch.undo()
    # the transaction rolled back: no table and no marker, so the next build starts clean
    built, _ = idx.build(x)
    assert not built.reused
    assert built._db.execute(f"SELECT count(*) FROM {MARKER}").fetchone()[0] == 1


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"query_params": [{"ef": 10}]}, "query_params"),
    ({"data_dir": " "}, "data_dir"),
    ({"busy_timeout_s": 0}, "busy_timeout_s"),
])
def test_bad_options_name_the_key(kwargs: dict, key: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(OptionError) as err:
        SqliteVecIndex(**kwargs)
    assert err.value.option == key


def test_a_knob_at_search_time_and_a_too_deep_k(tmp_path: Path, x: np.ndarray) -> None:
    built, _ = SqliteVecIndex(data_dir=str(tmp_path / "db")).build(x)
    with pytest.raises(OptionError):
        built.search(x[:1], 5, {"ef": 3})
    with pytest.raises(ValueError, match=r"1\.\.4096"):
        built.search(x[:1], 5000, {})
