"""LanceDB (embedded, in-process) with its own ANN index: IVF_HNSW_SQ (LanceDB's HNSW, the
default), IVF_HNSW_PQ, IVF_PQ or IVF_FLAT; ``ef`` / ``nprobes`` / ``refine_factor`` swept on
one built table. Inner product on L2-normalised vectors: LanceDB's ``dot`` distance is
``1 - q.v``, turned back into a score.

Table and cache: the template of ``bench.index.remote`` — a build is keyed by a hash of the vectors,
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import MissingDependencyError
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


class LanceBuiltIndex(RemoteBuiltIndex):
    """An opened LanceDB table with its ANN index."""

    engine = "lancedb"

    def __init__(self, conn: Connection, *, table: Any, folder: Path, index_type: str,
                 **kw: Any) -> None:
        super().__init__(conn=conn, **kw)
        self._table = table
        self.folder = folder
        self.index_type = index_type
        self._raised_ef = False

    def _prepare(self, k: int, params: Mapping[str, int | float], column: str | None,
                 any_of: bool) -> Any:
        for name in params:
            if name not in KNOBS:
                raise OptionError("query_params", f"{name!r} is not a lancedb query knob "
                                                  f"({', '.join(KNOBS)})")
        return params

    def _where(self, column: str, value: int) -> Any:
        return f"{column} = {value}"

    def _where_in(self, column: str, values: list[int]) -> Any:
        return f"{column} IN ({', '.join(map(str, values))})"

    def _one(self, state: Any, q: np.ndarray, k: int, where: Any) -> Answer:
        params = state
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
        try:
            # naming _distance keeps LanceDB from warning that it adds it by itself
            got = b.select(["id", "_distance"]).to_arrow()
        except (RuntimeError, OSError, ValueError) as exc:
            raise IndexBackendError(f"lancedb table {self.name} in {self.folder}: "
                                    f"{last_line(exc)}") from None
        # dot distance is 1 - q.v
        return (got["id"].to_numpy().astype(np.int64),
                1.0 - got["_distance"].to_numpy().astype(np.float32))

    def sizes(self) -> dict[str, int]:
        """Bytes on disk of the table folder (data, versions and indexes)."""
        return {"total_bytes": folder_bytes(self.folder / f"{self.name}.lance")}

    def _save_extra(self) -> dict[str, Any]:
        return {"index_type": self.index_type}


class LanceIndex(RemoteIndex[LanceBuiltIndex]):
    """LanceDB with an ANN index (see the module docstring).

    index_type: IVF_HNSW_SQ | IVF_HNSW_PQ | IVF_PQ | IVF_FLAT. num_partitions: IVF
    partitions (1 = one HNSW graph over everything; null = LanceDB's own choice).
    m, ef_construction: HNSW build options. num_sub_vectors: PQ sub-vectors (must divide
    the dim; null = LanceDB's choice). query_params: swept on the one built table, each a
    mapping of ``ef`` (HNSW), ``nprobes``, ``refine_factor`` and optionally ``postfilter``
    (0 | 1). data_dir: the LanceDB database folder.
    """

    engine = "lancedb"
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
        knobs = KNOBS if index_type in _HNSW else tuple(k for k in KNOBS if k != "ef")
        query_params = checked_query_params(query_params, knobs, what=f"index_type={index_type}",
                                            flags=("postfilter",))
        if not data_dir.strip():
            raise OptionError("data_dir", "must be a folder path")
        self.index_type = index_type
        self.num_partitions = num_partitions
        self.m = m
        self.ef_construction = ef_construction
        self.num_sub_vectors = num_sub_vectors
        self._query_params = query_params
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

    @property
    def endpoint(self) -> str:
        return str(self._folder())

    def _folder(self) -> Path:
        return Path(self.data_dir).expanduser().resolve()

    def _marker(self, folder: Path, name: str) -> Path:
        return folder / f"{name}.complete.json"

    def _check_vectors(self, x: np.ndarray) -> None:
        if self.num_sub_vectors is not None and x.shape[1] % self.num_sub_vectors:
            raise OptionError("num_sub_vectors", f"must divide the vector dim {x.shape[1]}, "
                                                 f"got {self.num_sub_vectors}")

    def _connect(self, name: str) -> Connection:
        lancedb = _lancedb()
        folder = self._folder()
        t0 = time.perf_counter()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            db = lancedb.connect(str(folder))
        except (OSError, RuntimeError, ValueError) as exc:
            raise IndexBackendError(f"config key index.data_dir: cannot open LanceDB in "
                                    f"{folder}: {last_line(exc)}") from None
        return Connection(db, None, time.perf_counter() - t0)

    # -- the template's hooks (bench.index.remote): the marker is a JSON file beside the table

    def _ensure_markers(self, conn: Connection) -> None:
        pass  # the database folder itself, made by _connect

    def _read_marker(self, conn: Connection, name: str) -> Marker | None:
        marker = self._marker(self._folder(), name)
        try:
            meta = json.loads(marker.read_text())
            return Marker(str(meta["key"]), int(meta["n_rows"]), float(meta["build_s"]))
        except (OSError, ValueError, KeyError, TypeError):  # none, or torn: rebuild
            return None

    def _complete(self, conn: Connection, name: str, n: int) -> bool:
        try:
            table = conn.handle.open_table(name)
            return bool(table.count_rows() == n
                        and any(i.columns == ["vector"] for i in table.list_indices()))
        except (ValueError, RuntimeError, OSError):
            return False

    def _drop(self, conn: Connection, name: str) -> None:
        folder = self._folder()
        self._marker(folder, name).unlink(missing_ok=True)
        shutil.rmtree(folder / f"{name}.lance", ignore_errors=True)

    def _create(self, conn: Connection, name: str, dim: int, cols: tuple[str, ...]) -> None:
        pass  # LanceDB creates a table from its first data: _insert

    def _insert(self, conn: Connection, name: str, x: np.ndarray,
                attributes: Mapping[str, np.ndarray], cols: tuple[str, ...]) -> None:
        import pyarrow as pa

        data = {"id": pa.array(np.arange(len(x), dtype=np.int32)),
                **{c: pa.array(attributes[c]) for c in cols},
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1])}
        conn.handle.create_table(name, pa.table(data), mode="overwrite")

    def _build_index(self, conn: Connection, name: str, n: int, cols: tuple[str, ...]
                     ) -> None:
        table = conn.handle.open_table(name)
        table.create_index("vector", config=self._config())
        if cols:
            from lancedb.index import BTree

            for c in cols:  # what a real schema has on a filter column
                table.create_index(c, config=BTree())

    def _write_marker(self, conn: Connection, name: str, marker: Marker, params: str) -> None:
        # atomically: its presence means data and index are both committed
        path = self._marker(self._folder(), name)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": marker.key, "n_rows": marker.n_rows,
                                   "build_s": marker.build_s, "params": json.loads(params)}))
        os.replace(tmp, path)

    def _open(self, conn: Connection, name: str, *, key: str, x: np.ndarray,
              cols: tuple[str, ...], reused: bool) -> LanceBuiltIndex:
        return LanceBuiltIndex(conn, table=conn.handle.open_table(name), name=name,
                               folder=self._folder(), index_type=self.index_type,
                               endpoint=self.endpoint, key=key, n_rows=len(x), dim=x.shape[1],
                               columns=cols, vectors=x, reused=reused)
