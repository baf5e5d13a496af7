"""pgvector in a real PostgreSQL server: HNSW (m, ef_construction; ef_search swept) and
IVFFlat (lists; probes swept), inner product on L2-normalised vectors (= cosine).

Server: by default bench starts its own server with the ``pgserver`` wheel (PostgreSQL with
pgvector bundled, no network) in ``data_dir``, lazily — at the first build or load — and
stops it when the process exits, also after an error. ``dsn=`` uses an existing server
instead; a refused connection is a config error naming ``index.dsn`` before any work.

Table and cache: a build is keyed like a faiss build — a hash of the vectors, their
attribute columns and the build options — and its table is named by that key
(``bench_<key>``). The whole build (``CREATE TABLE``, ``COPY``, ``CREATE INDEX``,
``ANALYZE``, and a row in ``bench_builds`` holding the row count and the key) is ONE
transaction, so a half-built table is never visible; a later run with the same build reuses
the table only when that marker row exists and the table's row count equals it. The bench
artifact holds ``table.json`` and the vectors (``vectors.npy``), so a cached artifact whose
table is gone (another server, a wiped data folder) is rebuilt rather than read wrong.

Queries: ``run_one`` and the batch path both send one SQL query per request
(``ORDER BY v <#> $1 LIMIT k``), so per-query latency is the database's round trip. Query
knobs are session settings (``hnsw.ef_search``, ``ivfflat.probes``) applied when they
change. pgvector's HNSW returns at most ``ef_search`` rows (a LIMIT above it comes back
short), and pgvector 0.6 filters AFTER the index scan (no iterative scans, 0.8+): with a
filter, PostgreSQL's planner picks either the ANN index (then post-filters, so narrow filters
return short lists) or an exact scan of the matching rows. ``force_index=1`` (a query knob)
disables sorts and sequential scans so the ANN index is used whatever the filter: the
post-filtered behaviour the selectivity table shows (docs/vector-databases.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import struct
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import BenchError, ConfigError, MissingDependencyError
from bench.index.base import auto_list_count
from bench.index.remote import (  # noqa: F401 - re-exported: their historical home
    MISSING_SCORE,
    Answer,
    Connection,
    IndexBackendError,
    Lost,
    Marker,
    RemoteBuiltIndex,
    RemoteIndex,
    ServerInfo,
    checked_query_params,
    process_memory_bytes,
)

log = logging.getLogger(__name__)

TABLE_FILE = "table.json"
MARKER_TABLE = "bench_builds"
METHODS = ("hnsw", "ivfflat")
#: query knobs per method (session settings), plus ``force_index`` for both
KNOBS = {"hnsw": ("ef_search", "force_index"), "ivfflat": ("probes", "force_index")}
#: pgvector's own limits (hnsw.c / ivfflat.c)
EF_SEARCH_RANGE = (1, 1000)
M_RANGE = (2, 100)
EF_CONSTRUCTION_RANGE = (4, 1000)
LISTS_RANGE = (1, 32768)
#: the automatic lists (null): faiss ivf_flat's rule, so the two IVF indexes are comparable
LISTS_FACTOR = 4.0


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise MissingDependencyError("psycopg[binary]", "vectordb", "index=pgvector_*") from None
    return psycopg


def _pg_last_line(exc: BaseException) -> str:
    """An error's message on one line: a psycopg error's primary message (its text goes on
    with the query and a caret line), else the first line of the text."""
    psycopg = _psycopg()
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        return str(exc.diag.message_primary)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def redact(dsn: str) -> str:
    """The DSN without its password (for messages and logs)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "password"}
        return make_conninfo(**{k: str(v) for k, v in parts.items()})
    except Exception:  # an unparsable DSN: say so without echoing it
        return "<unparsable dsn>"


# ------------------------------------------------------------------ the managed server


_SERVERS: dict[str, ServerInfo] = {}
#: the pgserver handles behind ``_SERVERS`` (their atexit hook stops each server)
_HANDLES: dict[str, Any] = {}


