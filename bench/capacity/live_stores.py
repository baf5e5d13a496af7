"""Vector databases kept open for writes while they serve queries: what the freshness study
(:mod:`bench.capacity.freshness`) inserts into and searches.

Each store is built on the base vectors with the index module's own build (``bench.index``:
pgvector and Milvus Lite on the servers those modules start, LanceDB embedded, faiss in
process), then takes inserts of the ingest vectors one call at a time while sessions search
it. Ids are global row numbers: base rows ``0..n_base-1`` (as the build writes them), ingest
row ``j`` gets ``n_base + j``.

- ``search`` goes through a :class:`Session`, one per thread that queries: pgvector needs
  one connection per thread (a psycopg connection runs one statement at a time), so its
  sessions are separate connections opened before the first insert; the others share one
  client (pymilvus' gRPC client and a LanceDB table are safe to share); faiss shares one
  index behind a lock, because faiss does not allow ``add`` while a search runs.
- ``insert`` returns when the database has acknowledged the rows (pgvector: the
  autocommitted INSERT; Milvus: the insert RPC; LanceDB: the committed ``add``).
- :class:`IndexProgress` (optional): how many rows the ANN index covers, the time-to-indexed
  signal. pgvector and faiss update their HNSW graph inside the insert (a committed row is
  an indexed row); Milvus reports ``indexed_rows`` of its index (Milvus Lite reports 0: it
  never indexes, docs/vector-databases.md); LanceDB's index covers a new row only after
  ``optimize()`` (until then it is searched by a flat scan of the unindexed fragment).
- :class:`Maintained` (optional): a periodic maintenance call a user would schedule
  (LanceDB's ``optimize``), run by the study every ``maintain_every_s``.
- ``close`` drops what the store built (the table / collection), so no later build reuses
  a table that ingest has changed.

Adding a database: a class with ``name``, ``index``, ``build_s``, ``sessions``, ``insert``,
``close`` (and optionally ``indexed_rows`` / ``maintain``), and an entry in ``STORES``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

log = logging.getLogger("bench")


class Session(Protocol):
    """One thread's handle: the ids of the ``k`` nearest rows to ``vector`` (-1 padded)."""

    def search(self, vector: np.ndarray, k: int) -> np.ndarray: ...


class LiveStore(Protocol):
    name: str
    #: the index as built, in words (``pgvector hnsw m=16 ef_construction=64, ef_search=64``)
    index: str
    build_s: float

    def sessions(self, n: int) -> list[Session]:
        """``n`` sessions, each for one thread; called before the first insert."""
        ...

    def insert(self, ids: np.ndarray, vectors: np.ndarray) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class IndexProgress(Protocol):
    def indexed_rows(self) -> int: ...


@runtime_checkable
class Maintained(Protocol):
    maintain_every_s: float

    def maintain(self) -> None: ...


class _Built:
    """A session over a built index of ``bench.index`` (its batch ``search`` on one row)."""

    def __init__(self, built: Any, params: dict[str, int | float],
                 lock: threading.Lock | None = None) -> None:
        self._built = built
        self._params = params
        self._lock = lock

    def search(self, vector: np.ndarray, k: int) -> np.ndarray:
        q = np.ascontiguousarray(vector[None, :], dtype=np.float32)
        if self._lock is None:
            res = self._built.search(q, k, self._params)
        else:
            with self._lock:
                res = self._built.search(q, k, self._params)
        if res.incomplete:  # pgvector: a lost connection / statement timeout
            raise RuntimeError(f"search {next(iter(res.incomplete.values()))}")
        return np.asarray(res.ids[0], dtype=np.int64)


