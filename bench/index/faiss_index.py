"""faiss indexes described by a factory string (Flat, HNSW32, IVF1024,Flat, IVF1024,PQ32...).

Inner product on L2-normalised vectors = cosine similarity. On device=cuda the index is moved
to the GPU (faiss-gpu); when that is not possible the build fails loudly instead of quietly
running on the CPU. faiss GPU has no HNSW (its GPU graph index is CAGRA), so an HNSW factory
with device=cuda is rejected when the index is configured.

The factory may be a template whose ``{nlist}`` / ``{pq_m}`` placeholders are filled at build
time (``IVF{nlist},Flat``, ``IVF{nlist},PQ{pq_m}``): ``nlist`` defaults to
``nlist_factor * sqrt(N)`` (the usual 4*sqrt(N)..16*sqrt(N) range), ``pq_m`` must divide the
vector dimension, which is only known once the vectors are.
"""

from __future__ import annotations

import logging
import math
import re
import string
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import DeviceError, MissingDependencyError
from bench.index.base import BuildInfo, SearchResult

log = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"

#: query-time parameter -> faiss ParameterSpace name
QUERY_KNOBS = {"ef_search": "efSearch", "nprobe": "nprobe"}

#: placeholders a factory template may hold (filled in by ``FaissIndex.resolved_factory``)
TEMPLATE_FIELDS = ("nlist", "pq_m")

#: faiss k-means warns below 39 training points per centroid (Clustering.cpp); the automatic
#: nlist never asks for more centroids than the training sample supports at that ratio.
MIN_POINTS_PER_CENTROID = 39

#: the nlist_factor range: faiss' guideline of 4*sqrt(N) to 16*sqrt(N) inverted lists
NLIST_FACTOR_RANGE = (4.0, 16.0)

# A top-level graph index (HNSW, NSG) has no GPU implementation in faiss; an HNSW coarse
# quantizer inside an IVF index (`IVF4096_HNSW32,Flat`) is fine, hence "start or after a comma".
_CPU_ONLY_GRAPH = re.compile(r"(^|,)\s*(HNSW|NSG)")


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise MissingDependencyError("faiss-cpu (or faiss-gpu)", "cpu", "the faiss index") from None
    return faiss


def _last_line(exc: BaseException) -> str:
    """faiss errors carry a C++ stack header; its last line is the message."""
    text = str(exc).strip()
    return text.splitlines()[-1] if text else "invalid"


def _template_fields(factory: str) -> tuple[str, ...]:
    """The placeholder names of a factory template, validated (OptionError("factory", ...))."""
    try:
        parsed = list(string.Formatter().parse(factory))
    except ValueError as exc:
        raise OptionError("factory", f"malformed template {factory!r}: {exc}") from None
    fields: list[str] = []
    allowed = ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in TEMPLATE_FIELDS or spec or conversion:
            raise OptionError(
                "factory", f"unknown placeholder {{{name}}} in {factory!r}; allowed: {allowed}"
            )
        if name not in fields:
            fields.append(name)
    return tuple(fields)


def _core_index(faiss: Any, index: Any) -> Any:
    """The index under pre-transforms / id maps / refinement, where the query knobs live."""
    idx = faiss.downcast_index(index)
    while True:
        if isinstance(idx, faiss.IndexPreTransform | faiss.IndexIDMap | faiss.IndexIDMap2):
            idx = faiss.downcast_index(idx.index)
        elif isinstance(idx, faiss.IndexRefine):
            idx = faiss.downcast_index(idx.base_index)
        else:
            return idx


def _knob_defaults(faiss: Any, index: Any) -> dict[str, int]:
    """Current value of every query knob the index supports.

    Search applies these before the caller's params so that a search is stateless: without
    it a ``{}`` entry of a sweep would silently inherit the knob set by the previous entry.
    """
    core = _core_index(faiss, index)
    knobs: dict[str, int] = {}
    if isinstance(core, faiss.IndexHNSW):
        knobs["ef_search"] = int(core.hnsw.efSearch)
    if isinstance(core, faiss.IndexIVF):
        knobs["nprobe"] = int(core.nprobe)
    return knobs