def managed_server(data_dir: str) -> ServerInfo:
    """The server in ``data_dir``, started on first use in this process (``pgserver``; it is
    stopped when the process exits, on errors too). IndexBackendError names
    ``index.data_dir`` when it cannot start."""
    folder = Path(data_dir).expanduser().resolve()
    got = _SERVERS.get(str(folder))
    if got is not None:
        return got
    try:
        import pgserver
    except ImportError:
        raise MissingDependencyError("pgserver", "vectordb", "index=pgvector_* without a dsn"
                                     ) from None
    fresh = not (folder / "PG_VERSION").exists()
    t0 = time.perf_counter()
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        srv = pgserver.get_server(folder, cleanup_mode="stop")
        uri, pid = srv.get_uri(), int(srv.get_pid() or 0)
    except Exception as exc:  # pgserver raises CalledProcessError / TimeoutExpired / OSError
        raise IndexBackendError(f"config key index.data_dir: PostgreSQL would not start in "
                                f"{folder}: {_pg_last_line(exc)} (see {folder / 'log'})") from None
    info = ServerInfo(str(folder), uri, pid, time.perf_counter() - t0, fresh)
    log.info("index: PostgreSQL started in %s in %.2f s (%s, pid %d)", folder, info.start_s,
             "initdb" if fresh else "existing data", pid)
    _SERVERS[str(folder)] = info
    _HANDLES[str(folder)] = srv
    return info


def stop_managed_server(data_dir: str) -> None:
    """Stop the server bench started in ``data_dir`` now instead of at exit (tests, and a
    caller done with it); a no-op when none runs there."""
    folder = str(Path(data_dir).expanduser().resolve())
    srv = _HANDLES.pop(folder, None)
    _SERVERS.pop(folder, None)
    if srv is not None:
        srv.cleanup()


# ------------------------------------------------------------------ wire format


def copy_binary(ids: np.ndarray, vectors: np.ndarray, attributes: list[np.ndarray]) -> bytes:
    """The PostgreSQL binary COPY stream of rows (id int4, v vector, attr int4...).

    Built with one structured numpy array instead of a Python loop: pgvector's binary form
    is int16 dim, int16 unused, then dim big-endian float4 (vector_recv), so the floats go
    over exactly as stored — no decimal round trip."""
    n, dim = vectors.shape
    fields: list[tuple[str, Any, Any]] = [("nf", ">i2", None), ("l0", ">i4", None),
                                           ("id", ">i4", None), ("l1", ">i4", None),
                                           ("dim", ">u2", None), ("unused", ">u2", None),
                                           ("v", ">f4", (dim,))]
    for j in range(len(attributes)):
        fields += [(f"la{j}", ">i4", None), (f"a{j}", ">i4", None)]
    dtype = np.dtype([(name, t) if shape is None else (name, t, shape)
                      for name, t, shape in fields])
    rows = np.zeros(n, dtype=dtype)
    rows["nf"] = 2 + len(attributes)
    rows["l0"] = 4
    rows["id"] = ids
    rows["l1"] = 4 + 4 * dim
    rows["dim"] = dim
    rows["v"] = vectors
    for j, a in enumerate(attributes):
        rows[f"la{j}"] = 4
        rows[f"a{j}"] = a
    header = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
    return header + rows.tobytes() + struct.pack(">h", -1)


class _Vec:
    """A query vector bound as a binary pgvector parameter (see ``_register_vector``)."""

    __slots__ = ("a",)

    def __init__(self, a: np.ndarray) -> None:
        self.a = a


def _register_vector(conn: Any) -> None:
    """Send ``_Vec`` parameters in pgvector's binary form (no text formatting per query)."""
    psycopg = _psycopg()
    from psycopg.adapt import Dumper
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise IndexBackendError("pgvector: the `vector` type is missing after CREATE EXTENSION")

    class VectorDumper(Dumper):
        format = psycopg.pq.Format.BINARY
        oid = info.oid

        def dump(self, obj: Any) -> bytes:
            a = obj.a
            return struct.pack(">HH", a.shape[0], 0) + a.astype(">f4").tobytes()

    conn.adapters.register_dumper(_Vec, VectorDumper)


# ------------------------------------------------------------------ the built index


