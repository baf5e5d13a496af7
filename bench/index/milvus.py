"""Milvus as an index backend through ``pymilvus``: HNSW (M, efConstruction; ef swept) and
IVF_FLAT (nlist; nprobe swept), inner product on L2-normalised vectors (= cosine).

Server: ``uri=`` names a Milvus server (``http://host:19530``, Zilliz Cloud, a GPU box), with
the token read from the environment variable ``token_env`` (never from the config); a server
that does not answer is a config error naming ``index.uri`` before any work. ``uri: null``
starts **Milvus Lite** here: the ``milvus`` server binary shipped in the ``milvus-lite`` 2.x
wheel (Milvus's own segcore and Knowhere, a separate process on a unix socket), one server per
build, on the database file ``data_dir/<collection>.db``; bench starts it at the first build
or load and it stops when this process exits (the binary watches a file lock bench holds).
What Milvus Lite does NOT do, measured here (docs/vector-databases.md): it refuses HNSW
("local mode only support FLAT IVF_FLAT AUTOINDEX") and, while it accepts IVF_FLAT, it
searches exactly (recall 1.000 at nprobe 1 of 256 lists on 30,000 random vectors): its one
growing segment is never indexed. So a Milvus Lite run tests bench's Milvus client end to end
(collections, inserts, index DDL, filter expressions, reuse) but its recall is exact search,
not Milvus's ANN; ANN figures need a Milvus server (``uri=``).

Collection and cache: the template of ``bench.index.remote`` — a build is keyed by a hash of
the vectors, their attribute columns and the build options (``bench.index.base.build_key``),
its collection is named by the key (``bench_<24 hex>``), and a row in the marker collection
``bench_builds`` (key, row count, build time), written after the data is flushed, indexed
and loaded, says it is complete. A later build reuses the collection only when the marker
names the same key and row count, the collection holds exactly that many rows and its vector
index is the one asked for; anything else is dropped and rebuilt. The artifact keeps the
vectors, so a lost collection is rebuilt, never read half-built. Milvus has no cross-client
lock: two processes building the same collection on one server at once are not serialised
(Milvus Lite's file lock refuses a second process outright).

Queries: one search request per query (``run_one`` and batch alike) at ``Eventually``
consistency: the build flushed, indexed and loaded every row before its marker was written, so
every row is visible, and ``Strong`` would make each request wait for Milvus's time tick
(measured on an embedded Milvus 2.3.5 standalone: p50 200-400 ms a request instead of ms).
Milvus refuses an HNSW ``ef`` below the LIMIT; bench raises it to the LIMIT and says so once.
Filters are Milvus boolean expressions (``b10 == 3``; a set: ``b10 in [1, 4]``) in the search
request: the engine filters inside the ANN search (a bitset of eligible rows), never bench in
Python.
"""

from __future__ import annotations

import atexit
import fcntl
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import ConfigError, MissingDependencyError
from bench.index.base import auto_list_count
from bench.index.remote import (
    Answer,
    Connection,
    IndexBackendError,
    Marker,
    RemoteBuiltIndex,
    RemoteIndex,
    ServerInfo,
    checked_query_params,
    last_line,
    process_memory_bytes,
)

log = logging.getLogger(__name__)

MARKER = "bench_builds"
INDEX_TYPES = ("HNSW", "IVF_FLAT")
KNOBS = {"HNSW": ("ef",), "IVF_FLAT": ("nprobe",)}
#: Milvus's own limits (knowhere's HNSW / IVF parameter checks)
M_RANGE = (2, 2048)
NLIST_RANGE = (1, 65536)
TOPK_MAX = 16384
#: the automatic nlist (null): faiss ivf_flat's rule, as pgvector's lists
NLIST_FACTOR = 4.0
#: what Milvus Lite's local mode accepts (create_index_task.cpp); it searches all of it exactly
LITE_INDEX_TYPES = ("FLAT", "IVF_FLAT", "AUTOINDEX")
INSERT_BATCH = 2000
URI_SCHEMES = ("http://", "https://", "tcp://", "grpc://", "unix:")
START_TIMEOUT_S = 60.0


def _pymilvus() -> Any:
    try:
        import pymilvus
    except ImportError:
        raise MissingDependencyError("pymilvus", "vectordb", "index=milvus_*") from None
    # pymilvus logs every failed RPC with a traceback; bench reports it in one line instead
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    return pymilvus