def serialized_bytes(faiss: Any, index: Any) -> int:
    """Size of ``index`` as ``write_index`` writes it, counted while streaming:
    ``serialize_index`` would hold a second full copy of the index in memory (1.5 GB for an
    IVF-Flat over 1M 384-d vectors) just to read its length."""
    total = 0

    def count(chunk: bytes) -> int:
        nonlocal total
        total += len(chunk)
        return len(chunk)

    writer = faiss.PyCallbackIOWriter(count)
    faiss.write_index(index, writer)
    del writer  # flushes the writer's buffer into ``count``
    return total


class FaissBuiltIndex:
    """A built faiss index (CPU copy kept for saving; searched on ``device``)."""

    def __init__(self, index: Any, device: str) -> None:
        faiss = _faiss()
        self._index = index
        self._device = device
        self._cpu_index = index
        self._defaults = _knob_defaults(faiss, index)
        #: the knob values last applied by ``search`` (only ``search`` sets knobs): setting
        #: them again per query costs a ParameterSpace per call, harness time, not search time
        self._applied: dict[str, int | float] | None = None
        if device == "cuda":
            if not hasattr(faiss, "StandardGpuResources"):
                raise DeviceError("index: device=cuda but the installed faiss has no GPU support "
                                  "(install the `gpu` extra: faiss-gpu)")
            self._res = faiss.StandardGpuResources()
            try:
                self._index = faiss.index_cpu_to_gpu(self._res, 0, index)
            except RuntimeError as exc:
                # e.g. an index type faiss has no GPU version of: say so, never fall back
                raise DeviceError(
                    f"index: faiss cannot move {type(faiss.downcast_index(index)).__name__} to "
                    f"the GPU ({_last_line(exc)}); use device=cpu or a GPU-capable factory"
                ) from None

    @property
    def knobs(self) -> dict[str, int]:
        """Query knobs this index supports and their defaults (as built or loaded)."""
        return dict(self._defaults)

    def check_params(self, params: Mapping[str, int | float], option: str) -> None:
        """OptionError(option, ...) when ``params`` names a knob this index does not have."""
        for name in params:
            if name not in QUERY_KNOBS:
                raise OptionError(option, f"unknown query knob {name!r}")
            if name not in self._defaults:
                kind = type(_core_index(_faiss(), self._cpu_index)).__name__
                raise OptionError(f"{option}.{name}", f"does not apply to a faiss {kind}")

    def search(
        self, queries: np.ndarray, k: int, params: Mapping[str, int | float]
    ) -> SearchResult:
        if self._applied is None or params != self._applied:
            faiss = _faiss()
            self.check_params(params, "query_params")
            space = (faiss.GpuParameterSpace() if self._device == "cuda"
                     else faiss.ParameterSpace())
            for name, value in {**self._defaults, **params}.items():
                space.set_index_parameter(self._index, QUERY_KNOBS[name], value)
            self._applied = dict(params)
        if queries.dtype != np.float32 or not queries.flags.c_contiguous:
            queries = np.ascontiguousarray(queries, dtype=np.float32)
        scores, ids = self._index.search(queries, k)
        return SearchResult(ids=ids if ids.dtype == np.int64 else ids.astype(np.int64),
                            scores=scores)

    def save(self, directory: Path) -> None:
        _faiss().write_index(self._cpu_index, str(directory / INDEX_FILE))