class PgvectorBuiltIndex(RemoteBuiltIndex):
    """A built pgvector table on a live connection; one SQL query per query vector."""

    engine = "pgvector"

    def __init__(self, conn: Connection, *, method: str, reconnect: Any = None,
                 **kw: Any) -> None:
        super().__init__(conn=conn, **kw)
        self._conn = conn.handle
        #: a fresh connection after the server dropped this one (None: none is made)
        self._reconnect = reconnect
        self.method = method
        self._applied: dict[str, int | float] | None = None
        self._warned: set[str] = set()

    @property
    def table(self) -> str:
        return self.name

    def _check(self, params: Mapping[str, int | float]) -> None:
        allowed = KNOBS[self.method]
        for name in params:
            if name not in allowed:
                raise OptionError("query_params", f"{name!r} does not apply to pgvector "
                                                  f"{self.method} (knobs: {', '.join(allowed)})")

    def _apply(self, params: Mapping[str, int | float]) -> None:
        if params == self._applied:
            return
        self._check(params)
        # every knob set each time (defaults where not given): a search is stateless
        ef = int(params.get("ef_search", 40))
        probes = int(params.get("probes", 1))
        force = bool(params.get("force_index", 0))
        stmts = [f"SET hnsw.ef_search = {ef}" if self.method == "hnsw"
                 else f"SET ivfflat.probes = {probes}"]
        flag = "off" if force else "on"
        stmts += [f"SET enable_seqscan = {flag}", f"SET enable_sort = {flag}",
                  f"SET enable_bitmapscan = {flag}"]
        self._run(lambda: [self._conn.execute(s) for s in stmts])
        self._applied = dict(params)

    def _run(self, fn: Any) -> Any:
        psycopg = _psycopg()
        try:
            return fn()
        except psycopg.Error as exc:
            raise IndexBackendError(f"pgvector at {self.endpoint}: {_pg_last_line(exc)}"
                                    ) from None

    def _query(self, where: str | None, *, any_of: bool = False) -> Any:
        from psycopg import sql

        op = sql.SQL(" WHERE {} = ANY(%s)" if any_of else " WHERE {} = %s")
        filt = sql.SQL("") if where is None else op.format(sql.Identifier(where))
        # ORDER BY the operator expression itself: that is what the ANN index can serve
        return sql.SQL("SELECT id, v <#> %s FROM {t}{w} ORDER BY v <#> %s LIMIT %s").format(
            t=sql.Identifier(self.table), w=filt)

    def _prepare(self, k: int, params: Mapping[str, int | float], column: str | None,
                 any_of: bool) -> Any:
        self._check(params)
        return params, self._query(column, any_of=any_of)

    def _where(self, column: str, value: int) -> Any:
        return value

    def _where_in(self, column: str, values: list[int]) -> Any:
        return values  # `= ANY(int8[])`

    def _one(self, state: Any, q: np.ndarray, k: int, where: Any) -> Answer:
        params, stmt = state
        v = _Vec(q)
        rows = self._request(params, stmt, (v, v, k) if where is None else (v, where, v, k))
        if not rows:
            return [], []
        got = np.asarray(rows, dtype=np.float64)
        # <#> is -inner product
        return got[:, 0].astype(np.int64), (-got[:, 1]).astype(np.float32)

    def _request(self, params: Mapping[str, int | float], stmt: Any, args: tuple[Any, ...]
                 ) -> list[Any]:
        """One query's rows. A lost connection (the server died or was restarted) or a
        statement timeout is that query's status (``Lost``), logged once per kind, and the
        next query reconnects; any other refusal is an ``IndexBackendError`` (one line)."""
        psycopg = _psycopg()
        if self._conn.closed:
            self._connect_again()
        try:
            self._apply(params)
            return list(self._conn.execute(stmt, args).fetchall())
        except psycopg.errors.QueryCanceled as exc:  # statement_timeout
            self._warn("timeout", exc)
            raise Lost("timeout") from None
        except psycopg.OperationalError as exc:  # connection lost, server shutting down
            self._warn("failed", exc)
            self._applied = None
            with contextlib.suppress(Exception):
                self._conn.close()
            raise Lost("failed") from None
        except psycopg.Error as exc:
            raise IndexBackendError(f"pgvector at {self.endpoint}: {_pg_last_line(exc)}"
                                    ) from None

    def _connect_again(self) -> None:
        if self._reconnect is None:
            raise Lost("failed")
        try:
            self._conn = self._reconnect()
        except BenchError as exc:  # still refused: this query fails too
            self._warn("failed", exc)
            raise Lost("failed") from None
        self._applied = None
        log.warning("index: pgvector at %s: reconnected", self.endpoint)

    def _warn(self, status: str, exc: BaseException) -> None:
        if status not in self._warned:
            self._warned.add(status)
            text = exc.one_line() if isinstance(exc, BenchError) else _pg_last_line(exc)
            log.warning("index: pgvector at %s: a query %s (%s); its queries get status %s",
                        self.endpoint, "timed out" if status == "timeout" else "failed",
                        text, status)

    def plan(self, query: np.ndarray, k: int, params: Mapping[str, int | float], *,
             column: str | None = None, value: int | None = None) -> str:
        """The scan PostgreSQL's planner picks for this query (its EXPLAIN lines joined):
        whether the ANN index serves a filtered query or an exact scan does."""
        self._apply(params)
        v = _Vec(np.ascontiguousarray(query, dtype=np.float32))
        args = (v, v, k) if column is None else (v, value, v, k)
        from psycopg import sql

        stmt = sql.SQL("EXPLAIN ") + self._query(column)
        rows = self._run(lambda: self._conn.execute(stmt, args).fetchall())
        return " / ".join(str(r[0]).strip() for r in rows)

    def sizes(self) -> dict[str, int]:
        """Bytes on disk: the table with its indexes and TOAST, and the ANN index alone."""
        row = self._run(lambda: self._conn.execute(
            "SELECT pg_total_relation_size(%s::regclass), pg_relation_size(%s::regclass)",
            (self.table, f"{self.table}_ann")).fetchone())
        return {"total_bytes": int(row[0]), "ann_index_bytes": int(row[1])}

    def server_memory(self) -> dict[str, int]:
        """The bench-started server's RSS / PSS (zeros for a ``dsn=`` server: not ours)."""
        if self.server is None:
            return {"rss_bytes": 0, "pss_bytes": 0}
        return process_memory_bytes(self.server.pid)

    def _save_extra(self) -> dict[str, Any]:
        return {"method": self.method}