def _errors() -> tuple[type[BaseException], ...]:
    pymilvus = _pymilvus()
    import grpc

    return (pymilvus.MilvusException, grpc.RpcError, OSError, ValueError)


# ------------------------------------------------------------------ Milvus Lite, started here


def lite_binary() -> Path:
    """The ``milvus`` server binary of the ``milvus-lite`` 2.x wheel (3.x is a pure-Python
    re-implementation on faiss, not the Milvus engine, and has no binary). Located without
    importing ``milvus_lite`` (its ``__init__`` needs ``pkg_resources``, gone from
    setuptools 81)."""
    spec = importlib.util.find_spec("milvus_lite")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("milvus-lite<3", "vectordb", "index=milvus_* without a uri")
    binary = Path(next(iter(spec.submodule_search_locations))) / "lib" / "milvus"
    if not binary.is_file():
        raise IndexBackendError(f"config key index.uri: the installed milvus-lite has no server "
                                f"binary at {binary} (milvus-lite 3 is a Python re-implementation,"
                                f" not the Milvus engine); install 'milvus-lite<3' or set "
                                f"index.uri to a Milvus server")
    return binary


@dataclass
class _LiteHandle:
    proc: subprocess.Popen[bytes]
    lock: Any
    sock_dir: str
    err_file: Any


_LITE: dict[str, ServerInfo] = {}
_LITE_HANDLES: dict[str, _LiteHandle] = {}


def managed_lite(db_file: str) -> ServerInfo:
    """The Milvus Lite server of ``db_file``, started on first use in this process. It holds
    a file lock beside the database; the server exits when the lock is released — at
    ``stop_lite``, at exit, or when this process dies. IndexBackendError names
    ``index.data_dir`` when it will not start."""
    path = Path(db_file).expanduser().resolve()
    got = _LITE.get(str(path))
    if got is not None and _LITE_HANDLES[str(path)].proc.poll() is None:
        return got
    binary = lite_binary()
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    lock = open(lock_path, "a")  # noqa: SIM115 - held for the server's lifetime
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise IndexBackendError(f"config key index.data_dir: {path} is open in another process "
                                f"(Milvus Lite serves one process per database file)") from None
    sock_dir = tempfile.mkdtemp(prefix="bench-milvus-")  # a unix socket path must be short
    sock = Path(sock_dir) / "milvus.sock"
    env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent)}
    fresh = not path.exists()
    t0 = time.perf_counter()
    # its messages go to a file, never a pipe: nothing reads a pipe while the server runs, and
    # a server that filled one (64 KiB) would block on its next write, with every query
    err_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _stop
    proc = subprocess.Popen([str(binary), str(path), f"unix:{sock}", "ERROR", str(lock_path)],
                            env=env, cwd=str(path.parent), stdout=subprocess.DEVNULL,
                            stderr=err_file)
    handle = _LiteHandle(proc, lock, sock_dir, err_file)
    uri = f"unix:{sock}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            err_file.seek(0)
            err = err_file.read().decode(errors="replace").strip().splitlines()
            _stop(handle)
            raise IndexBackendError(f"config key index.data_dir: Milvus Lite exited with "
                                    f"{proc.returncode} on {path}: "
                                    f"{err[-1] if err else 'no message'}")
        if sock.exists() and _answers(uri):
            break
        if time.monotonic() > deadline:
            _stop(handle)
            raise IndexBackendError(f"config key index.data_dir: Milvus Lite did not answer on "
                                    f"{path} within {START_TIMEOUT_S:.0f} s")
        time.sleep(0.05)
    info = ServerInfo(str(path), uri, proc.pid, time.perf_counter() - t0, fresh)
    log.info("index: Milvus Lite started on %s in %.2f s (%s, pid %d)", path, info.start_s,
             "new file" if fresh else "existing file", proc.pid)
    _LITE[str(path)] = info
    _LITE_HANDLES[str(path)] = handle
    return info


def _answers(uri: str) -> bool:
    pymilvus = _pymilvus()
    try:
        pymilvus.MilvusClient(uri=uri, timeout=2.0).close()
    except _errors():
        return False
    return True


def _stop(h: _LiteHandle) -> None:
    try:
        fcntl.lockf(h.lock, fcntl.LOCK_UN)  # the server watches this lock and exits
    finally:
        h.lock.close()
    try:
        h.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        h.proc.kill()
        h.proc.wait(timeout=5)
    h.err_file.close()
    shutil.rmtree(h.sock_dir, ignore_errors=True)


