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

Collection and cache: as ``bench.index.milvus`` — keyed by ``bench.index.base.build_key``,
named ``bench_<24 hex>``, with a marker point in the collection ``bench_builds`` (key, row
count, build time) upserted after the points are uploaded and the server reports the
collection indexed (status green); reused only when the marker names the same key and row
count, the collection counts exactly that many points and (on a server) its HNSW
configuration is the one asked for. The artifact keeps the vectors.

Indexing: Qdrant builds a segment's HNSW graph only above ``indexing_threshold`` KB of
vectors (default 10,000-20,000 KB: a small corpus would stay unindexed and be searched
exactly); bench sets it to 1 KB so the graph is built whatever the corpus size, and waits for
the optimiser to finish. Filtered searches go through Qdrant's query planner: below
``full_scan_threshold`` KB of matching vectors it scans the payload index exactly, above it
it walks the filtered HNSW graph (payload indexes are created on every filter field).

Queries: one ``query_points`` request per query (``run_one`` and batch alike).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import ConfigError, MissingDependencyError
from bench.index.base import BuildInfo, SearchResult, build_key
from bench.index.lancedb_index import folder_bytes
from bench.index.pgvector import MISSING_SCORE, IndexBackendError

log = logging.getLogger(__name__)

TABLE_FILE = "collection.json"
VECTORS_FILE = "vectors.npy"
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


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_LOCAL_CLIENTS: dict[str, Any] = {}


def close_local() -> None:
    """Close every local-mode client (releasing their folder locks): tests and clean-ups."""
    for client in _LOCAL_CLIENTS.values():
        client.close()
    _LOCAL_CLIENTS.clear()


def _marker_id(name: str) -> int:
    return int(name.removeprefix("bench_")[:15], 16)


class QdrantBuiltIndex:
    """A Qdrant collection; ``search`` / ``search_where`` send one request per query."""

    def __init__(self, client: Any, *, name: str, endpoint: str, key: str, n_rows: int,
                 dim: int, columns: tuple[str, ...], vectors: np.ndarray, local_dir: Path | None,
                 connect_s: float, reused: bool) -> None:
        self._client = client
        self._vectors = vectors
        self.name = name
        self.endpoint = endpoint
        self.key = key
        self.n_rows = n_rows
        self.dim = dim
        self.columns = columns
        self.local_dir = local_dir
        self.connect_s = connect_s
        self.reused = reused

    def _search(self, queries: np.ndarray, k: int, params: Mapping[str, int | float],
                column: str | None, values: np.ndarray | None) -> SearchResult:
        from qdrant_client import models

        for name in params:
            if name not in KNOBS:
                raise OptionError("query_params", f"{name!r} is not a qdrant query knob "
                                                  f"({', '.join(KNOBS)})")
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"need [n_q, {self.dim}] queries, got {queries.shape}")
        if column is not None and column not in self.columns:
            raise ValueError(f"collection has no payload field {column!r} (has "
                             f"{list(self.columns)})")
        sp = None if self.local_dir is not None else models.SearchParams(
            hnsw_ef=int(params.get("hnsw_ef", max(k, 64))))
        q = np.ascontiguousarray(queries, dtype=np.float32)
        n_q = q.shape[0]
        ids = np.full((n_q, k), -1, dtype=np.int64)
        scores = np.full((n_q, k), MISSING_SCORE, dtype=np.float32)
        errors = _errors()
        for i in range(n_q):
            filt = None if values is None or column is None else models.Filter(must=[
                models.FieldCondition(key=column, match=models.MatchValue(value=int(values[i])))])
            try:
                got = self._client.query_points(self.name, query=q[i].tolist(), limit=k,
                                                query_filter=filt, search_params=sp,
                                                with_payload=False).points
            except errors as exc:
                raise IndexBackendError(f"Qdrant at {self.endpoint}, collection {self.name}: "
                                        f"{_last_line(exc)}") from None
            n = len(got)
            if n:
                ids[i, :n] = [int(p.id) for p in got]
                scores[i, :n] = [float(p.score) for p in got]  # DOT: the inner product
        return SearchResult(ids=ids, scores=scores)

    def search(self, queries: np.ndarray, k: int,
               params: Mapping[str, int | float]) -> SearchResult:
        return self._search(queries, k, params, None, None)

    def search_where(self, queries: np.ndarray, k: int, params: Mapping[str, int | float], *,
                     column: str, values: np.ndarray) -> SearchResult:
        if len(values) != len(queries):
            raise ValueError(f"{len(values)} filter values for {len(queries)} queries")
        return self._search(queries, k, params, column, values)

    def sizes(self) -> dict[str, int]:
        """Bytes on disk of a local-mode collection folder; 0 for a server (not reported
        through the client API)."""
        if self.local_dir is None:
            return {"total_bytes": 0}
        return {"total_bytes": folder_bytes(self.local_dir / "collection" / self.name)}

    def save(self, directory: Path) -> None:
        (directory / TABLE_FILE).write_text(json.dumps({
            "collection": self.name, "key": self.key, "n_rows": self.n_rows, "dim": self.dim,
            "columns": list(self.columns)}))
        np.save(directory / VECTORS_FILE, self._vectors, allow_pickle=False)


