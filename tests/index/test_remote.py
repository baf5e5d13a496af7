"""The database template (bench/index/remote.py) on an in-memory engine: reuse only when the
marker and the table agree, the marker written last (a failed step leaves none), a
serialised builder verifying again under its lock, a lost query as that query's status, the
filters reaching the engine's hooks, the artifact. And the content keys of the shipped
engines pinned: a changed key would orphan every user's stored tables."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.index.remote import (
    Answer,
    Connection,
    IndexBackendError,
    Lost,
    Marker,
    RemoteBuiltIndex,
    RemoteIndex,
)


class Store:
    """The 'server': tables of rows and a marker table, shared by every connection."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, np.ndarray]] = {}
        self.markers: dict[str, Marker] = {}
        self.calls: list[str] = []
        self.fail_at: str | None = None


class FakeBuilt(RemoteBuiltIndex):
    engine = "fake"

    def __init__(self, conn: Connection, **kw: Any) -> None:
        super().__init__(conn=conn, **kw)
        self.store: Store = conn.handle
        self.lose: set[int] = set()
        self.asked = 0

    def _prepare(self, k: int, params: Mapping[str, int | float], column: str | None,
                 any_of: bool) -> Any:
        return column

    def _where(self, column: str, value: int) -> Any:
        return [value]

    def _where_in(self, column: str, values: list[int]) -> Any:
        return values

    def _one(self, state: Any, q: np.ndarray, k: int, where: Any) -> Answer:
        self.asked += 1
        if self.asked in self.lose:
            raise Lost("timeout")
        t = self.store.tables[self.name]
        ok = np.ones(len(t["x"]), bool) if where is None else np.isin(t[state], where)
        rows = np.flatnonzero(ok)
        s = t["x"][rows] @ q
        top = rows[np.argsort(-s, kind="stable")[:k]]
        return top, t["x"][top] @ q

    def sizes(self) -> dict[str, int]:
        return {"total_bytes": int(self.store.tables[self.name]["x"].nbytes)}


class FakeIndex(RemoteIndex[FakeBuilt]):
    engine = "fake"

    def __init__(self, store: Store, *, serialised: bool = False) -> None:
        self.store = store
        self.serialised_builds = serialised  # type: ignore[misc]
        self._query_params = [{}]
        self.on_lock: Any = None

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        return {"kind": "fake"}

    @property
    def endpoint(self) -> str:
        return "memory"

    def _connect(self, name: str) -> Connection:
        return Connection(self.store, None, 0.0)

    def _log(self, what: str) -> None:
        self.store.calls.append(what)
        if self.store.fail_at == what:
            raise OSError(f"{what} refused")

    def _ensure_markers(self, conn: Connection) -> None:
        pass

    def _read_marker(self, conn: Connection, name: str) -> Marker | None:
        return self.store.markers.get(name)

    def _complete(self, conn: Connection, name: str, n: int) -> bool:
        return name in self.store.tables and len(self.store.tables[name]["x"]) == n

    @contextlib.contextmanager
    def _build_scope(self, conn: Connection, name: str) -> Iterator[None]:
        if self.on_lock is not None:
            self.on_lock()
        yield

    def _drop(self, conn: Connection, name: str) -> None:
        self._log("drop")
        self.store.markers.pop(name, None)
        self.store.tables.pop(name, None)

    def _create(self, conn: Connection, name: str, dim: int, cols: tuple[str, ...]) -> None:
        self._log("create")
        self.store.tables[name] = {"x": np.zeros((0, dim), np.float32)}

    def _insert(self, conn: Connection, name: str, x: np.ndarray,
                attributes: Mapping[str, np.ndarray], cols: tuple[str, ...]) -> None:
        self._log("insert")
        self.store.tables[name] = {"x": x.copy(), **{c: attributes[c] for c in cols}}

    def _build_index(self, conn: Connection, name: str, n: int, cols: tuple[str, ...]
                     ) -> None:
        self._log("index")

    def _write_marker(self, conn: Connection, name: str, marker: Marker, params: str) -> None:
        self._log("marker")
        self.store.markers[name] = marker

    def _open(self, conn: Connection, name: str, *, key: str, x: np.ndarray,
              cols: tuple[str, ...], reused: bool) -> FakeBuilt:
        self._log("open")
        return FakeBuilt(conn, name=name, endpoint=self.endpoint, key=key, n_rows=len(x),
                         dim=x.shape[1], columns=cols, vectors=x, reused=reused)


@pytest.fixture()
def x() -> np.ndarray:
    v = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_build_order_reuse_and_a_stale_marker(x: np.ndarray) -> None:
    store = Store()
    idx = FakeIndex(store)
    built, info = idx.build(x)
    # the marker is written last, after the searchable table is opened
    assert store.calls == ["drop", "create", "insert", "index", "open", "marker"]
    assert not built.reused and info.index_bytes == x.nbytes and built.name.startswith("bench_")
    store.calls.clear()
    again, info2 = idx.build(x)
    assert again.reused and store.calls == ["open"] and info2.build_s == info.build_s
    # a marker naming another row count, or a table short of rows: rebuilt, never reused
    m = store.markers[built.name]
    store.markers[built.name] = Marker(m.key, m.n_rows + 1, m.build_s)
    assert not idx.build(x)[0].reused
    store.tables[built.name]["x"] = x[:-1]
    assert not idx.build(x)[0].reused and idx.build(x)[0].reused


