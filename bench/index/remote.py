"""The template every database backend is built on (pgvector, Milvus, Qdrant, LanceDB,
sqlite-vec): the build's content key, its completion marker, the verification that makes a
stored table safe to reuse, the build order, the artifact, and the per-query search loop live
here once; an engine module implements only its hooks.

Build (``RemoteIndex``): a build is keyed by ``bench.index.base.build_key`` (the resolved
build options from ``cache_params``, the vectors and the attribute columns) and stored under
the name ``bench_<24 hex of the key>``. It is reused only when the engine's marker for that
name records the same key and row count AND the stored table is complete by the engine's own
check (``_complete``: row count, index); anything else is dropped and rebuilt in the order
create -> insert -> build index -> open, and the marker is written LAST, so its presence
means every earlier step succeeded. The artifact holds ``<noun>.json`` and the vectors, so
a cached artifact whose table is gone (another server, a wiped folder) is rebuilt, never
read half-built.

Search (``RemoteBuiltIndex``): one request per query vector, for the batch and the per-query
path alike, so a per-query latency is the engine's round trip. A plain, an equality-filtered
(``search_where``) and a set-filtered (``search_where_in``) search share one loop; the engine
turns a filter into its own expression (SQL ``WHERE``, a Milvus boolean expression, a Qdrant
``Filter``, a LanceDB ``where``) so the engine filters, never bench in Python. A query the
engine could not answer (lost connection, timeout) is that query's status (``Lost``), never
an exception that loses the batch.

To add an engine: subclass ``RemoteBuiltIndex`` (``_prepare``, ``_where``, ``_where_in``,
``_one``) and ``RemoteIndex`` (``cache_params``, ``_connect``, ``_ensure_markers``,
``_read_marker``, ``_complete``, ``_drop``, ``_create``, ``_insert``, ``_build_index``,
``_write_marker``, ``_open``), add ``conf/index/<name>.yaml``; ``bench/index/sqlite_vec.py``
is the shortest example.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from bench.config.build import OptionError
from bench.errors import ServiceError
from bench.index.base import BuildInfo, SearchResult, build_key

log = logging.getLogger(__name__)

VECTORS_FILE = "vectors.npy"
#: one request's answer: (ids, inner-product scores), at most k of each
Answer = tuple[np.ndarray | Sequence[Any], np.ndarray | Sequence[Any]]
#: score of a missing result, as faiss pads: the lowest finite float32
MISSING_SCORE = float(np.finfo(np.float32).min)


class IndexBackendError(ServiceError):
    """A database backend failed (server would not start, connection lost, query refused):
    one line naming the config key or endpoint, exit 2."""


class Lost(Exception):
    """One query the engine did not answer; ``status`` is ``failed`` or ``timeout``."""

    def __init__(self, status: str) -> None:
        self.status = status


def last_line(exc: BaseException) -> str:
    """An error's message on one line (a client's text often goes on with a traceback)."""
    msg = getattr(exc, "message", None)
    text = str(msg if isinstance(msg, str) and msg else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def folder_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (a Lance table is a folder of fragments)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@dataclass(frozen=True)
class ServerInfo:
    """A server bench started: where, how long the start took, whether it was initialised
    by this start, and its pid (for its memory)."""

    data_dir: str
    uri: str
    pid: int
    start_s: float
    initialised: bool


def process_memory_bytes(pid: int) -> dict[str, int]:
    """RSS and PSS of a process and its children (a PostgreSQL server is a postmaster and
    its backends). PSS shares each shared page (shared_buffers) among the processes mapping
    it, so its sum is the server's real footprint; summed RSS counts shared pages once per
    process and overstates it."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {"rss_bytes": 0, "pss_bytes": 0}
    rss = pss = 0
    for p in procs:
        try:
            full = p.memory_full_info()
        except psutil.Error:
            continue
        rss += int(full.rss)
        pss += int(full.pss)  # Linux: from /proc/<pid>/smaps_rollup
    return {"rss_bytes": rss, "pss_bytes": pss}


