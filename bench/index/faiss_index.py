"""faiss indexes described by a factory string (Flat, HNSW32, IVF1024,Flat, IVF1024,PQ32...).

Inner product on L2-normalised vectors = cosine similarity. On device=cuda the index is moved
to the GPU (faiss-gpu); when that is not possible the build fails loudly instead of quietly
running on the CPU.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import DeviceError, MissingDependencyError
from bench.index.base import BuildInfo, SearchResult

INDEX_FILE = "index.faiss"

#: query-time parameter -> faiss ParameterSpace name
QUERY_KNOBS = {"ef_search": "efSearch", "nprobe": "nprobe"}


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise MissingDependencyError("faiss-cpu (or faiss-gpu)", "cpu", "the faiss index") from None
    return faiss


class FaissBuiltIndex:
    def __init__(self, index: Any, device: str) -> None:
        self._index = index
        self._device = device
        self._cpu_index = index
        if device == "cuda":
            faiss = _faiss()
            if not hasattr(faiss, "StandardGpuResources"):
                raise DeviceError("index: device=cuda but the installed faiss has no GPU support "
                                  "(install the `gpu` extra: faiss-gpu)")
            self._res = faiss.StandardGpuResources()
            self._index = faiss.index_cpu_to_gpu(self._res, 0, index)

    def search(
        self, queries: np.ndarray, k: int, params: Mapping[str, int | float]
    ) -> SearchResult:
        faiss = _faiss()
        for name, value in params.items():
            if name not in QUERY_KNOBS:
                raise OptionError("query_params", f"unknown query knob {name!r}")
            if self._device == "cuda":
                faiss.GpuParameterSpace().set_index_parameter(
                    self._index, QUERY_KNOBS[name], value
                )
            else:
                faiss.ParameterSpace().set_index_parameter(self._index, QUERY_KNOBS[name], value)
        scores, ids = self._index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return SearchResult(ids=ids.astype(np.int64, copy=False), scores=scores)

    def save(self, directory: Path) -> None:
        _faiss().write_index(self._cpu_index, str(directory / INDEX_FILE))


class FaissIndex:
    """A faiss index from a factory string.

    factory: e.g. ``Flat`` (exact), ``HNSW32``, ``IVF256,Flat``, ``IVF256,PQ16``.
    query_params: list of query-time settings swept on the one built index, each a mapping of
    ``ef_search`` / ``nprobe``. train_size: max vectors used to train IVF/PQ quantisers.
    """

    def __init__(
        self,
        *,
        factory: str = "Flat",
        hnsw_ef_construction: int | None = None,
        query_params: list[dict[str, int]] | None = None,
        train_size: int = 100_000,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        if not factory.strip():
            raise OptionError("factory", "must be a faiss index factory string, e.g. Flat")
        if hnsw_ef_construction is not None and hnsw_ef_construction < 1:
            raise OptionError("hnsw_ef_construction", "must be >= 1")
        for i, qp in enumerate(query_params or [{}]):
            for name, value in qp.items():
                if name not in QUERY_KNOBS:
                    allowed = ", ".join(QUERY_KNOBS)
                    raise OptionError(f"query_params[{i}].{name}", f"unknown; allowed: {allowed}")
                if int(value) < 1:
                    raise OptionError(f"query_params[{i}].{name}", f"must be >= 1, got {value}")
        if train_size < 1:
            raise OptionError("train_size", f"must be >= 1, got {train_size}")
        self.factory = factory.strip()
        self.hnsw_ef_construction = hnsw_ef_construction
        self._query_params = [dict(q) for q in (query_params or [{}])]
        self.train_size = train_size
        self.seed = seed
        self.device = device
        self.exact = self.factory == "Flat"

    def cache_params(self) -> dict[str, object]:
        return {
            "factory": self.factory,
            "hnsw_ef_construction": self.hnsw_ef_construction,
            "train_size": self.train_size,
            "seed": self.seed,
            "metric": "inner_product",
        }

    def query_params(self) -> list[dict[str, int | float]]:
        return [dict(q) for q in self._query_params]

    def build(self, vectors: np.ndarray) -> tuple[FaissBuiltIndex, BuildInfo]:
        faiss = _faiss()
        n, dim = vectors.shape
        t0 = time.perf_counter()
        try:
            index = faiss.index_factory(dim, self.factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as exc:
            msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else "invalid"
            raise OptionError("factory", f"faiss rejects {self.factory!r}: {msg}") from None
        if self.hnsw_ef_construction is not None:
            hnsw_index = faiss.downcast_index(index)
            if not isinstance(hnsw_index, faiss.IndexHNSW):
                raise OptionError("hnsw_ef_construction", f"{self.factory!r} is not an HNSW index")
            hnsw_index.hnsw.efConstruction = self.hnsw_ef_construction
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if not index.is_trained:
            rng = np.random.default_rng(self.seed)
            sample = x if n <= self.train_size else x[rng.choice(n, self.train_size, replace=False)]
            index.train(sample)
        index.add(x)
        build_s = time.perf_counter() - t0
        size = int(faiss.serialize_index(index).nbytes)
        return FaissBuiltIndex(index, self.device), BuildInfo(build_s, size, n, dim)

    def load(self, directory: Path) -> FaissBuiltIndex:
        index = _faiss().read_index(str(directory / INDEX_FILE))
        return FaissBuiltIndex(index, self.device)
