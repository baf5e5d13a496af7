"""LanceDB (embedded, in-process) with its own ANN index: IVF_HNSW_SQ (LanceDB's HNSW, the
default), IVF_HNSW_PQ, IVF_PQ or IVF_FLAT; ``ef`` / ``nprobes`` / ``refine_factor`` swept on
one built table. Inner product on L2-normalised vectors: LanceDB's ``dot`` distance is
``1 - q.v``, turned back into a score.

Table and cache: like ``bench.index.pgvector`` — a build is keyed by a hash of the vectors,
their attribute columns and the build options, and its table is named by that key in the
database folder ``data_dir``. A table is reused only when its completion marker (a JSON
file written after the index, holding the key and row count) matches and the table holds
that many rows and has its ANN index; anything else is dropped and rebuilt. The artifact
keeps the vectors so a lost table is rebuilt, never read half-built.

Queries: one LanceDB query per request (``run_one`` and batch alike). LanceDB refuses an
``ef`` below the LIMIT; bench raises it to the LIMIT (and says so once), as faiss does.
Filters are pushed into the query (``where``), pre-filtered by default (LanceDB's default:
the ANN search only visits matching rows); the query knob ``postfilter=1`` filters after the
ANN search instead, the way that returns short lists at low selectivity.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import MissingDependencyError
from bench.index.base import BuildInfo, SearchResult, build_key
from bench.index.pgvector import MISSING_SCORE, IndexBackendError

log = logging.getLogger(__name__)

TABLE_FILE = "table.json"
VECTORS_FILE = "vectors.npy"
INDEX_TYPES = ("IVF_HNSW_SQ", "IVF_HNSW_PQ", "IVF_PQ", "IVF_FLAT")
_HNSW = ("IVF_HNSW_SQ", "IVF_HNSW_PQ")
_PQ = ("IVF_HNSW_PQ", "IVF_PQ")
KNOBS = ("ef", "nprobes", "refine_factor", "postfilter")


def _lancedb() -> Any:
    # the Rust core logs a deprecation warning per query at the default level
    os.environ.setdefault("LANCE_LOG", "error")
    try:
        import lancedb
    except ImportError:
        raise MissingDependencyError("lancedb", "vectordb", "index=lancedb") from None
    return lancedb


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def folder_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (a Lance table is a folder of fragments)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class LanceBuiltIndex:
    """An opened LanceDB table with its ANN index."""

    def __init__(self, table: Any, *, name: str, folder: Path, index_type: str, key: str,
                 n_rows: int, dim: int, columns: tuple[str, ...], vectors: np.ndarray,
                 connect_s: float, reused: bool) -> None:
        self._table = table
        self.name = name
        self.folder = folder
        self.index_type = index_type
        self.key = key
        self.n_rows = n_rows
        self.dim = dim
        self.columns = columns
        self._vectors = vectors
        self.connect_s = connect_s
        self.reused = reused
        self._raised_ef = False

    def _one(self, q: np.ndarray, k: int, params: Mapping[str, int | float],
             where: str | None) -> Any:
        b = self._table.search(q).distance_type("dot").limit(k)
        if "nprobes" in params:
            b = b.nprobes(int(params["nprobes"]))
        if self.index_type in _HNSW:
            ef = int(params.get("ef", max(k, math.ceil(1.5 * k))))
            if ef < k and not self._raised_ef:
                log.info("index: lancedb refuses ef < LIMIT; ef %d raised to %d", ef, k)
                self._raised_ef = True
            b = b.ef(max(ef, k))
        if "refine_factor" in params:
            b = b.refine_factor(int(params["refine_factor"]))
        if where is not None:
            b = b.where(where, prefilter=not bool(params.get("postfilter", 0)))
        # naming _distance keeps LanceDB from warning that it adds it by itself
        return b.select(["id", "_distance"]).to_arrow()

    def _search(self, queries: np.ndarray, k: int, params: Mapping[str, int | float],
                column: str | None, values: np.ndarray | Sequence[np.ndarray] | None
                ) -> SearchResult:
        for name in params:
            if name not in KNOBS:
                raise OptionError("query_params", f"{name!r} is not a lancedb query knob "
                                                  f"({', '.join(KNOBS)})")
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"need [n_q, {self.dim}] queries, got {queries.shape}")
        if column is not None and column not in self.columns:
            raise ValueError(f"table has no attribute column {column!r}")
        q = np.ascontiguousarray(queries, dtype=np.float32)
        n_q = q.shape[0]
        ids = np.full((n_q, k), -1, dtype=np.int64)
        scores = np.full((n_q, k), MISSING_SCORE, dtype=np.float32)
        for i in range(n_q):
            if values is None:
                where = None
            elif isinstance(values, np.ndarray):
                where = f"{column} = {int(values[i])}"
            elif len(values[i]) == 0:  # nothing this query may see
                continue
            else:
                where = f"{column} IN ({', '.join(str(int(a)) for a in values[i])})"
            try:
                got = self._one(q[i], k, params, where)
            except (RuntimeError, OSError, ValueError) as exc:
                raise IndexBackendError(f"lancedb table {self.name} in {self.folder}: "
                                        f"{_last_line(exc)}") from None
            n = got.num_rows
            if n:
                ids[i, :n] = got["id"].to_numpy().astype(np.int64)
                scores[i, :n] = 1.0 - got["_distance"].to_numpy().astype(np.float32)
        return SearchResult(ids=ids, scores=scores)

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

    def sizes(self) -> dict[str, int]:
        """Bytes on disk of the table folder (data, versions and indexes)."""
        return {"total_bytes": folder_bytes(self.folder / f"{self.name}.lance")}

    def save(self, directory: Path) -> None:
        (directory / TABLE_FILE).write_text(json.dumps({
            "table": self.name, "key": self.key, "n_rows": self.n_rows, "dim": self.dim,
            "index_type": self.index_type, "columns": list(self.columns)}))
        np.save(directory / VECTORS_FILE, self._vectors, allow_pickle=False)


class LanceIndex:
    """LanceDB with an ANN index (see the module docstring).

    index_type: IVF_HNSW_SQ | IVF_HNSW_PQ | IVF_PQ | IVF_FLAT. num_partitions: IVF
    partitions (1 = one HNSW graph over everything; null = LanceDB's own choice).
    m, ef_construction: HNSW build options. num_sub_vectors: PQ sub-vectors (must divide
    the dim; null = LanceDB's choice). query_params: swept on the one built table, each a
    mapping of ``ef`` (HNSW), ``nprobes``, ``refine_factor`` and optionally ``postfilter``
    (0 | 1). data_dir: the LanceDB database folder.
    """

    exact = False

    def __init__(
        self,
        *,
        index_type: str = "IVF_HNSW_SQ",
        num_partitions: int | None = 1,
        m: int = 16,
        ef_construction: int = 64,
        num_sub_vectors: int | None = None,
        query_params: list[dict[str, int]] | None = None,
        data_dir: str = ".cache/bench/lancedb",
        device: str = "cpu",
    ) -> None:
        if index_type not in INDEX_TYPES:
            raise OptionError("index_type", f"must be one of {', '.join(INDEX_TYPES)}, got "
                                            f"{index_type!r}")
        if num_partitions is not None and num_partitions < 1:
            raise OptionError("num_partitions", f"must be >= 1 or null, got {num_partitions}")
        if m < 2:
            raise OptionError("m", f"must be >= 2, got {m}")
        if ef_construction < 1:
            raise OptionError("ef_construction", f"must be >= 1, got {ef_construction}")
        if num_sub_vectors is not None:
            if index_type not in _PQ:
                raise OptionError("num_sub_vectors", f"applies to PQ indexes only, not "
                                                     f"{index_type}")
            if num_sub_vectors < 1:
                raise OptionError("num_sub_vectors", f"must be >= 1, got {num_sub_vectors}")
        if query_params is None:
            query_params = [{}]
        if not query_params:
            raise OptionError("query_params", "must list at least one query-time setting; use "
                                              "[{}] for LanceDB's defaults")
        for i, qp in enumerate(query_params):
            for name, value in qp.items():
                key = f"query_params[{i}].{name}"
                if name not in KNOBS:
                    raise OptionError(key, f"unknown; allowed: {', '.join(KNOBS)}")
                if name == "ef" and index_type not in _HNSW:
                    raise OptionError(key, f"ef applies to HNSW indexes, not {index_type}")
                if name == "postfilter":
                    if value not in (0, 1):
                        raise OptionError(key, f"must be 0 or 1, got {value}")
                elif int(value) < 1:
                    raise OptionError(key, f"must be >= 1, got {value}")
        if not data_dir.strip():
            raise OptionError("data_dir", "must be a folder path")
        self.index_type = index_type
        self.num_partitions = num_partitions
        self.m = m
        self.ef_construction = ef_construction
        self.num_sub_vectors = num_sub_vectors
        self._query_params = [dict(q) for q in query_params]
        self.data_dir = data_dir
        self.device = device
        if device == "cuda":
            log.info("index: lancedb searches on the CPU here; device=cuda does not apply")

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        params: dict[str, object] = {"kind": "lancedb", "index_type": self.index_type,
                                     "num_partitions": self.num_partitions}
        if self.index_type in _HNSW:
            params.update(m=self.m, ef_construction=self.ef_construction)
        if self.index_type in _PQ:
            params["num_sub_vectors"] = self.num_sub_vectors
        return params

    def query_params(self) -> list[dict[str, int | float]]:
        return [dict(q) for q in self._query_params]

    def _config(self) -> Any:
        from lancedb.index import HnswPq, HnswSq, IvfFlat, IvfPq

        common: dict[str, Any] = {"distance_type": "dot", "num_partitions": self.num_partitions}
        if self.index_type == "IVF_HNSW_SQ":
            return HnswSq(**common, m=self.m, ef_construction=self.ef_construction)
        if self.index_type == "IVF_HNSW_PQ":
            return HnswPq(**common, m=self.m, ef_construction=self.ef_construction,
                          num_sub_vectors=self.num_sub_vectors)
        if self.index_type == "IVF_PQ":
            return IvfPq(**common, num_sub_vectors=self.num_sub_vectors)
        return IvfFlat(**common)

    def content_key(self, vectors: np.ndarray, attributes: Mapping[str, np.ndarray]) -> str:
        return build_key(self.cache_params(len(vectors)), vectors, attributes)

    def build(self, vectors: np.ndarray) -> tuple[LanceBuiltIndex, BuildInfo]:
        return self.build_with_attributes(vectors, {})

    def build_with_attributes(self, vectors: np.ndarray, attributes: Mapping[str, np.ndarray]
                              ) -> tuple[LanceBuiltIndex, BuildInfo]:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[0] < 1:
            raise ValueError(f"need [N >= 1, d] vectors, got {x.shape}")
        if self.num_sub_vectors is not None and x.shape[1] % self.num_sub_vectors:
            raise OptionError("num_sub_vectors", f"must divide the vector dim {x.shape[1]}, "
                                                 f"got {self.num_sub_vectors}")
        for name, a in attributes.items():
            if not name.isidentifier() or name in ("id", "vector"):
                raise ValueError(f"attribute column name {name!r} is not usable")
            if len(a) != len(x):
                raise ValueError(f"attribute {name!r} has {len(a)} values for {len(x)} rows")
        key = self.content_key(x, attributes)
        built, build_s = self._ensure_table(x, key, {k: np.asarray(v, dtype=np.int32)
                                                    for k, v in attributes.items()})
        return built, BuildInfo(build_s, built.sizes()["total_bytes"], int(x.shape[0]),
                                int(x.shape[1]))

    def _marker(self, folder: Path, name: str) -> Path:
        return folder / f"{name}.complete.json"

    def _ensure_table(self, x: np.ndarray, key: str, attributes: Mapping[str, np.ndarray]
                      ) -> tuple[LanceBuiltIndex, float]:
        lancedb = _lancedb()
        import pyarrow as pa

        folder = Path(self.data_dir).expanduser().resolve()
        name = f"bench_{key[:24]}"
        cols = tuple(sorted(attributes))
        t0 = time.perf_counter()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            db = lancedb.connect(str(folder))
        except (OSError, RuntimeError, ValueError) as exc:
            raise IndexBackendError(f"config key index.data_dir: cannot open LanceDB in "
                                    f"{folder}: {_last_line(exc)}") from None
        connect_s = time.perf_counter() - t0

        def make(table: Any, reused: bool) -> LanceBuiltIndex:
            return LanceBuiltIndex(table, name=name, folder=folder, index_type=self.index_type,
                                   key=key, n_rows=len(x), dim=x.shape[1], columns=cols,
                                   vectors=x, connect_s=connect_s, reused=reused)

        marker = self._marker(folder, name)
        done = self._verified(db, marker, name, key, len(x))
        if done is not None:
            build_s, table = done
            log.info("index: reusing complete lancedb table %s (%d rows)", name, len(x))
            return make(table, True), build_s
        marker.unlink(missing_ok=True)
        t0 = time.perf_counter()
        data = {"id": pa.array(np.arange(len(x), dtype=np.int32)),
                **{c: pa.array(attributes[c]) for c in cols},
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1])}
        try:
            table = db.create_table(name, pa.table(data), mode="overwrite")
            table.create_index("vector", config=self._config())
            if cols:
                from lancedb.index import BTree

                for c in cols:  # what a real schema has on a filter column
                    table.create_index(c, config=BTree())
        except (RuntimeError, OSError, ValueError) as exc:
            raise IndexBackendError(f"lancedb build of {name} in {folder}: "
                                    f"{_last_line(exc)}") from None
        build_s = time.perf_counter() - t0
        # written last, atomically: its presence means data and index are both committed
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "n_rows": len(x), "build_s": build_s,
                                   "params": self.cache_params(len(x))}))
        os.replace(tmp, marker)
        log.info("index: built lancedb %s table %s over %d x %d vectors in %.2f s",
                 self.index_type, name, len(x), x.shape[1], build_s)
        return make(table, False), build_s

    @staticmethod
    def _verified(db: Any, marker: Path, name: str, key: str, n: int
                  ) -> tuple[float, Any] | None:
        """(recorded build time, opened table) when ``name`` is complete, else None."""
        if not marker.is_file():
            return None
        try:
            meta = json.loads(marker.read_text())
            table = db.open_table(name)
            complete = (meta.get("key") == key and int(meta.get("n_rows", -1)) == n
                        and table.count_rows() == n
                        and any(i.columns == ["vector"] for i in table.list_indices()))
        except (ValueError, RuntimeError, OSError, json.JSONDecodeError):
            return None
        return (float(meta["build_s"]), table) if complete else None

    def drop(self, name: str) -> None:
        """Remove a table and its marker (tests and clean-ups)."""
        folder = Path(self.data_dir).expanduser().resolve()
        self._marker(folder, name).unlink(missing_ok=True)
        shutil.rmtree(folder / f"{name}.lance", ignore_errors=True)

    def load(self, directory: Path) -> LanceBuiltIndex:
        meta = json.loads((directory / TABLE_FILE).read_text())
        x = np.load(directory / VECTORS_FILE, allow_pickle=False)
        key = self.content_key(x, {})
        if key != meta["key"]:
            raise ValueError(f"{directory}: the saved vectors do not match the table key "
                             "(a damaged artifact)")
        built, _ = self._ensure_table(x, key, {})
        return built