class PgvectorStore:
    """pgvector HNSW on bench's PostgreSQL server (``bench.index.pgvector``); sessions are
    further ``build`` calls of the same vectors, which reuse the verified table on a new
    connection each."""

    name = "pgvector"

    def __init__(self, base: np.ndarray, *, data_dir: str, m: int, ef_construction: int,
                 ef_search: int) -> None:
        from bench.index.pgvector import PgvectorIndex

        self._base = base
        self._idx = PgvectorIndex(method="hnsw", m=m, ef_construction=ef_construction,
                                  data_dir=data_dir, query_params=[{"ef_search": ef_search}])
        self._writer, info = self._idx.build(base)
        self.build_s = info.build_s
        self._params: dict[str, int | float] = {"ef_search": ef_search}
        self._opened: list[Any] = []
        self.index = (f"pgvector hnsw m={m} ef_construction={ef_construction}, "
                      f"ef_search={ef_search} (PostgreSQL, bench's server)")

    def sessions(self, n: int) -> list[Session]:
        out: list[Session] = []
        for _ in range(n):
            built, _ = self._idx.build(self._base)  # the same table, its own connection
            self._opened.append(built)
            out.append(_Built(built, self._params))
        return out

    def _sql(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(t=sql.Identifier(self._writer.table))

    def insert(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        from bench.index.pgvector import _Vec

        conn = self._writer._conn
        stmt = self._sql("INSERT INTO {t} (id, v) VALUES (%s, %s)")
        rows = [(int(i), _Vec(np.ascontiguousarray(v, dtype=np.float32)))
                for i, v in zip(ids, vectors, strict=True)]
        with conn.transaction():  # one commit per call: its rows are visible together
            conn.cursor().executemany(stmt, rows)

    def indexed_rows(self) -> int:
        # the HNSW graph is updated inside the inserting transaction: committed = indexed
        row = self._writer._conn.execute(self._sql("SELECT count(*) FROM {t}")).fetchone()
        return int(row[0])

    def close(self) -> None:
        from bench.index.pgvector import MARKER_TABLE

        for b in self._opened:
            with contextlib.suppress(Exception):
                b._conn.close()
        conn = self._writer._conn
        with contextlib.suppress(Exception):  # the server may be gone: nothing to drop then
            conn.execute(self._sql("DROP TABLE IF EXISTS {t}"))
            conn.execute(f"DELETE FROM {MARKER_TABLE} WHERE name = %s", (self._writer.table,))
            conn.close()


class MilvusStore:
    """Milvus Lite (``bench.index.milvus``: the milvus-lite wheel's server binary) with an
    IVF_FLAT index, searched at ``Eventually`` consistency as ``bench.index.milvus`` does."""

    name = "milvus_lite"

    def __init__(self, base: np.ndarray, *, data_dir: str, nlist: int | None,
                 nprobe: int) -> None:
        from bench.index.milvus import MilvusIndex

        self._idx = MilvusIndex(index_type="IVF_FLAT", nlist=nlist, data_dir=data_dir,
                                query_params=[{"nprobe": nprobe}])
        self._built, info = self._idx.build(base)
        self.build_s = info.build_s
        self._params: dict[str, int | float] = {"nprobe": nprobe}
        self.index = (f"Milvus Lite IVF_FLAT nlist={self._idx.resolve_nlist(len(base))}, "
                      f"nprobe={nprobe}, Eventually consistency (searched exactly: Lite "
                      "never indexes)")

    def sessions(self, n: int) -> list[Session]:
        return [_Built(self._built, self._params) for _ in range(n)]

    def insert(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self._built._client.insert(self._built.name, [
            {"id": int(i), "vector": np.asarray(v, dtype=np.float32)}
            for i, v in zip(ids, vectors, strict=True)])

    def indexed_rows(self) -> int:
        desc = self._built._client.describe_index(self._built.name, "vector")
        return int(desc.get("indexed_rows", 0))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._idx.drop(self._built.name)


class LanceStore:
    """LanceDB (embedded, ``bench.index.lancedb_index``) with its IVF_HNSW_SQ index; new rows
    are searched by a flat scan until ``optimize()`` folds them into the index."""

    name = "lancedb"

    def __init__(self, base: np.ndarray, *, data_dir: str, m: int, ef_construction: int,
                 ef: int, optimize_every_s: float) -> None:
        from bench.index.lancedb_index import LanceIndex

        self._idx = LanceIndex(index_type="IVF_HNSW_SQ", num_partitions=1, m=m,
                               ef_construction=ef_construction, data_dir=data_dir,
                               query_params=[{"ef": ef}])
        self._built, info = self._idx.build(base)
        self.build_s = info.build_s
        self._params: dict[str, int | float] = {"ef": ef}
        self.maintain_every_s = float(optimize_every_s)
        self._index_name = next(i.name for i in self._built._table.list_indices()
                                if i.columns == ["vector"])
        self.index = (f"LanceDB IVF_HNSW_SQ m={m} ef_construction={ef_construction}, ef={ef}, "
                      + (f"optimize() every {optimize_every_s:g} s" if optimize_every_s > 0
                         else "never optimized"))

    def sessions(self, n: int) -> list[Session]:
        return [_Built(self._built, self._params) for _ in range(n)]

    def insert(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        import pyarrow as pa

        x = np.ascontiguousarray(vectors, dtype=np.float32)
        self._built._table.add(pa.table({
            "id": pa.array(np.asarray(ids, dtype=np.int32)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1])}))

    def indexed_rows(self) -> int:
        stats = self._built._table.index_stats(self._index_name)
        return 0 if stats is None else int(stats.num_indexed_rows)

    def maintain(self) -> None:
        self._built._table.optimize()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._idx.drop(self._built.name)


class FaissStore:
    """faiss HNSW in this process (``bench.index.faiss_index``): ``add`` and ``search``
    behind one lock (faiss does not allow them at once), so an insert stalls searches."""

    name = "faiss_hnsw"

    def __init__(self, base: np.ndarray, *, m: int, ef_construction: int,
                 ef_search: int) -> None:
        from bench.index.faiss_index import FaissIndex

        self._built, info = FaissIndex(factory=f"HNSW{m},Flat",
                                       hnsw_ef_construction=ef_construction,
                                       query_params=[{"ef_search": ef_search}]).build(base)
        self.build_s = info.build_s
        self._params: dict[str, int | float] = {"ef_search": ef_search}
        self._lock = threading.Lock()
        self.index = (f"faiss HNSW{m},Flat ef_construction={ef_construction}, "
                      f"ef_search={ef_search} (in process, adds and searches behind one lock)")

    def sessions(self, n: int) -> list[Session]:
        return [_Built(self._built, self._params, self._lock) for _ in range(n)]

    def insert(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        with self._lock:
            index = self._built._index
            if int(ids[0]) != index.ntotal:  # faiss numbers rows in insertion order
                raise RuntimeError(f"faiss assigns id {index.ntotal}, asked for {int(ids[0])}")
            index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def indexed_rows(self) -> int:
        with self._lock:
            return int(self._built._index.ntotal)

    def close(self) -> None:
        pass


#: the databases the study knows: name -> (its Python package, how to open it on base
#: vectors given the study's options)
Opener = Callable[[np.ndarray, Any], LiveStore]
STORES: dict[str, tuple[str, Opener]] = {
    "pgvector": ("pgserver", lambda base, o: PgvectorStore(
        base, data_dir=str(Path(o.data_dir) / "pgvector"), m=o.m,
        ef_construction=o.ef_construction, ef_search=o.ef_search)),
    "milvus_lite": ("milvus_lite", lambda base, o: MilvusStore(
        base, data_dir=str(Path(o.data_dir) / "milvus"), nlist=None, nprobe=o.nprobe)),
    "lancedb": ("lancedb", lambda base, o: LanceStore(
        base, data_dir=str(Path(o.data_dir) / "lancedb"), m=o.m,
        ef_construction=o.ef_construction, ef=o.ef_search,
        optimize_every_s=o.lancedb_optimize_every_s)),
    "faiss_hnsw": ("faiss", lambda base, o: FaissStore(
        base, m=o.m, ef_construction=o.ef_construction, ef_search=o.ef_search)),
}
