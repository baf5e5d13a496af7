"""sqlite-vec: a ``vec0`` virtual table in a SQLite database file, searched in this process
(the extension ships in the ``sqlite-vec`` wheel; SQLite itself comes from ``apsw``, since
Python's own ``sqlite3`` module is often built without loadable extensions).

What it is: sqlite-vec 0.1 has NO ANN index — a KNN query (``vector MATCH ? AND k = ?``)
scans every stored vector, so its recall is exact search and its latency is a full scan in
SQLite's pages. It is here as what a small application embeds (one file, no server), and as
the fifth engine on ``bench.index.remote``'s template. Cosine distance on L2-normalised
vectors: the score is ``1 - distance`` (the inner product).

Filters: the attribute columns are ``vec0`` metadata columns, so ``b10 = ?`` and
``b10 IN (...)`` are applied DURING the scan (the top-k of the matching rows, never a short
list). KNN queries return at most 4096 rows (``k``).

Table and cache: the template's — keyed by ``build_key``, table ``bench_<24 hex>``, a row in
the ordinary table ``bench_builds`` written last, and the whole build one ``BEGIN IMMEDIATE``
transaction (SQLite's write lock serialises two builders of one file).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import ConfigError, MissingDependencyError
from bench.index.remote import (
    Answer,
    Connection,
    IndexBackendError,
    Marker,
    RemoteBuiltIndex,
    RemoteIndex,
    last_line,
)

log = logging.getLogger(__name__)

MARKER = "bench_builds"
DB_FILE = "bench.sqlite"
#: sqlite-vec's largest k of a KNN query
K_MAX = 4096
INSERT_BATCH = 4096


def _apsw() -> Any:
    try:
        import apsw
        import sqlite_vec  # noqa: F401 - checked here, loaded per connection
    except ImportError:
        raise MissingDependencyError("apsw sqlite-vec", "vectordb", "index=sqlite_vec") from None
    return apsw


class SqliteVecBuiltIndex(RemoteBuiltIndex):
    """A ``vec0`` table on an open connection; one KNN query per query vector."""

    engine = "sqlite-vec"

    def __init__(self, conn: Connection, *, path: Path, **kw: Any) -> None:
        super().__init__(conn=conn, **kw)
        self._db = conn.handle
        self.path = path

    def _prepare(self, k: int, params: Mapping[str, int | float], column: str | None,
                 any_of: bool) -> Any:
        if params:
            raise OptionError("query_params", f"sqlite-vec has no query knobs (exact scan), "
                                              f"got {dict(params)}")
        if not 1 <= k <= K_MAX:
            raise ValueError(f"sqlite-vec returns 1..{K_MAX} rows a query, asked for {k}")
        return None

    def _where(self, column: str, value: int) -> Any:
        return f" AND {column} = ?", [value]  # column: checked against the table's columns

    def _where_in(self, column: str, values: list[int]) -> Any:
        return f" AND {column} IN ({', '.join('?' * len(values))})", values

    def _one(self, state: Any, q: np.ndarray, k: int, where: Any) -> Answer:
        clause, args = where if where is not None else ("", [])
        sql = f"SELECT id, distance FROM {self.name} WHERE vector MATCH ? AND k = ?{clause}"
        try:
            rows = self._db.execute(sql, (q.tobytes(), k, *args)).fetchall()
        except _apsw().Error as exc:
            raise IndexBackendError(f"sqlite-vec {self.path}, table {self.name}: "
                                    f"{last_line(exc)}") from None
        got = np.asarray(rows, dtype=np.float64).reshape(-1, 2)
        # cosine distance = 1 - inner product on unit vectors
        return got[:, 0].astype(np.int64), (1.0 - got[:, 1]).astype(np.float32)

    def sizes(self) -> dict[str, int]:
        """Bytes of the database file (every build in it, SQLite does not split them)."""
        return {"total_bytes": self.path.stat().st_size}


class SqliteVecIndex(RemoteIndex[SqliteVecBuiltIndex]):
    """sqlite-vec ``vec0`` (exact scan; see the module docstring).

    query_params: only ``[{}]`` (no knobs). data_dir: the folder of the database file
    ``bench.sqlite``. busy_timeout_s: how long a build waits for another writer's lock.
    """

    engine = "sqlite-vec"
    serialised_builds = True

    def __init__(self, *, query_params: list[dict[str, int]] | None = None,
                 data_dir: str = ".cache/bench/sqlite_vec", busy_timeout_s: float = 60.0,
                 device: str = "cpu") -> None:
        if query_params is None:
            query_params = [{}]
        if query_params != [{}]:
            raise OptionError("query_params", f"sqlite-vec has no query knobs (an exact scan): "
                                              f"use [{{}}], got {query_params}")
        if not data_dir.strip():
            raise OptionError("data_dir", "must be a folder path")
        if busy_timeout_s <= 0:
            raise OptionError("busy_timeout_s", f"must be > 0, got {busy_timeout_s}")
        self._query_params = [{}]
        self.data_dir = data_dir
        self.busy_timeout_s = float(busy_timeout_s)
        self.device = device
        _apsw()  # a missing package is one line before any work

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        return {"kind": "sqlite_vec", "metric": "cosine"}

    @property
    def endpoint(self) -> str:
        return str(self._path())

    def _path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve() / DB_FILE

    def _connect(self, name: str) -> Connection:
        apsw = _apsw()
        import sqlite_vec

        path = self._path()
        t0 = time.perf_counter()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = apsw.Connection(str(path))
            db.set_busy_timeout(max(1, round(self.busy_timeout_s * 1000)))
            db.enable_load_extension(True)
            db.load_extension(sqlite_vec.loadable_path())
        except (apsw.Error, OSError) as exc:
            raise ConfigError("index.data_dir", f"cannot open sqlite-vec in {path}: "
                                                f"{last_line(exc)}") from None
        return Connection(db, None, time.perf_counter() - t0)

    def _errors(self) -> tuple[type[BaseException], ...]:
        return (_apsw().Error, OSError)

    # -- the template's hooks (bench.index.remote)

    def _ensure_markers(self, conn: Connection) -> None:
        conn.handle.execute(f"CREATE TABLE IF NOT EXISTS {MARKER} (name TEXT PRIMARY KEY, "
                            "key TEXT NOT NULL, n_rows INTEGER NOT NULL, params TEXT NOT NULL, "
                            "build_s REAL NOT NULL)")

    def _read_marker(self, conn: Connection, name: str) -> Marker | None:
        row = conn.handle.execute(f"SELECT key, n_rows, build_s FROM {MARKER} WHERE name = ?",
                                  (name,)).fetchone()
        return None if row is None else Marker(row[0], int(row[1]), float(row[2]))

    def _complete(self, conn: Connection, name: str, n: int) -> bool:
        there = conn.handle.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                    (name,)).fetchone()
        return there is not None and int(conn.handle.execute(
            f"SELECT count(*) FROM {name}").fetchone()[0]) == n

    @contextlib.contextmanager
    def _build_scope(self, conn: Connection, name: str) -> Iterator[None]:
        conn.handle.execute("BEGIN IMMEDIATE")  # the write lock: one builder at a time
        try:
            yield
        except BaseException:
            conn.handle.execute("ROLLBACK")
            raise
        conn.handle.execute("COMMIT")

    def _drop(self, conn: Connection, name: str) -> None:
        conn.handle.execute(f"DELETE FROM {MARKER} WHERE name = ?", (name,))
        conn.handle.execute(f"DROP TABLE IF EXISTS {name}")

    def _create(self, conn: Connection, name: str, dim: int, cols: tuple[str, ...]) -> None:
        meta = "".join(f", {c} integer" for c in cols)  # vec0 metadata: filtered in the scan
        conn.handle.execute(f"CREATE VIRTUAL TABLE {name} USING vec0(id integer primary key, "
                            f"vector float[{dim}] distance_metric=cosine{meta})")

    def _insert(self, conn: Connection, name: str, x: np.ndarray,
                attributes: Mapping[str, np.ndarray], cols: tuple[str, ...]) -> None:
        marks = ", ".join("?" * (2 + len(cols)))
        stmt = f"INSERT INTO {name} (id, vector{''.join(', ' + c for c in cols)}) " \
               f"VALUES ({marks})"
        for s in range(0, len(x), INSERT_BATCH):
            conn.handle.executemany(stmt, [
                (i, x[i].tobytes(), *(int(attributes[c][i]) for c in cols))
                for i in range(s, min(s + INSERT_BATCH, len(x)))])

    def _build_index(self, conn: Connection, name: str, n: int, cols: tuple[str, ...]
                     ) -> None:
        pass  # no ANN index: a KNN query scans the vector chunks

    def _write_marker(self, conn: Connection, name: str, marker: Marker, params: str) -> None:
        conn.handle.execute(f"INSERT INTO {MARKER} VALUES (?, ?, ?, ?, ?)",
                            (name, marker.key, marker.n_rows, params, marker.build_s))

    def _open(self, conn: Connection, name: str, *, key: str, x: np.ndarray,
              cols: tuple[str, ...], reused: bool) -> SqliteVecBuiltIndex:
        return SqliteVecBuiltIndex(conn, name=name, path=self._path(), endpoint=self.endpoint,
                                   key=key, n_rows=len(x), dim=x.shape[1], columns=cols,
                                   vectors=x, reused=reused)