class FaissIndex:
    """A faiss index from a factory string or template.

    factory: e.g. ``Flat`` (exact), ``HNSW32``, ``IVF256,Flat``, ``IVF256,PQ16``, or a template
    ``IVF{nlist},Flat`` / ``IVF{nlist},PQ{pq_m}``.
    nlist: inverted lists for ``{nlist}``; None = auto = round(nlist_factor * sqrt(N)), clamped
    to [1, n_train // 39] where n_train = min(N, train_size) (faiss warns below 39 training
    points per centroid, and the centroids are trained on that sample, not on all N).
    nlist_factor: 4..16, the multiplier of sqrt(N) for the auto nlist.
    pq_m: PQ sub-quantizers for ``{pq_m}``; must divide the vector dim (checked at build).
    query_params: list of query-time settings swept on the one built index, each a mapping of
    ``ef_search`` / ``nprobe``; ``[{}]`` (or omitted) = faiss' defaults, ``[]`` is an error
    (a sweep of nothing). train_size: max vectors used to train IVF/PQ quantisers.
    """

    def __init__(
        self,
        *,
        factory: str = "Flat",
        nlist: int | None = None,
        nlist_factor: float = 4.0,
        pq_m: int | None = None,
        hnsw_ef_construction: int | None = None,
        query_params: list[dict[str, int]] | None = None,
        train_size: int = 100_000,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        if not factory.strip():
            raise OptionError("factory", "must be a faiss index factory string, e.g. Flat")
        fields = _template_fields(factory.strip())
        if device == "cuda" and _CPU_ONLY_GRAPH.search(factory):
            raise OptionError(
                "factory",
                f"{factory.strip()!r} is a CPU-only graph index: faiss has no GPU HNSW/NSG "
                "(its GPU graph index is CAGRA); use device=cpu or an IVF factory on the GPU",
            )
        if nlist is not None:
            if "nlist" not in fields:
                raise OptionError("nlist", f"factory {factory.strip()!r} has no {{nlist}}")
            if nlist < 1:
                raise OptionError("nlist", f"must be >= 1 or null (auto), got {nlist}")
        lo, hi = NLIST_FACTOR_RANGE
        if not lo <= nlist_factor <= hi:
            raise OptionError("nlist_factor", f"must be in [{lo:g}, {hi:g}], got {nlist_factor}")
        if "pq_m" in fields and pq_m is None:
            raise OptionError("pq_m", f"required by factory {factory.strip()!r}")
        if pq_m is not None:
            if "pq_m" not in fields:
                raise OptionError("pq_m", f"factory {factory.strip()!r} has no {{pq_m}}")
            if pq_m < 1:
                raise OptionError("pq_m", f"must be >= 1, got {pq_m}")
        if hnsw_ef_construction is not None and hnsw_ef_construction < 1:
            raise OptionError("hnsw_ef_construction", "must be >= 1")
        if query_params is None:
            query_params = [{}]
        if not query_params:
            raise OptionError("query_params", "must list at least one query-time setting; "
                                              "use [{}] for faiss' defaults")
        for i, qp in enumerate(query_params):
            for name, value in qp.items():
                if name not in QUERY_KNOBS:
                    allowed = ", ".join(QUERY_KNOBS)
                    raise OptionError(f"query_params[{i}].{name}", f"unknown; allowed: {allowed}")
                if int(value) < 1:
                    raise OptionError(f"query_params[{i}].{name}", f"must be >= 1, got {value}")
        if train_size < 1:
            raise OptionError("train_size", f"must be >= 1, got {train_size}")
        self.factory = factory.strip()
        self.nlist = nlist
        self.nlist_factor = float(nlist_factor)
        self.pq_m = pq_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self._query_params = [dict(q) for q in query_params]
        self.train_size = train_size
        self.seed = seed
        self.device = device
        self.exact = self.factory == "Flat"
        self._fields = fields

    def resolve_nlist(self, n_vectors: int) -> int | None:
        """The nlist a build on ``n_vectors`` vectors uses (None when the factory has no
        ``{nlist}``)."""
        if "nlist" not in self._fields:
            return None
        if self.nlist is not None:
            return self.nlist
        n_train = min(n_vectors, self.train_size)
        upper = max(1, n_train // MIN_POINTS_PER_CENTROID)
        return int(min(max(round(self.nlist_factor * math.sqrt(n_vectors)), 1), upper))

    def resolved_factory(self, n_vectors: int, dim: int) -> str:
        """The factory string faiss gets for ``n_vectors`` x ``dim`` vectors."""
        if not self._fields:
            return self.factory
        if self.pq_m is not None and dim % self.pq_m:
            raise OptionError("pq_m", f"must divide the vector dim {dim}, got {self.pq_m}")
        values = {"nlist": self.resolve_nlist(n_vectors), "pq_m": self.pq_m}
        return self.factory.format(**{f: values[f] for f in self._fields})

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        """Build options for the cache key.

        For a template factory the key also holds the filled-in values: pass ``n_vectors`` to
        get the resolved nlist; without it an auto nlist is keyed as ``"auto"`` plus
        ``nlist_factor`` (still deterministic, as N is fixed by the upstream embeddings key).
        A plain factory keeps exactly the keys it always had, so existing caches stay valid.
        """
        params: dict[str, object] = {
            "factory": self.factory,
            "hnsw_ef_construction": self.hnsw_ef_construction,
            "train_size": self.train_size,
            "seed": self.seed,
            "metric": "inner_product",
        }
        if "nlist" in self._fields:
            if n_vectors is not None:
                params["nlist"] = self.resolve_nlist(n_vectors)
            elif self.nlist is not None:
                params["nlist"] = self.nlist
            else:
                params["nlist"] = "auto"
                params["nlist_factor"] = self.nlist_factor
        if "pq_m" in self._fields:
            params["pq_m"] = self.pq_m
        return params

    def query_params(self) -> list[dict[str, int | float]]:
        return [dict(q) for q in self._query_params]

    def build(self, vectors: np.ndarray) -> tuple[FaissBuiltIndex, BuildInfo]:
        faiss = _faiss()
        n, dim = vectors.shape
        factory = self.resolved_factory(n, dim)
        t0 = time.perf_counter()
        try:
            index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as exc:
            raise OptionError("factory", f"faiss rejects {factory!r}: {_last_line(exc)}") from None
        if self.hnsw_ef_construction is not None:
            hnsw_index = _core_index(faiss, index)
            if not isinstance(hnsw_index, faiss.IndexHNSW):
                raise OptionError("hnsw_ef_construction", f"{factory!r} is not an HNSW index")
            hnsw_index.hnsw.efConstruction = self.hnsw_ef_construction
        core = _core_index(faiss, index)
        if isinstance(core, faiss.IndexIVFPQ | faiss.IndexPQ):
            # the factory turns on polysemous training (a simulated-annealing reordering of the
            # PQ centroids, ~40 s even on 2k vectors) which only Hamming-distance pre-filtering
            # (polysemous_ht) uses; search here is plain ADC, which it does not change
            core.do_polysemous_training = False
        # a knob the index lacks (ef_search on IVF) fails here, before the sweep starts
        supported = _knob_defaults(faiss, index)
        for i, qp in enumerate(self._query_params):
            for name in qp:
                if name not in supported:
                    raise OptionError(f"query_params[{i}].{name}", f"does not apply to {factory!r}")
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if not index.is_trained:
            rng = np.random.default_rng(self.seed)
            sample = x if n <= self.train_size else x[rng.choice(n, self.train_size, replace=False)]
            try:
                index.train(sample)
            except RuntimeError as exc:  # e.g. fewer training points than centroids
                raise OptionError(
                    "factory", f"training {factory!r} on {len(sample)} vectors: {_last_line(exc)}"
                ) from None
        index.add(x)
        build_s = time.perf_counter() - t0
        size = serialized_bytes(faiss, index)
        log.info("index: built faiss %r on %d x %d vectors in %.2f s", factory, n, dim, build_s)
        return FaissBuiltIndex(index, self.device), BuildInfo(build_s, size, n, dim)

    def load(self, directory: Path) -> FaissBuiltIndex:
        index = _faiss().read_index(str(directory / INDEX_FILE))
        return FaissBuiltIndex(index, self.device)