def stop_lite(db_file: str | None = None) -> None:
    """Stop the Milvus Lite server of ``db_file`` (all of them when None) now instead of at
    exit; a no-op when none runs."""
    keys = list(_LITE_HANDLES) if db_file is None else [
        str(Path(db_file).expanduser().resolve())]
    for key in keys:
        h = _LITE_HANDLES.pop(key, None)
        _LITE.pop(key, None)
        if h is not None:
            _stop(h)


atexit.register(stop_lite)


# ------------------------------------------------------------------ the built index


class MilvusBuiltIndex(RemoteBuiltIndex):
    """A loaded Milvus collection; one search request per query vector."""

    engine = "Milvus"
    noun = "collection"

    def __init__(self, conn: Connection, *, index_type: str, load_s: float, **kw: Any) -> None:
        super().__init__(conn=conn, **kw)
        self._client = conn.handle
        self.index_type = index_type
        #: the collection's load into memory (load_collection), this process
        self.load_s = load_s
        self._raised_ef = False

    def _prepare(self, k: int, params: Mapping[str, int | float], column: str | None,
                 any_of: bool) -> Any:
        if not 1 <= k <= TOPK_MAX:
            raise ValueError(f"Milvus searches 1..{TOPK_MAX} results, asked for {k}")
        allowed = KNOBS[self.index_type]
        for name in params:
            if name not in allowed:
                raise OptionError("query_params", f"{name!r} does not apply to Milvus "
                                                  f"{self.index_type} (knobs: "
                                                  f"{', '.join(allowed)})")
        if self.index_type == "HNSW":
            ef = int(params.get("ef", max(k, 64)))
            if ef < k and not self._raised_ef:
                log.info("index: Milvus refuses ef < LIMIT; ef %d raised to %d", ef, k)
                self._raised_ef = True
            return {"metric_type": "IP", "params": {"ef": max(ef, k)}}
        return {"metric_type": "IP", "params": {"nprobe": int(params.get("nprobe", 8))}}

    def _where(self, column: str, value: int) -> Any:
        return f"{column} == {value}"

    def _where_in(self, column: str, values: list[int]) -> Any:
        return f"{column} in [{', '.join(map(str, values))}]"

    def _one(self, state: Any, q: np.ndarray, k: int, where: Any) -> Answer:
        try:
            hits = self._client.search(self.name, data=[q.tolist()], limit=k,
                                       filter=where or "", search_params=state,
                                       anns_field="vector", output_fields=[],
                                       consistency_level="Eventually")[0]
        except _errors() as exc:
            raise IndexBackendError(f"Milvus at {self.endpoint}, collection {self.name}: "
                                    f"{last_line(exc)}") from None
        # IP: the distance is the inner product
        return [int(h["id"]) for h in hits], [float(h["distance"]) for h in hits]

    def sizes(self) -> dict[str, int]:
        """Bytes on disk: the Milvus Lite database file of this build (data, index and WAL);
        0 for a server (Milvus reports no size through its client API)."""
        if self.server is None:
            return {"total_bytes": 0}
        return {"total_bytes": Path(self.server.data_dir).stat().st_size}

    def server_memory(self) -> dict[str, int]:
        """The bench-started Milvus Lite server's RSS / PSS (zeros for a ``uri=`` server)."""
        if self.server is None:
            return {"rss_bytes": 0, "pss_bytes": 0}
        return process_memory_bytes(self.server.pid)

    def _save_extra(self) -> dict[str, Any]:
        return {"index_type": self.index_type}


# ------------------------------------------------------------------ the index option