def checked_query_params(query_params: list[dict[str, int]] | None, knobs: Sequence[str], *,
                         what: str, flags: Sequence[str] = (),
                         ranges: Mapping[str, tuple[int, int]] | None = None
                         ) -> list[dict[str, int]]:
    """An option's query-time settings (null = ``[{}]``, the engine's defaults): each knob one
    of ``knobs`` (``what`` says for which index), a flag 0 or 1, any other an int in its
    ``ranges`` entry (default >= 1). OptionError names ``query_params[i].<knob>``."""
    if query_params is None:
        return [{}]
    if not query_params:
        raise OptionError("query_params", "must list at least one query-time setting; use "
                                          "[{}] for the engine's defaults")
    for i, qp in enumerate(query_params):
        for name, value in qp.items():
            key = f"query_params[{i}].{name}"
            if name not in knobs:
                raise OptionError(key, f"unknown for {what}; allowed: {', '.join(knobs)}")
            if name in flags:
                if value not in (0, 1):
                    raise OptionError(key, f"must be 0 or 1, got {value}")
                continue
            lo, hi = (ranges or {}).get(name, (1, 0))
            if int(value) < lo or (hi and int(value) > hi):
                raise OptionError(key, f"must be in [{lo}, {hi}], got {value}" if hi
                                  else f"must be >= {lo}, got {value}")
    return [dict(q) for q in query_params]


@dataclass(frozen=True)
class Marker:
    """A build's completion record, as the engine stores it."""

    key: str
    n_rows: int
    build_s: float


@dataclass(frozen=True)
class Connection:
    """An engine's open handle (connection, client or database), the server bench started
    for it (None: a user's server, or an embedded engine) and how long connecting took."""

    handle: Any
    server: ServerInfo | None
    connect_s: float


# ------------------------------------------------------------------ the built index


class RemoteBuiltIndex(ABC):
    """A complete stored build; ``search`` / ``search_where`` / ``search_where_in`` send one
    request per query vector through the engine's hooks."""

    #: the engine's name in messages; what the stored build is called in it
    engine: ClassVar[str]
    noun: ClassVar[str] = "table"

    def __init__(self, *, name: str, endpoint: str, key: str, n_rows: int, dim: int,
                 columns: tuple[str, ...], vectors: np.ndarray, conn: Connection,
                 reused: bool) -> None:
        self.name = name
        self.endpoint = endpoint
        self.key = key
        self.n_rows = n_rows
        self.dim = dim
        self.columns = columns
        #: kept for ``save``: the artifact can rebuild the table if the engine loses it
        self._vectors = vectors
        self.server = conn.server
        self.connect_s = conn.connect_s
        self.reused = reused

    # -- hooks

    @abstractmethod
    def _prepare(self, k: int, params: Mapping[str, int | float], column: str | None,
                 any_of: bool) -> Any:
        """Check ``params`` (OptionError naming ``query_params``) and ``k``; the state one
        batch's requests share (search parameters, a statement)."""

    @abstractmethod
    def _where(self, column: str, value: int) -> Any:
        """The engine's filter for ``column == value``."""

    @abstractmethod
    def _where_in(self, column: str, values: list[int]) -> Any:
        """The engine's filter for ``column`` in ``values`` (never empty)."""

    @abstractmethod
    def _one(self, state: Any, q: np.ndarray, k: int, where: Any) -> Answer:
        """One request: (ids, inner-product scores) of at most ``k`` hits. ``Lost`` for a
        query the engine did not answer, IndexBackendError for a refusal."""

    @abstractmethod
    def sizes(self) -> dict[str, int]:
        """Bytes on disk (``total_bytes``; 0 where the engine does not say)."""

    def _save_extra(self) -> dict[str, Any]:
        """Engine fields of the artifact's JSON (its index type)."""
        return {}

    # -- template

    def _search(self, queries: np.ndarray, k: int, params: Mapping[str, int | float],
                column: str | None, values: np.ndarray | Sequence[np.ndarray] | None
                ) -> SearchResult:
        any_of = values is not None and not isinstance(values, np.ndarray)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"need [n_q, {self.dim}] queries, got {queries.shape}")
        if column is not None and column not in self.columns:
            raise ValueError(f"{self.noun} has no attribute column {column!r} (has "
                             f"{list(self.columns)})")
        state = self._prepare(k, params, column, any_of)
        q = np.ascontiguousarray(queries, dtype=np.float32)
        n_q = q.shape[0]
        ids = np.full((n_q, k), -1, dtype=np.int64)
        scores = np.full((n_q, k), MISSING_SCORE, dtype=np.float32)
        lost: dict[int, str] = {}
        for i in range(n_q):
            if values is None or column is None:
                where = None
            elif not any_of:
                where = self._where(column, int(values[i]))
            elif len(values[i]) == 0:  # nothing this query may see: no request
                continue
            else:
                where = self._where_in(column, [int(a) for a in values[i]])
            try:
                got_ids, got_scores = self._one(state, q[i], k, where)
            except Lost as exc:
                lost[i] = exc.status
                continue
            n = len(got_ids)
            if n:
                ids[i, :n] = got_ids
                scores[i, :n] = got_scores
        return SearchResult(ids=ids, scores=scores, incomplete=lost)

    def search(self, queries: np.ndarray, k: int,
               params: Mapping[str, int | float]) -> SearchResult:
        return self._search(queries, k, params, None, None)

    def search_where(self, queries: np.ndarray, k: int, params: Mapping[str, int | float], *,
                     column: str, values: np.ndarray) -> SearchResult:
        if len(values) != len(queries):
            raise ValueError(f"{len(values)} filter values for {len(queries)} queries")
        return self._search(queries, k, params, column, values)

    def search_where_in(self, queries: np.ndarray, k: int, params: Mapping[str, int | float],
                        *, column: str, allowed: Sequence[np.ndarray]) -> SearchResult:
        if len(allowed) != len(queries):
            raise ValueError(f"{len(allowed)} filter sets for {len(queries)} queries")
        return self._search(queries, k, params, column, list(allowed))

    def save(self, directory: Path) -> None:
        (directory / f"{self.noun}.json").write_text(json.dumps({
            self.noun: self.name, "key": self.key, "n_rows": self.n_rows, "dim": self.dim,
            **self._save_extra(), "columns": list(self.columns)}))
        np.save(directory / VECTORS_FILE, self._vectors, allow_pickle=False)


