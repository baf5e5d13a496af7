"""Qdrant as an index backend through ``qdrant-client``: HNSW (m, ef_construct; hnsw_ef
swept), dot product on L2-normalised vectors (= cosine).

Server: ``url=`` names a Qdrant server (``http://host:6333``, Qdrant Cloud, a GPU box), with
the API key read from the environment variable ``api_key_env`` (never from the config); a
server that does not answer is a config error naming ``index.url`` before any work.
``url: local`` runs qdrant-client's **local mode** in ``data_dir``: a Python re-implementation
of the API in the client package, NOT the Qdrant engine — it searches by brute force
(``search_params`` and the HNSW and payload indexes have no effect; qdrant-client says so),
so its recall is exact search and its latency is numpy's, never Qdrant's. It exercises the
same client calls (collections, uploads, payload indexes, filtered ``query_points``, build
keys and reuse), which is what bench's tests use it for; ``url: local`` logs this once.

Collection and cache: the template of ``bench.index.remote`` — keyed by
``bench.index.base.build_key``, named ``bench_<24 hex>``, with a marker point in the
collection ``bench_builds`` (key, row count, build time) upserted after the points are
uploaded and the server reports the collection indexed (status green); reused only when the
marker names the same key and row count, the collection counts exactly that many points and
(on a server) its HNSW configuration is the one asked for. The artifact keeps the vectors.

Indexing: Qdrant builds a segment's HNSW graph only above ``indexing_threshold`` KB of
vectors (default 10,000-20,000 KB: a small corpus would stay unindexed and be searched
exactly); bench sets it to 1 KB so the graph is built whatever the corpus size, and waits for
the optimiser to finish. Filtered searches go through Qdrant's query planner: below
``full_scan_threshold`` KB of matching vectors it scans the payload index exactly, above it
it walks the filtered HNSW graph (payload indexes are created on every filter field). A set
filter is ``MatchAny``.

Queries: one ``query_points`` request per query (``run_one`` and batch alike).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
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
    checked_query_params,
    folder_bytes,
    last_line,
)

log = logging.getLogger(__name__)

MARKER = "bench_builds"
LOCAL = "local"
KNOBS = ("hnsw_ef",)
UPLOAD_BATCH = 256
INDEX_WAIT_S = 600.0


def _qdrant() -> Any:
    try:
        import qdrant_client
    except ImportError:
        raise MissingDependencyError("qdrant-client", "vectordb", "index=qdrant_hnsw") from None
    return qdrant_client


def _errors() -> tuple[type[BaseException], ...]:
    _qdrant()
    from qdrant_client.http.exceptions import ApiException

    return (ApiException, OSError, ValueError, RuntimeError)


_LOCAL_CLIENTS: dict[str, Any] = {}


def close_local() -> None:
    """Close every local-mode client (releasing their folder locks): tests and clean-ups."""
    for client in _LOCAL_CLIENTS.values():
        client.close()
    _LOCAL_CLIENTS.clear()


def _marker_id(name: str) -> int:
    return int(name.removeprefix("bench_")[:15], 16)


class QdrantBuiltIndex(RemoteBuiltIndex):
    """A Qdrant collection; one ``query_points`` request per query vector."""

    engine = "Qdrant"
    noun = "collection"

    def __init__(self, conn: Connection, *, local_dir: Path | None, **kw: Any) -> None:
        super().__init__(conn=conn, **kw)
        self._client = conn.handle
        self.local_dir = local_dir

    def _prepare(self, k: int, params: Mapping[str, int | float], column: str | None,
                 any_of: bool) -> Any:
        from qdrant_client import models

        for name in params:
            if name not in KNOBS:
                raise OptionError("query_params", f"{name!r} is not a qdrant query knob "
                                                  f"({', '.join(KNOBS)})")
        return None if self.local_dir is not None else models.SearchParams(
            hnsw_ef=int(params.get("hnsw_ef", max(k, 64))))

    def _where(self, column: str, value: int) -> Any:
        from qdrant_client import models

        return models.Filter(must=[models.FieldCondition(
            key=column, match=models.MatchValue(value=value))])

    def _where_in(self, column: str, values: list[int]) -> Any:
        from qdrant_client import models

        return models.Filter(must=[models.FieldCondition(
            key=column, match=models.MatchAny(any=values))])

    def _one(self, state: Any, q: np.ndarray, k: int, where: Any) -> Answer:
        try:
            got = self._client.query_points(self.name, query=q.tolist(), limit=k,
                                            query_filter=where, search_params=state,
                                            with_payload=False).points
        except _errors() as exc:
            raise IndexBackendError(f"Qdrant at {self.endpoint}, collection {self.name}: "
                                    f"{last_line(exc)}") from None
        return [int(p.id) for p in got], [float(p.score) for p in got]  # DOT: inner product

    def sizes(self) -> dict[str, int]:
        """Bytes on disk of a local-mode collection folder; 0 for a server (not reported
        through the client API)."""
        if self.local_dir is None:
            return {"total_bytes": 0}
        return {"total_bytes": folder_bytes(self.local_dir / "collection" / self.name)}


class QdrantIndex(RemoteIndex[QdrantBuiltIndex]):
    """Qdrant HNSW (see the module docstring).

    m, ef_construction: HNSW build options (Qdrant's ``m`` / ``ef_construct``).
    query_params: swept on the one built collection, each a mapping of ``hnsw_ef``. url: a
    Qdrant server (``http://host:6333``), or ``local`` for qdrant-client's local mode in
    ``data_dir`` (brute force: not the Qdrant engine). api_key_env: the environment variable
    holding the API key. full_scan_threshold_kb: Qdrant's planner threshold for filtered
    searches (null = the server's default). timeout_s: each request's timeout.
    """

    engine = "Qdrant"
    noun = "collection"
    reserved = ()  # the vector and the id are not payload fields
    def __init__(
        self,
        *,
        m: int = 16,
        ef_construction: int = 64,
        full_scan_threshold_kb: int | None = None,
        query_params: list[dict[str, int]] | None = None,
        url: str = LOCAL,
        api_key_env: str | None = None,
        data_dir: str = ".cache/bench/qdrant",
        timeout_s: float = 30.0,
        device: str = "cpu",
    ) -> None:
        if url != LOCAL and not url.startswith(("http://", "https://")):
            raise OptionError("url", f"must be http(s)://host:port or {LOCAL!r}, got {url!r}")
        if m < 2:
            raise OptionError("m", f"must be >= 2, got {m}")
        if ef_construction < 4:
            raise OptionError("ef_construction", f"must be >= 4, got {ef_construction}")
        if full_scan_threshold_kb is not None and full_scan_threshold_kb < 1:
            raise OptionError("full_scan_threshold_kb", f"must be >= 1 or null, got "
                                                        f"{full_scan_threshold_kb}")
        query_params = checked_query_params(query_params, KNOBS, what="qdrant")
        if timeout_s <= 0:
            raise OptionError("timeout_s", f"must be > 0, got {timeout_s}")
        if api_key_env is not None and not os.environ.get(api_key_env):
            raise OptionError("api_key_env", f"environment variable {api_key_env} is not set")
        self.m = m
        self.ef_construction = ef_construction
        self.full_scan_threshold_kb = full_scan_threshold_kb
        self._query_params = query_params
        self.url = url
        self.api_key_env = api_key_env
        self.data_dir = data_dir
        self.timeout_s = float(timeout_s)
        self.device = device
        if url == LOCAL:
            log.warning("index: qdrant url=local is qdrant-client's local mode, NOT the Qdrant "
                        "engine: brute-force search (exact recall; hnsw_ef and the HNSW build "
                        "options have no effect); set index.url to a Qdrant server")
        else:
            self._client(url).close()  # refuse an unreachable server before any work

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        return {"kind": "qdrant", "m": self.m, "ef_construction": self.ef_construction,
                "full_scan_threshold_kb": self.full_scan_threshold_kb,
                "local": self.url == LOCAL}

    @property
    def endpoint(self) -> str:
        return self.url if self.url != LOCAL else f"qdrant-client local mode in {self.data_dir}"

    def _client(self, url: str) -> Any:
        qdrant_client = _qdrant()
        if url == LOCAL:
            folder = Path(self.data_dir).expanduser().resolve()
            if str(folder) in _LOCAL_CLIENTS:  # local mode locks its folder: one client each
                return _LOCAL_CLIENTS[str(folder)]
            try:
                folder.mkdir(parents=True, exist_ok=True)
                client = qdrant_client.QdrantClient(path=str(folder))
                _LOCAL_CLIENTS[str(folder)] = client
                return client
            except _errors() as exc:
                raise ConfigError("index.data_dir", f"cannot open qdrant local mode in {folder}: "
                                                    f"{last_line(exc)}") from None
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        try:
            # check_compatibility=False: the client's own check runs in a thread and warns on
            # stderr after the fact for an unreachable server; the line below says it instead
            client = qdrant_client.QdrantClient(url=url, api_key=key,
                                                timeout=max(1, int(self.timeout_s)),
                                                check_compatibility=False)
            client.get_collections()  # the constructor does not connect
        except Exception as exc:  # httpx / grpc / ResponseHandlingException: all one line
            raise ConfigError("index.url", f"cannot use Qdrant at {url}: "
                                           f"{last_line(exc)}") from None
        return client

    def _connect(self, name: str) -> Connection:
        t0 = time.perf_counter()
        client = self._client(self.url)
        return Connection(client, None, time.perf_counter() - t0)

    def _errors(self) -> tuple[type[BaseException], ...]:
        return _errors()

    # -- the template's hooks (bench.index.remote)

    def _ensure_markers(self, conn: Connection) -> None:
        from qdrant_client import models

        if not conn.handle.collection_exists(MARKER):
            conn.handle.create_collection(MARKER, vectors_config=models.VectorParams(
                size=1, distance=models.Distance.DOT))

    def _read_marker(self, conn: Connection, name: str) -> Marker | None:
        got = conn.handle.retrieve(MARKER, ids=[_marker_id(name)], with_payload=True)
        meta = (got[0].payload or {}) if got else {}
        if meta.get("name") != name:  # none, or another name's id prefix
            return None
        return Marker(str(meta.get("key")), int(meta.get("n_rows", -1)),
                      float(meta.get("build_s", 0.0)))

    def _complete(self, conn: Connection, name: str, n: int) -> bool:
        client = conn.handle
        if not client.collection_exists(name) or client.count(name, exact=True).count != n:
            return False
        if self.url != LOCAL:
            cfg = client.get_collection(name).config.hnsw_config
            return bool((cfg.m, cfg.ef_construct) == (self.m, self.ef_construction))
        return True

    def _drop(self, conn: Connection, name: str) -> None:
        from qdrant_client import models

        conn.handle.delete(MARKER, points_selector=models.PointIdsList(
            points=[_marker_id(name)]))
        if conn.handle.collection_exists(name):
            conn.handle.delete_collection(name)

    def _create(self, conn: Connection, name: str, dim: int, cols: tuple[str, ...]) -> None:
        from qdrant_client import models

        hnsw = models.HnswConfigDiff(m=self.m, ef_construct=self.ef_construction,
                                     full_scan_threshold=self.full_scan_threshold_kb)
        conn.handle.create_collection(
            name, vectors_config=models.VectorParams(size=int(dim),
                                                     distance=models.Distance.DOT),
            hnsw_config=hnsw,
            # build the graph whatever the corpus size (see the module docstring)
            optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1))
        if self.url != LOCAL:  # local mode ignores payload indexes (and warns per call)
            for c in cols:  # what a real schema has on a filter field
                conn.handle.create_payload_index(name, c, models.PayloadSchemaType.INTEGER)

    def _insert(self, conn: Connection, name: str, x: np.ndarray,
                attributes: Mapping[str, np.ndarray], cols: tuple[str, ...]) -> None:
        payload = [{c: int(attributes[c][i]) for c in cols} for i in range(len(x))]
        conn.handle.upload_collection(name, vectors=x, payload=payload, ids=list(range(len(x))),
                                      batch_size=UPLOAD_BATCH, wait=True)

    def _build_index(self, conn: Connection, name: str, n: int, cols: tuple[str, ...]
                     ) -> None:
        """Qdrant indexes as points arrive: wait until the server reports green."""
        from qdrant_client import models

        if self.url == LOCAL:
            return
        deadline = time.monotonic() + INDEX_WAIT_S
        while conn.handle.get_collection(name).status != models.CollectionStatus.GREEN:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not indexed after {INDEX_WAIT_S:.0f} s")
            time.sleep(0.2)

    def _write_marker(self, conn: Connection, name: str, marker: Marker, params: str) -> None:
        from qdrant_client import models

        conn.handle.upsert(MARKER, points=[models.PointStruct(
            id=_marker_id(name), vector=[1.0], payload={
                "name": name, "key": marker.key, "n_rows": marker.n_rows,
                "build_s": marker.build_s, "params": params})], wait=True)

    def _open(self, conn: Connection, name: str, *, key: str, x: np.ndarray,
              cols: tuple[str, ...], reused: bool) -> QdrantBuiltIndex:
        local = Path(self.data_dir).expanduser().resolve() if self.url == LOCAL else None
        return QdrantBuiltIndex(conn, name=name, endpoint=self.endpoint, key=key,
                                n_rows=len(x), dim=x.shape[1], columns=cols, vectors=x,
                                local_dir=local, reused=reused)