# ------------------------------------------------------------------ the index option


class PgvectorIndex(RemoteIndex[PgvectorBuiltIndex]):
    """pgvector HNSW or IVFFlat in PostgreSQL (see the module docstring).

    method: hnsw | ivfflat. m, ef_construction: HNSW build options (pgvector's defaults
    16, 64). lists: IVFFlat lists; null = auto = round(4 * sqrt(N)) clamped to
    [1, N // 39] (faiss ivf_flat's rule). query_params: swept on the one built table, each
    a mapping of ``ef_search`` (hnsw) / ``probes`` (ivfflat) and optionally ``force_index``
    (0 | 1). dsn: an existing server (libpq connection string or URI); null = bench starts
    one in ``data_dir``. maintenance_work_mem: the build's memory (pgvector builds HNSW much
    faster when the graph fits). connect_timeout_s: how long a connection may take.
    statement_timeout_s: the longest one search may run (PostgreSQL ``statement_timeout``;
    a search cut there is that query's status ``timeout``; null: no limit).
    """

    engine = "pgvector"
    reserved = ("id", "v")
    #: one builder per table at a time (an advisory lock: parallel workers share a server)
    serialised_builds = True

    def __init__(
        self,
        *,
        method: str = "hnsw",
        m: int = 16,
        ef_construction: int = 64,
        lists: int | None = None,
        query_params: list[dict[str, int]] | None = None,
        dsn: str | None = None,
        data_dir: str = ".cache/bench/pgvector",
        maintenance_work_mem: str = "512MB",
        connect_timeout_s: float = 5.0,
        statement_timeout_s: float | None = None,
        device: str = "cpu",
    ) -> None:
        if method not in METHODS:
            raise OptionError("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
        if not M_RANGE[0] <= m <= M_RANGE[1]:
            raise OptionError("m", f"must be in [{M_RANGE[0]}, {M_RANGE[1]}], got {m}")
        lo, hi = EF_CONSTRUCTION_RANGE
        if not lo <= ef_construction <= hi:
            raise OptionError("ef_construction", f"must be in [{lo}, {hi}], got "
                                                 f"{ef_construction}")
        if ef_construction < 2 * m:
            raise OptionError("ef_construction", f"must be >= 2 * m = {2 * m} (pgvector)")
        if lists is not None and not LISTS_RANGE[0] <= lists <= LISTS_RANGE[1]:
            raise OptionError("lists", f"must be in [{LISTS_RANGE[0]}, {LISTS_RANGE[1]}] or null "
                                       f"(auto), got {lists}")
        query_params = checked_query_params(
            query_params, KNOBS[method], what=f"method={method}", flags=("force_index",),
            ranges={"ef_search": EF_SEARCH_RANGE})
        if connect_timeout_s <= 0:
            raise OptionError("connect_timeout_s", f"must be > 0, got {connect_timeout_s}")
        if statement_timeout_s is not None and statement_timeout_s <= 0:
            raise OptionError("statement_timeout_s", f"must be > 0 or null, got "
                                                     f"{statement_timeout_s}")
        if not maintenance_work_mem.strip() or not all(
                c.isalnum() for c in maintenance_work_mem.strip()):
            raise OptionError("maintenance_work_mem", f"must be a size like 512MB, got "
                                                      f"{maintenance_work_mem!r}")
        self.method = method
        self.m = m
        self.ef_construction = ef_construction
        self.lists = lists
        self._query_params = query_params
        self.dsn = dsn
        self.data_dir = data_dir
        self.maintenance_work_mem = maintenance_work_mem.strip()
        self.connect_timeout_s = float(connect_timeout_s)
        self.statement_timeout_s = statement_timeout_s
        self.device = device
        if device == "cuda":
            log.info("index: pgvector runs in the PostgreSQL server on its CPUs; device=cuda "
                     "does not apply to it")
        if dsn is not None:
            # refuse an unreachable server now: one line naming the key, before any work
            self._connect("").handle.close()

    # -- options

    def resolve_lists(self, n_vectors: int) -> int:
        if self.lists is not None:
            return self.lists
        return auto_list_count(n_vectors, LISTS_FACTOR)

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        params: dict[str, object] = {"kind": "pgvector", "method": self.method}
        if self.method == "hnsw":
            params.update(m=self.m, ef_construction=self.ef_construction)
        else:
            params["lists"] = (self.resolve_lists(n_vectors) if n_vectors is not None
                               else self.lists if self.lists is not None else "auto")
        return params

    @property
    def endpoint(self) -> str:
        return redact(self.dsn) if self.dsn is not None else f"bench's server in {self.data_dir}"

    # -- connection

    def _connect(self, name: str) -> Connection:
        psycopg = _psycopg()
        server = None
        if self.dsn is None:
            server = managed_server(self.data_dir)
            uri, key = server.uri, "index.data_dir"
        else:
            uri, key = self.dsn, "index.dsn"
        t0 = time.perf_counter()
        try:
            # prepare_threshold=None: never a server-side prepared statement. psycopg prepares
            # a query run 5 times, and PostgreSQL then switches a filtered query to a generic
            # plan that ignores the filter value's selectivity: measured here, a 1 % filter
            # returned 10 rows for the first 10 queries and 0-1 after (ANN index + post-filter
            # instead of an exact scan). Custom plans make the planner's choice per query.
            conn = psycopg.connect(uri, autocommit=True, prepare_threshold=None,
                                   connect_timeout=max(1, math.ceil(self.connect_timeout_s)))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            _register_vector(conn)
            if self.statement_timeout_s is not None:  # a slower search is status timeout
                conn.execute(f"SET statement_timeout = "
                             f"{max(1, round(self.statement_timeout_s * 1000))}")
        except psycopg.Error as exc:
            raise ConfigError(key, f"cannot use PostgreSQL at {self.endpoint}: "
                                   f"{_pg_last_line(exc)}") from None
        return Connection(conn, server, time.perf_counter() - t0)

    def _errors(self) -> tuple[type[BaseException], ...]:
        return (_psycopg().Error,)

    def _last_line(self, exc: BaseException) -> str:
        return _pg_last_line(exc)

    # -- the template's hooks (bench.index.remote)

    def _ensure_markers(self, conn: Connection) -> None:
        conn.handle.execute(
            f"CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (name text PRIMARY KEY, key text NOT "
            "NULL, n_rows bigint NOT NULL, params text NOT NULL, build_s float8 NOT NULL)")

    def _read_marker(self, conn: Connection, name: str) -> Marker | None:
        row = conn.handle.execute(f"SELECT key, n_rows, build_s FROM {MARKER_TABLE} WHERE "
                                  "name = %s", (name,)).fetchone()
        return None if row is None else Marker(row[0], int(row[1]), float(row[2]))

    def _complete(self, conn: Connection, name: str, n: int) -> bool:
        from psycopg import sql

        if conn.handle.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is None:
            return False  # the marker outlived its table (dropped by hand)
        count = conn.handle.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name))).fetchone()
        return int(count[0]) == n

    @contextlib.contextmanager
    def _build_scope(self, conn: Connection, name: str) -> Iterator[None]:
        # the whole build is ONE transaction: a half-built table is never visible
        with conn.handle.transaction():
            conn.handle.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))
            conn.handle.execute("SET LOCAL statement_timeout = 0")  # a search limit only
            yield

    def _drop(self, conn: Connection, name: str) -> None:
        from psycopg import sql

        conn.handle.execute(f"DELETE FROM {MARKER_TABLE} WHERE name = %s", (name,))
        conn.handle.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))

    def _create(self, conn: Connection, name: str, dim: int, cols: tuple[str, ...]) -> None:
        from psycopg import sql

        extra = sql.SQL("").join(sql.SQL(", {} int4 NOT NULL").format(sql.Identifier(c))
                                 for c in cols)
        conn.handle.execute(sql.SQL("CREATE TABLE {} (id int4 PRIMARY KEY, v vector({}) NOT "
                                    "NULL{})").format(sql.Identifier(name), sql.Literal(dim),
                                                      extra))

    def _insert(self, conn: Connection, name: str, x: np.ndarray,
                attributes: Mapping[str, np.ndarray], cols: tuple[str, ...]) -> None:
        from psycopg import sql

        names = sql.SQL(", ").join(sql.Identifier(c) for c in ("id", "v", *cols))
        payload = copy_binary(np.arange(len(x), dtype=np.int32), x,
                              [attributes[c] for c in cols])
        with conn.handle.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)"
                                               ).format(sql.Identifier(name), names)) as cp:
            step = 1 << 24
            for s in range(0, len(payload), step):
                cp.write(payload[s:s + step])

    def _build_index(self, conn: Connection, name: str, n: int, cols: tuple[str, ...]
                     ) -> None:
        from psycopg import sql

        t = sql.Identifier(name)
        conn.handle.execute(sql.SQL("SET LOCAL maintenance_work_mem = {}").format(
            sql.Literal(self.maintenance_work_mem)))
        conn.handle.execute(self._index_ddl(name, n))
        for c in cols:  # what a real schema has on a filter column
            conn.handle.execute(sql.SQL("CREATE INDEX {} ON {} ({})").format(
                sql.Identifier(f"{name}_{c}"), t, sql.Identifier(c)))
        conn.handle.execute(sql.SQL("ANALYZE {}").format(t))

    def _write_marker(self, conn: Connection, name: str, marker: Marker, params: str) -> None:
        conn.handle.execute(f"INSERT INTO {MARKER_TABLE} VALUES (%s, %s, %s, %s, %s)",
                            (name, marker.key, marker.n_rows, params, marker.build_s))

    def _open(self, conn: Connection, name: str, *, key: str, x: np.ndarray,
              cols: tuple[str, ...], reused: bool) -> PgvectorBuiltIndex:
        return PgvectorBuiltIndex(conn, name=name, method=self.method, endpoint=self.endpoint,
                                  n_rows=len(x), dim=x.shape[1], key=key, columns=cols,
                                  reused=reused, vectors=x,
                                  reconnect=lambda: self._connect(name).handle)

    def _index_ddl(self, table: str, n: int) -> Any:
        from psycopg import sql

        if self.method == "hnsw":
            opts = sql.SQL("m = {}, ef_construction = {}").format(
                sql.Literal(self.m), sql.Literal(self.ef_construction))
            using = "hnsw"
        else:
            opts = sql.SQL("lists = {}").format(sql.Literal(self.resolve_lists(n)))
            using = "ivfflat"
        return sql.SQL("CREATE INDEX {} ON {} USING {} (v vector_ip_ops) WITH ({})").format(
            sql.Identifier(f"{table}_ann"), sql.Identifier(table), sql.SQL(using), opts)