B = TypeVar("B", bound=RemoteBuiltIndex)


# ------------------------------------------------------------------ the index option


class RemoteIndex(ABC, Generic[B]):
    """An index option stored in a database engine (see the module docstring). Subclasses
    validate their options in ``__init__`` (OptionError naming the key) and set
    ``_query_params``."""

    exact = False
    #: the engine's name in messages and the stored build's noun (the artifact's JSON name)
    engine: ClassVar[str]
    noun: ClassVar[str] = "table"
    #: column names the engine's own schema uses
    reserved: ClassVar[tuple[str, ...]] = ("id", "vector")
    min_dim: ClassVar[int] = 1
    #: builds of one name are serialised by the engine (a lock inside ``_build_scope``):
    #: verify again once it is held, another process may have finished the build
    serialised_builds: ClassVar[bool] = False
    _query_params: list[dict[str, int]]

    # -- hooks

    @abstractmethod
    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        """The resolved build options (part of the content key: never change a shipped one)."""

    @property
    @abstractmethod
    def endpoint(self) -> str:
        """Where the engine is, for messages (no secrets)."""

    @abstractmethod
    def _connect(self, name: str) -> Connection:
        """Open the engine for the build ``name``: ConfigError naming the key when refused."""

    @abstractmethod
    def _ensure_markers(self, conn: Connection) -> None:
        """Create the marker store if it is missing."""

    @abstractmethod
    def _read_marker(self, conn: Connection, name: str) -> Marker | None:
        """The marker of ``name``, or None."""

    @abstractmethod
    def _complete(self, conn: Connection, name: str, n: int) -> bool:
        """Whether the stored ``name`` exists, holds exactly ``n`` rows and has the index
        these options build."""

    @abstractmethod
    def _drop(self, conn: Connection, name: str) -> None:
        """Remove the marker of ``name``, then ``name`` itself; either may be missing."""

    @abstractmethod
    def _create(self, conn: Connection, name: str, dim: int, cols: tuple[str, ...]) -> None:
        """Create the empty table: int id, the vector, one int32 column per ``cols``."""

    @abstractmethod
    def _insert(self, conn: Connection, name: str, x: np.ndarray,
                attributes: Mapping[str, np.ndarray], cols: tuple[str, ...]) -> None:
        """Store row i as id i with ``x[i]`` and its attribute values."""

    @abstractmethod
    def _build_index(self, conn: Connection, name: str, n: int, cols: tuple[str, ...]
                     ) -> None:
        """Build the ANN index (and the attribute indexes a real schema has)."""

    @abstractmethod
    def _write_marker(self, conn: Connection, name: str, marker: Marker, params: str) -> None:
        """Record ``name`` as complete (``params``: the JSON of ``cache_params``)."""

    @abstractmethod
    def _open(self, conn: Connection, name: str, *, key: str, x: np.ndarray,
              cols: tuple[str, ...], reused: bool) -> B:
        """The searchable build (load it into memory where the engine needs that)."""

    def _errors(self) -> tuple[type[BaseException], ...]:
        """The client's exceptions that a build step turns into one line."""
        return (OSError, RuntimeError, ValueError)

    def _last_line(self, exc: BaseException) -> str:
        return last_line(exc)

    @contextlib.contextmanager
    def _build_scope(self, conn: Connection, name: str) -> Iterator[None]:
        """Around one build (pgvector: a transaction holding an advisory lock)."""
        yield

    def _check_vectors(self, x: np.ndarray) -> None:
        """Engine limits on the vectors beyond ``min_dim`` (OptionError / ValueError)."""

    # -- template

    def query_params(self) -> list[dict[str, int | float]]:
        return [dict(q) for q in self._query_params]

    def content_key(self, vectors: np.ndarray, attributes: Mapping[str, np.ndarray]) -> str:
        """The build's key: vectors, attribute columns and resolved build options."""
        return build_key(self.cache_params(len(vectors)), vectors, attributes)

    def build(self, vectors: np.ndarray) -> tuple[B, BuildInfo]:
        return self.build_with_attributes(vectors, {})

    def build_with_attributes(self, vectors: np.ndarray, attributes: Mapping[str, np.ndarray]
                              ) -> tuple[B, BuildInfo]:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < self.min_dim:
            raise ValueError(f"need [N >= 1, d >= {self.min_dim}] vectors, got {x.shape}")
        self._check_vectors(x)
        for name, a in attributes.items():
            if not name.isidentifier() or name in self.reserved:
                raise ValueError(f"attribute column name {name!r} is not usable")
            if len(a) != len(x):
                raise ValueError(f"attribute {name!r} has {len(a)} values for {len(x)} rows")
        key = self.content_key(x, attributes)
        built, build_s = self._ensure(x, key, {k: np.asarray(v, dtype=np.int32)
                                               for k, v in attributes.items()})
        size = built.sizes()["total_bytes"]
        return built, BuildInfo(build_s, size, int(x.shape[0]), int(x.shape[1]))

    def load(self, directory: Path) -> B:
        meta = json.loads((directory / f"{self.noun}.json").read_text())
        x = np.load(directory / VECTORS_FILE, allow_pickle=False)
        if meta["columns"]:
            raise ValueError(f"a cached {self.engine} artifact has attribute columns: bench's "
                             "pipeline builds none")
        key = self.content_key(x, {})
        if key != meta["key"]:
            raise ValueError(f"{directory}: the saved vectors do not match the {self.noun} key "
                             "(a damaged artifact)")
        built, _ = self._ensure(x, key, {})
        return built

    def drop(self, name: str) -> None:
        """Remove a stored build and its marker (tests and clean-ups)."""
        conn = self._connect(name)
        self._step("drop", name, lambda: self._drop(conn, name))

    def _step(self, what: str, name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except self._errors() as exc:
            raise IndexBackendError(f"{self.engine} at {self.endpoint}, {what} of {name}: "
                                    f"{self._last_line(exc)}") from None

    def _verified(self, conn: Connection, name: str, key: str, n: int) -> float | None:
        """The recorded build time when ``name`` is complete, else None."""
        marker = self._step("marker lookup", name, lambda: self._read_marker(conn, name))
        if marker is None or marker.key != key or marker.n_rows != n:
            return None
        if not self._step("verification", name, lambda: self._complete(conn, name, n)):
            return None
        return marker.build_s

    def _ensure(self, x: np.ndarray, key: str, attributes: Mapping[str, np.ndarray]
                ) -> tuple[B, float]:
        """The verified build of ``key``: reused when complete, else (re)built. Returns it
        and its build time (the original one when reused)."""
        name = f"bench_{key[:24]}"
        n, cols = len(x), tuple(sorted(attributes))
        conn = self._connect(name)
        self._step("the marker store", name, lambda: self._ensure_markers(conn))
        done = self._verified(conn, name, key, n)
        if done is not None:
            log.info("index: reusing complete %s %s %s (%d rows)", self.engine, self.noun,
                     name, n)
            return self._step("open", name, lambda: self._open(
                conn, name, key=key, x=x, cols=cols, reused=True)), done
        t0 = time.perf_counter()
        with self._build_scope(conn, name):
            if self.serialised_builds:
                done = self._verified(conn, name, key, n)
                if done is not None:  # another process built it while this one waited
                    return self._step("open", name, lambda: self._open(
                        conn, name, key=key, x=x, cols=cols, reused=True)), done
            self._step("drop", name, lambda: self._drop(conn, name))
            self._step("create", name, lambda: self._create(conn, name, x.shape[1], cols))
            self._step("insert", name, lambda: self._insert(conn, name, x, attributes, cols))
            self._step("index build", name, lambda: self._build_index(conn, name, n, cols))
            built = self._step("open", name, lambda: self._open(
                conn, name, key=key, x=x, cols=cols, reused=False))
            build_s = time.perf_counter() - t0
            # written last: its presence means every step above succeeded
            self._step("marker", name, lambda: self._write_marker(
                conn, name, Marker(key, n, build_s), json.dumps(self.cache_params(n))))
        log.info("index: built %s %s %s over %d x %d vectors in %.2f s", self.engine,
                 self.noun, name, n, x.shape[1], build_s)
        return built, build_s