def test_a_failed_step_leaves_no_marker(x: np.ndarray) -> None:
    store = Store()
    idx = FakeIndex(store)
    store.fail_at = "index"
    with pytest.raises(IndexBackendError, match="fake at memory, index build of bench_"):
        idx.build(x)
    assert store.markers == {}  # never complete: the next build starts again
    store.fail_at = None
    store.calls.clear()
    assert not idx.build(x)[0].reused and store.calls[0] == "drop"


def test_a_serialised_builder_verifies_again_under_its_lock(x: np.ndarray) -> None:
    store = Store()
    other = FakeIndex(store)
    idx = FakeIndex(store, serialised=True)
    # another process completes the build while this one waits for the lock
    idx.on_lock = lambda: (setattr(idx, "on_lock", None), other.build(x))
    built, _ = idx.build(x)
    assert built.reused and store.calls.count("insert") == 1


def test_search_filters_and_a_lost_query(x: np.ndarray) -> None:
    idx = FakeIndex(Store())
    cls = (np.arange(40) % 4).astype(np.int32)
    built, _ = idx.build_with_attributes(x, {"fclass": cls})
    q = x[:3]
    res = built.search(q, 5, {})
    assert (res.ids[:, 0] == [0, 1, 2]).all() and res.incomplete == {}
    eq = built.search_where(q, 5, {}, column="fclass", values=np.array([1, 1, 2]))
    assert (cls[eq.ids[:2]] == 1).all() and (cls[eq.ids[2]] == 2).all()
    built.lose = {built.asked + 2}
    got = built.search_where_in(q, 20, {}, column="fclass",
                                allowed=[np.array([0, 3]), np.array([1]), np.array([], int)])
    assert got.incomplete == {1: "timeout"} and (got.ids[1] == -1).all()
    assert (got.ids[2] == -1).all()  # an empty set: no request, nothing seen
    assert np.isin(cls[got.ids[0][got.ids[0] >= 0]], [0, 3]).all()
    assert (got.ids[0] >= 0).sum() == 20
    with pytest.raises(ValueError, match="no attribute column 'nope'"):
        built.search_where(q, 5, {}, column="nope", values=np.zeros(3, int))
    with pytest.raises(ValueError, match="attribute column name 'id'"):
        idx.build_with_attributes(x, {"id": cls})


def test_the_artifact_rebuilds_a_lost_table(x: np.ndarray, tmp_path: Path) -> None:
    store = Store()
    idx = FakeIndex(store)
    built, _ = idx.build(x)
    built.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.json", "vectors.npy"]
    store.tables.clear()
    loaded = idx.load(tmp_path)
    assert not loaded.reused and loaded.key == built.key
    np.save(tmp_path / "vectors.npy", x[::-1].copy())
    with pytest.raises(ValueError, match="do not match the table key"):
        idx.load(tmp_path)


# the keys 0ec5603 computed (before the template): stored tables are found by them
PINNED = {
    "pgvector_hnsw": ("700c56e3fa8dd59b583196ac7157b5f901eff8175ae220fc69754784f5dc3e19",
                      "d4edd6f3af61ca6714a4be74f40562e48d35bbe371a947c668d793c931e6bff0"),
    "pgvector_ivfflat": ("d3cef12029cc973c331548b26538df0e58615d0ba38eb76f6a88d25feb8d6b03",
                         "5a449604fb2fd220194bcbd3b36e8facf553c89468c18a88fef2733a7e664b9a"),
    "milvus_ivf": ("c5a919db1d8abaeb3bc70942450011cf1b2caaa838dac4cd2e13c44315a7339d",
                   "47e1ea9d65b4b3756e886c4eb743492885439ffbd2e08139c4ada97d28070b82"),
    "qdrant_local": ("5065521bedc42f61c0ce44fc53b8995d8ca5292af850882279144f0acb1ffa9e",
                     "0171d300b2a7ec564659546256b67a3a6a649c1573604150059f99560ee37b47"),
    "lancedb": ("f81830e10f8224062122064ad6aacc3b4b92e85ad104373d96ad47a7ec84240f",
                "aedf97ff526e336a6cf182c252916124969b53c7c49a69688abfc9aaa60c9de1"),
}


def _option(name: str, tmp_path: Path) -> Any:
    if name.startswith("pgvector"):
        from bench.index.pgvector import PgvectorIndex

        return PgvectorIndex(method=name.split("_")[1])
    if name == "milvus_ivf":
        from bench.index.milvus import MilvusIndex

        return MilvusIndex(index_type="IVF_FLAT")
    if name == "qdrant_local":
        pytest.importorskip("qdrant_client")
        from bench.index.qdrant import QdrantIndex

        return QdrantIndex(url="local", data_dir=str(tmp_path))
    from bench.index.lancedb_index import LanceIndex

    return LanceIndex()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_content_keys_of_the_shipped_engines_are_pinned(name: str, tmp_path: Path) -> None:
    x = (np.arange(64 * 8, dtype=np.float32).reshape(64, 8) % 7) / 7.0
    attrs = {"fclass": (np.arange(64) % 3).astype(np.int32)}
    idx = _option(name, tmp_path)  # options only: nothing connects
    assert (idx.content_key(x, {}), idx.content_key(x, attrs)) == PINNED[name]