class MilvusIndex(RemoteIndex[MilvusBuiltIndex]):
    """Milvus HNSW or IVF_FLAT (see the module docstring).

    index_type: HNSW | IVF_FLAT. m, ef_construction: HNSW build options. nlist: IVF lists;
    null = auto = round(4 * sqrt(N)) clamped to [1, N // 39] (faiss ivf_flat's rule).
    query_params: swept on the one built collection, each a mapping of ``ef`` (HNSW) or
    ``nprobe`` (IVF_FLAT). uri: a Milvus server (``http://host:19530``); null = bench starts
    Milvus Lite on a file in ``data_dir`` (IVF_FLAT only, searched exactly). token_env: the
    environment variable holding the server's token (``user:password`` or an API key).
    timeout_s: each request's timeout.
    """

    engine = "Milvus"
    noun = "collection"
    min_dim = 2
    def __init__(
        self,
        *,
        index_type: str = "HNSW",
        m: int = 16,
        ef_construction: int = 64,
        nlist: int | None = None,
        query_params: list[dict[str, int]] | None = None,
        uri: str | None = None,
        token_env: str | None = None,
        data_dir: str = ".cache/bench/milvus",
        timeout_s: float = 30.0,
        device: str = "cpu",
    ) -> None:
        if index_type not in INDEX_TYPES:
            raise OptionError("index_type", f"must be one of {', '.join(INDEX_TYPES)}, got "
                                            f"{index_type!r}")
        if uri is None and index_type not in LITE_INDEX_TYPES:
            raise OptionError("uri", f"Milvus Lite (uri: null) builds no {index_type} (its "
                                     f"local mode accepts {', '.join(LITE_INDEX_TYPES)}); set "
                                     f"index.uri to a Milvus server, or use index=milvus_ivf")
        if uri is not None and not uri.startswith(URI_SCHEMES):
            raise OptionError("uri", f"must be a server address ({', '.join(URI_SCHEMES)}...), got "
                                     f"{uri!r}; for Milvus Lite leave it null (bench starts it "
                                     f"on a file in index.data_dir)")
        if not M_RANGE[0] <= m <= M_RANGE[1]:
            raise OptionError("m", f"must be in [{M_RANGE[0]}, {M_RANGE[1]}], got {m}")
        if ef_construction < 1:
            raise OptionError("ef_construction", f"must be >= 1, got {ef_construction}")
        if nlist is not None and not NLIST_RANGE[0] <= nlist <= NLIST_RANGE[1]:
            raise OptionError("nlist", f"must be in [{NLIST_RANGE[0]}, {NLIST_RANGE[1]}] or null "
                                       f"(auto), got {nlist}")
        query_params = checked_query_params(
            query_params, KNOBS[index_type], what=f"index_type={index_type}",
            ranges=dict.fromkeys(KNOBS[index_type], (1, TOPK_MAX)))
        if timeout_s <= 0:
            raise OptionError("timeout_s", f"must be > 0, got {timeout_s}")
        if token_env is not None and not os.environ.get(token_env):
            raise OptionError("token_env", f"environment variable {token_env} is not set")
        if not data_dir.strip():
            raise OptionError("data_dir", "must be a folder path")
        self.index_type = index_type
        self.m = m
        self.ef_construction = ef_construction
        self.nlist = nlist
        self._query_params = query_params
        self.uri = uri
        self.token_env = token_env
        self.data_dir = data_dir
        self.timeout_s = float(timeout_s)
        self.device = device
        if device == "cuda":
            log.info("index: Milvus searches in its server (index_type %s); device=cuda does "
                     "not apply to it", index_type)
        if uri is not None:
            # refuse an unreachable server now: one line naming the key, before any work
            self._client(uri, "index.uri").close()

    # -- options

    def resolve_nlist(self, n_vectors: int) -> int:
        if self.nlist is not None:
            return self.nlist
        return auto_list_count(n_vectors, NLIST_FACTOR)

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        params: dict[str, object] = {"kind": "milvus", "index_type": self.index_type}
        if self.index_type == "HNSW":
            params.update(m=self.m, ef_construction=self.ef_construction)
        else:
            params["nlist"] = (self.resolve_nlist(n_vectors) if n_vectors is not None
                               else self.nlist if self.nlist is not None else "auto")
        return params

    @property
    def endpoint(self) -> str:
        return self.uri if self.uri is not None else f"Milvus Lite in {self.data_dir}"

    def _index_params(self, n: int) -> dict[str, Any]:
        if self.index_type == "HNSW":
            return {"M": self.m, "efConstruction": self.ef_construction}
        return {"nlist": self.resolve_nlist(n)}

    # -- connection

    def _client(self, uri: str, key: str) -> Any:
        pymilvus = _pymilvus()
        token = os.environ.get(self.token_env, "") if self.token_env else ""
        try:
            return pymilvus.MilvusClient(uri=uri, token=token, timeout=self.timeout_s)
        except _errors() as exc:
            raise ConfigError(key, f"cannot use Milvus at {uri}: {last_line(exc)}") from None

    def _connect(self, name: str) -> Connection:
        server = None
        if self.uri is None:
            server = managed_lite(str(Path(self.data_dir) / f"{name}.db"))
            uri, key = server.uri, "index.data_dir"
        else:
            uri, key = self.uri, "index.uri"
        t0 = time.perf_counter()
        client = self._client(uri, key)
        return Connection(client, server, time.perf_counter() - t0)

    def _errors(self) -> tuple[type[BaseException], ...]:
        return _errors()

    # -- the template's hooks (bench.index.remote)

    def _ensure_markers(self, conn: Connection) -> None:
        client = conn.handle
        if client.has_collection(MARKER):
            client.load_collection(MARKER)
            return
        pymilvus = _pymilvus()
        dt = pymilvus.DataType
        schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("name", dt.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("key", dt.VARCHAR, max_length=64)
        schema.add_field("n_rows", dt.INT64)
        schema.add_field("build_s", dt.DOUBLE)
        schema.add_field("params", dt.VARCHAR, max_length=1024)
        schema.add_field("v", dt.FLOAT_VECTOR, dim=2)  # Milvus needs a vector field
        ip = client.prepare_index_params()
        ip.add_index(field_name="v", index_type="FLAT", metric_type="L2")
        client.create_collection(MARKER, schema=schema, index_params=ip,
                                 consistency_level="Strong")
        client.load_collection(MARKER)

    def _read_marker(self, conn: Connection, name: str) -> Marker | None:
        rows = conn.handle.query(MARKER, filter=f'name == "{name}"',
                                 output_fields=["key", "n_rows", "build_s"])
        if not rows:
            return None
        return Marker(rows[0]["key"], int(rows[0]["n_rows"]), float(rows[0]["build_s"]))

    def _complete(self, conn: Connection, name: str, n: int) -> bool:
        """The collection holds exactly ``n`` rows and its vector index is ``index_type``."""
        client = conn.handle
        if not client.has_collection(name):
            return False
        client.load_collection(name)
        count = client.query(name, filter="", output_fields=["count(*)"])
        if not count or int(count[0]["count(*)"]) != n:
            return False
        if "vector" not in client.list_indexes(name, field_name="vector"):
            return False
        return bool(client.describe_index(name, "vector").get("index_type") == self.index_type)

    def _drop(self, conn: Connection, name: str) -> None:
        conn.handle.delete(MARKER, filter=f'name == "{name}"')
        if conn.handle.has_collection(name):
            conn.handle.drop_collection(name)

    def _create(self, conn: Connection, name: str, dim: int, cols: tuple[str, ...]) -> None:
        pymilvus = _pymilvus()
        schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", pymilvus.DataType.INT64, is_primary=True)
        for c in cols:
            schema.add_field(c, pymilvus.DataType.INT32)
        schema.add_field("vector", pymilvus.DataType.FLOAT_VECTOR, dim=int(dim))
        conn.handle.create_collection(name, schema=schema, consistency_level="Strong")

    def _insert(self, conn: Connection, name: str, x: np.ndarray,
                attributes: Mapping[str, np.ndarray], cols: tuple[str, ...]) -> None:
        for s in range(0, len(x), INSERT_BATCH):
            rows = [{"id": int(i), **{c: int(attributes[c][i]) for c in cols},
                     "vector": x[i]} for i in range(s, min(s + INSERT_BATCH, len(x)))]
            conn.handle.insert(name, rows)
        conn.handle.flush(name)

    def _build_index(self, conn: Connection, name: str, n: int, cols: tuple[str, ...]
                     ) -> None:
        ip = conn.handle.prepare_index_params()
        ip.add_index(field_name="vector", index_name="vector", index_type=self.index_type,
                     metric_type="IP", params=self._index_params(n))
        conn.handle.create_index(name, ip)

    def _write_marker(self, conn: Connection, name: str, marker: Marker, params: str) -> None:
        conn.handle.upsert(MARKER, [{"name": name, "key": marker.key, "n_rows": marker.n_rows,
                                     "build_s": marker.build_s, "params": params,
                                     "v": [0.0, 0.0]}])

    def _open(self, conn: Connection, name: str, *, key: str, x: np.ndarray,
              cols: tuple[str, ...], reused: bool) -> MilvusBuiltIndex:
        t0 = time.perf_counter()
        conn.handle.load_collection(name)
        return MilvusBuiltIndex(conn, name=name, index_type=self.index_type,
                                endpoint=self.endpoint, key=key, n_rows=len(x),
                                dim=x.shape[1], columns=cols, vectors=x,
                                load_s=time.perf_counter() - t0, reused=reused)