class QdrantIndex:
    """Qdrant HNSW (see the module docstring).

    m, ef_construction: HNSW build options (Qdrant's ``m`` / ``ef_construct``).
    query_params: swept on the one built collection, each a mapping of ``hnsw_ef``. url: a
    Qdrant server (``http://host:6333``), or ``local`` for qdrant-client's local mode in
    ``data_dir`` (brute force: not the Qdrant engine). api_key_env: the environment variable
    holding the API key. full_scan_threshold_kb: Qdrant's planner threshold for filtered
    searches (null = the server's default). timeout_s: each request's timeout.
    """

    exact = False

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
        if query_params is None:
            query_params = [{}]
        if not query_params:
            raise OptionError("query_params", "must list at least one query-time setting; use "
                                              "[{}] for the defaults")
        for i, qp in enumerate(query_params):
            for name, value in qp.items():
                key = f"query_params[{i}].{name}"
                if name not in KNOBS:
                    raise OptionError(key, f"unknown; allowed: {', '.join(KNOBS)}")
                if int(value) < 1:
                    raise OptionError(key, f"must be >= 1, got {value}")
        if timeout_s <= 0:
            raise OptionError("timeout_s", f"must be > 0, got {timeout_s}")
        if api_key_env is not None and not os.environ.get(api_key_env):
            raise OptionError("api_key_env", f"environment variable {api_key_env} is not set")
        self.m = m
        self.ef_construction = ef_construction
        self.full_scan_threshold_kb = full_scan_threshold_kb
        self._query_params = [dict(q) for q in query_params]
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

    def query_params(self) -> list[dict[str, int | float]]:
        return [dict(q) for q in self._query_params]

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
                                                    f"{_last_line(exc)}") from None
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
                                           f"{_last_line(exc)}") from None
        return client

    def content_key(self, vectors: np.ndarray, attributes: Mapping[str, np.ndarray]) -> str:
        return build_key(self.cache_params(len(vectors)), vectors, attributes)

    def build(self, vectors: np.ndarray) -> tuple[QdrantBuiltIndex, BuildInfo]:
        return self.build_with_attributes(vectors, {})

    def build_with_attributes(self, vectors: np.ndarray, attributes: Mapping[str, np.ndarray]
                              ) -> tuple[QdrantBuiltIndex, BuildInfo]:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[0] < 1:
            raise ValueError(f"need [N >= 1, d] vectors, got {x.shape}")
        for name, a in attributes.items():
            if not name.isidentifier():
                raise ValueError(f"payload field name {name!r} is not usable")
            if len(a) != len(x):
                raise ValueError(f"attribute {name!r} has {len(a)} values for {len(x)} rows")
        key = self.content_key(x, attributes)
        built, build_s = self._ensure(x, key, {k: np.asarray(v, dtype=np.int32)
                                               for k, v in attributes.items()})
        return built, BuildInfo(build_s, built.sizes()["total_bytes"], int(x.shape[0]),
                                int(x.shape[1]))

    def _ensure(self, x: np.ndarray, key: str, attributes: Mapping[str, np.ndarray]
                ) -> tuple[QdrantBuiltIndex, float]:
        from qdrant_client import models

        name = f"bench_{key[:24]}"
        t0 = time.perf_counter()
        client = self._client(self.url)
        connect_s = time.perf_counter() - t0
        cols = tuple(sorted(attributes))
        errors = _errors()
        local = self.url == LOCAL

        def run(what: str, fn: Any) -> Any:
            try:
                return fn()
            except errors as exc:
                raise IndexBackendError(f"Qdrant at {self.endpoint}, {what} of {name}: "
                                        f"{_last_line(exc)}") from None

        def make(reused: bool) -> QdrantBuiltIndex:
            return QdrantBuiltIndex(client, name=name, endpoint=self.endpoint, key=key,
                                    n_rows=len(x), dim=x.shape[1], columns=cols, vectors=x,
                                    local_dir=Path(self.data_dir).expanduser().resolve()
                                    if local else None, connect_s=connect_s, reused=reused)

        if not run("lookup", lambda: client.collection_exists(MARKER)):
            run("marker collection", lambda: client.create_collection(
                MARKER, vectors_config=models.VectorParams(size=1,
                                                           distance=models.Distance.DOT)))
        done = run("verification", lambda: self._verified(client, name, key, len(x)))
        if done is not None:
            log.info("index: reusing complete Qdrant collection %s (%d points)", name, len(x))
            return make(True), done
        t0 = time.perf_counter()
        run("delete", lambda: client.delete(MARKER, points_selector=models.PointIdsList(
            points=[_marker_id(name)])))
        if run("lookup", lambda: client.collection_exists(name)):
            run("drop", lambda: client.delete_collection(name))
        hnsw = models.HnswConfigDiff(m=self.m, ef_construct=self.ef_construction,
                                     full_scan_threshold=self.full_scan_threshold_kb)
        run("create", lambda: client.create_collection(
            name, vectors_config=models.VectorParams(size=int(x.shape[1]),
                                                     distance=models.Distance.DOT),
            hnsw_config=hnsw,
            # build the graph whatever the corpus size (see the module docstring)
            optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1)))
        for c in cols:  # what a real schema has on a filter field
            if not local:  # local mode ignores payload indexes (and warns per call)
                run("payload index", lambda c=c: client.create_payload_index(
                    name, c, models.PayloadSchemaType.INTEGER))
        payload = [{c: int(attributes[c][i]) for c in cols} for i in range(len(x))]
        run("upload", lambda: client.upload_collection(
            name, vectors=x, payload=payload, ids=list(range(len(x))),
            batch_size=UPLOAD_BATCH, wait=True))
        if not local:
            run("indexing", lambda: self._wait_green(client, name))
        build_s = time.perf_counter() - t0
        # written last: its presence means every point is stored and indexed
        run("marker", lambda: client.upsert(MARKER, points=[models.PointStruct(
            id=_marker_id(name), vector=[1.0], payload={
                "name": name, "key": key, "n_rows": len(x), "build_s": build_s,
                "params": json.dumps(self.cache_params(len(x)))})], wait=True))
        log.info("index: built Qdrant collection %s over %d x %d vectors in %.2f s", name,
                 len(x), x.shape[1], build_s)
        return make(False), build_s

    def _wait_green(self, client: Any, name: str) -> None:
        from qdrant_client import models

        deadline = time.monotonic() + INDEX_WAIT_S
        while client.get_collection(name).status != models.CollectionStatus.GREEN:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not indexed after {INDEX_WAIT_S:.0f} s")
            time.sleep(0.2)

    def _verified(self, client: Any, name: str, key: str, n: int) -> float | None:
        got = client.retrieve(MARKER, ids=[_marker_id(name)], with_payload=True)
        if not got:
            return None
        meta = got[0].payload or {}
        if meta.get("name") != name or meta.get("key") != key or int(meta.get("n_rows", -1)) != n:
            return None
        if not client.collection_exists(name) or client.count(name, exact=True).count != n:
            return None
        if self.url != LOCAL:
            cfg = client.get_collection(name).config.hnsw_config
            if (cfg.m, cfg.ef_construct) != (self.m, self.ef_construction):
                return None
        return float(meta["build_s"])

    def drop(self, name: str) -> None:
        """Remove a collection and its marker (tests and clean-ups)."""
        from qdrant_client import models

        client = self._client(self.url)
        client.delete(MARKER, points_selector=models.PointIdsList(points=[_marker_id(name)]))
        if client.collection_exists(name):
            client.delete_collection(name)

    def load(self, directory: Path) -> QdrantBuiltIndex:
        meta = json.loads((directory / TABLE_FILE).read_text())
        x = np.load(directory / VECTORS_FILE, allow_pickle=False)
        if meta["columns"]:
            raise ValueError("a cached Qdrant artifact has payload fields: bench's pipeline "
                             "builds none")
        key = self.content_key(x, {})
        if key != meta["key"]:
            raise ValueError(f"{directory}: the saved vectors do not match the collection key "
                             "(a damaged artifact)")
        built, _ = self._ensure(x, key, {})
        return built
