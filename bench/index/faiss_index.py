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

import json
import logging
import math
import re
import shutil
import string
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.cache.space import require_free
from bench.config.build import OptionError
from bench.errors import DeviceError, MissingDependencyError
from bench.index.base import BuildInfo, SearchResult
from bench.index.memory import GIB, IndexMemory, core_index, estimate, machine_memory_bytes

log = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
#: the inverted lists of an ``on_disk`` IVF index (memory-mapped; next to INDEX_FILE)
LISTS_FILE = "lists.ivfdata"
#: the memory math of a build (``bench.index.memory``), written next to the index
MEMORY_FILE = "memory.json"

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


def _knob_defaults(faiss: Any, index: Any) -> dict[str, int]:
    """Current value of every query knob the index supports.

    Search applies these before the caller's params so that a search is stateless: without
    it a ``{}`` entry of a sweep would silently inherit the knob set by the previous entry.
    """
    core = core_index(faiss, index)
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

    def __init__(self, index: Any, device: str, num_gpus: int | None = 1) -> None:
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
            try:
                if num_gpus == 1:
                    self._res = faiss.StandardGpuResources()
                    self._index = faiss.index_cpu_to_gpu(self._res, 0, index)
                else:
                    # the vectors split across the GPUs (IndexShards: each searches its part,
                    # the results merged), so an index larger than one GPU's memory fits
                    co = faiss.GpuMultipleClonerOptions()
                    co.shard = True
                    self._index = faiss.index_cpu_to_all_gpus(index, co=co, ngpu=num_gpus or -1)
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
                kind = type(core_index(_faiss(), self._cpu_index)).__name__
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
    on_disk: IVF only: the inverted lists are filled shard by shard (``add_batch`` vectors
    each, one in-memory shard at a time, merged into faiss' ``OnDiskInvertedLists``) and live
    in a memory-mapped file next to the index, so an index larger than RAM builds and searches;
    search results are those of the in-memory index (same lists, same order).
    add_batch: vectors added per call (IVF: per shard); does not change the built index.
    memory_limit_gb: the memory the build may use (GiB); null = this machine's RAM (device=cpu)
    or the GPUs' memory (device=cuda). The memory math (``bench.index.memory``) is logged before
    anything is built, and a build whose peak exceeds the limit is refused (ConfigError naming
    ``index.memory_limit_gb``) before training.
    num_gpus: device=cuda: 1 = the first GPU; N = the vectors sharded over the first N GPUs
    (``index_cpu_to_all_gpus`` with ``shard=True``); null = every GPU.
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
        on_disk: bool = False,
        add_batch: int = 262_144,
        memory_limit_gb: float | None = None,
        num_gpus: int | None = 1,
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
        if on_disk and not re.match(r"^(\w+,)*IVF", factory.strip()):
            raise OptionError("on_disk", f"needs an IVF factory (inverted lists), got "
                                         f"{factory.strip()!r}")
        if on_disk and device == "cuda":
            raise OptionError("on_disk", "a GPU index holds its lists in GPU memory; "
                                         "use device=cpu or on_disk=false")
        if add_batch < 1:
            raise OptionError("add_batch", f"must be >= 1, got {add_batch}")
        if memory_limit_gb is not None and not memory_limit_gb > 0:
            raise OptionError("memory_limit_gb", f"must be > 0 or null, got {memory_limit_gb}")
        if num_gpus is not None and num_gpus < 1:
            raise OptionError("num_gpus", f"must be >= 1 or null (every GPU), got {num_gpus}")
        if num_gpus != 1 and device != "cuda":
            raise OptionError("num_gpus", f"applies to device=cuda, not {device}")
        self.factory = factory.strip()
        self.nlist = nlist
        self.nlist_factor = float(nlist_factor)
        self.pq_m = pq_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self._query_params = [dict(q) for q in query_params]
        self.train_size = train_size
        self.seed = seed
        self.on_disk = bool(on_disk)
        self.add_batch = add_batch
        self.memory_limit_gb = memory_limit_gb
        self.num_gpus = num_gpus
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
        if self.on_disk:  # keyed only when set: in-memory builds keep the keys they had
            params["on_disk"] = True
        return params

    def query_params(self) -> list[dict[str, int | float]]:
        return [dict(q) for q in self._query_params]

    def build(self, vectors: np.ndarray) -> tuple[FaissBuiltIndex, BuildInfo]:
        if self.on_disk:
            raise OptionError("on_disk", "an on-disk index is built into its artifact "
                                         "directory (build_in)")
        return self._build(vectors, None)

    def build_in(self, vectors: np.ndarray, directory: Path) -> tuple[FaissBuiltIndex, BuildInfo]:
        """``build``, with the files it makes while building (the memory math; an on-disk
        index's inverted lists) in the artifact ``directory``."""
        return self._build(vectors, directory)

    def memory(self, n_vectors: int, dim: int) -> IndexMemory:
        """The memory math of a build on ``n_vectors`` x ``dim`` vectors (nothing built)."""
        faiss = _faiss()
        return self._memory(faiss, self._empty_index(faiss, n_vectors, dim), n_vectors, dim)

    def memory_limit_bytes(self) -> int | None:
        """The configured limit, else this machine's RAM (cpu) or its GPUs' memory (cuda;
        None when it cannot be read)."""
        if self.memory_limit_gb is not None:
            return int(self.memory_limit_gb * GIB)
        if self.device != "cuda":
            return machine_memory_bytes()
        return gpu_memory_bytes(self.num_gpus)

    def check_memory(self, mem: IndexMemory) -> None:
        """OptionError("memory_limit_gb") when the build's peak cannot fit the limit."""
        limit = self.memory_limit_bytes()
        if limit is None or mem.peak_bytes <= limit:
            return
        where = ("configured" if self.memory_limit_gb is not None
                 else "the GPUs' memory" if self.device == "cuda" else "this machine's RAM")
        hint = ("on_disk=true keeps the inverted lists out of RAM, "
                if re.match(r"^(\w+,)*IVF", self.factory) and not self.on_disk else "")
        raise OptionError(
            "memory_limit_gb",
            f"{mem.describe()} -- peak {mem.peak_bytes / GIB:.2f} GiB does not fit "
            f"{limit / GIB:.2f} GiB ({where}); {hint}a compressed factory (PQ, SQ8) needs less, "
            f"or raise memory_limit_gb")

    def _empty_index(self, faiss: Any, n: int, dim: int) -> Any:
        factory = self.resolved_factory(n, dim)
        try:
            return faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as exc:
            raise OptionError("factory", f"faiss rejects {factory!r}: {_last_line(exc)}") from None

    def _memory(self, faiss: Any, index: Any, n: int, dim: int) -> IndexMemory:
        return estimate(faiss, index, n=n, dim=dim, factory=self.resolved_factory(n, dim),
                        train_n=self.train_size, add_batch=self.add_batch, on_disk=self.on_disk)

    def _build(self, vectors: np.ndarray, directory: Path | None
               ) -> tuple[FaissBuiltIndex, BuildInfo]:
        faiss = _faiss()
        n, dim = vectors.shape
        factory = self.resolved_factory(n, dim)
        t0 = time.perf_counter()
        index = self._empty_index(faiss, n, dim)
        if self.hnsw_ef_construction is not None:
            hnsw_index = core_index(faiss, index)
            if not isinstance(hnsw_index, faiss.IndexHNSW):
                raise OptionError("hnsw_ef_construction", f"{factory!r} is not an HNSW index")
            hnsw_index.hnsw.efConstruction = self.hnsw_ef_construction
        core = core_index(faiss, index)
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
        # the memory math, said and checked before any training or adding
        mem = self._memory(faiss, index, n, dim)
        log.info("index: memory %s", mem.describe())
        self.check_memory(mem)
        if directory is not None:
            # the serialized index is about its resident bytes (the on-disk lists besides)
            require_free(directory, mem.resident_bytes + mem.disk_lists,
                         f"the index ({factory} on {n:,} x {dim})")
            (directory / MEMORY_FILE).write_text(json.dumps(mem.as_dict(), indent=1))
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
            del sample
        lists_bytes = 0
        if self.on_disk:
            assert directory is not None  # build() refuses on_disk without a directory
            lists_bytes = self._fill_on_disk(faiss, index, x, directory)
        elif isinstance(core, faiss.IndexIVF):
            # shard by shard (faiss adds an IVF in 65,536-vector blocks either way: the lists
            # come out the same); a graph index is added at once, as its insertion order
            # (highest level first within a call) would change with the batches
            for i0 in range(0, n, self.add_batch):
                index.add(x[i0:i0 + self.add_batch])
        else:
            index.add(x)
        build_s = time.perf_counter() - t0
        size = serialized_bytes(faiss, index) + lists_bytes
        log.info("index: built faiss %r on %d x %d vectors in %.2f s", factory, n, dim, build_s)
        return (FaissBuiltIndex(index, self.device, self.num_gpus),
                BuildInfo(build_s, size, n, dim))

    def _fill_on_disk(self, faiss: Any, index: Any, x: np.ndarray, directory: Path) -> int:
        """Fill the trained, empty IVF ``index`` with ``x`` shard by shard: each shard an
        in-memory clone of the trained index holding ``add_batch`` vectors (their row numbers
        as ids), written out and dropped; then faiss merges the shards' lists into one
        ``OnDiskInvertedLists`` file (``LISTS_FILE``) in shard order, so every list holds its
        vectors in row order, as an in-memory add leaves them. Returns the file's size."""
        shards = directory / "shards"
        shards.mkdir()
        names = []
        n = len(x)
        for s, i0 in enumerate(range(0, n, self.add_batch)):
            i1 = min(n, i0 + self.add_batch)
            shard = faiss.clone_index(index)
            shard.add_with_ids(x[i0:i1], np.arange(i0, i1, dtype=np.int64))
            name = shards / f"shard_{s:05d}.faiss"
            faiss.write_index(shard, str(name))
            names.append(str(name))
            del shard
            log.info("index: on-disk shard %d: rows %d-%d", s, i0, i1)
        _merge_ondisk(faiss, index, names, str(directory / LISTS_FILE))
        shutil.rmtree(shards)
        return (directory / LISTS_FILE).stat().st_size

    def load(self, directory: Path) -> FaissBuiltIndex:
        faiss = _faiss()
        if self.on_disk:
            # the lists file is found next to the index, wherever the artifact now lives (the
            # index file names the folder it was built in)
            index = faiss.read_index(str(directory / INDEX_FILE), faiss.IO_FLAG_ONDISK_SAME_DIR)
        else:
            index = faiss.read_index(str(directory / INDEX_FILE))
        return FaissBuiltIndex(index, self.device, self.num_gpus)


def _merge_ondisk(faiss: Any, index: Any, shard_files: list[str], lists_file: str) -> None:
    """``faiss.contrib.ondisk.merge_ondisk`` without its leak: it disowns the shards' memory-
    mapped inverted lists so they outlive the merge, and they were never freed, so every
    shard file stayed mapped (deleted, its disk not given back: 14.4 GiB at 10M vectors)
    until the process ended. Here the shard indexes own their lists and are dropped once the
    lists are merged into ``lists_file``; the merge itself is faiss' (``merge_from_multiple``
    in shard order), so the lists are the same."""
    shard_indexes = [faiss.read_index(f, faiss.IO_FLAG_MMAP) for f in shard_files]
    lists = faiss.InvertedListsPtrVector()
    for shard in shard_indexes:
        lists.push_back(faiss.extract_index_ivf(shard).invlists)
    ivf = faiss.extract_index_ivf(index)
    if index.ntotal != 0:
        raise ValueError("the on-disk merge fills an empty trained index")
    merged = faiss.OnDiskInvertedLists(ivf.nlist, ivf.code_size, lists_file)
    ntotal = merged.merge_from_multiple(lists.data(), lists.size(), False)
    index.ntotal = ivf.ntotal = ntotal
    ivf.replace_invlists(merged, True)
    merged.this.disown()
    del lists, shard_indexes  # frees the shards' lists: their files are unmapped


def gpu_memory_bytes(num_gpus: int | None) -> int | None:
    """The memory of the first ``num_gpus`` GPUs (every one: None), summed — a sharded index
    splits across them; None when torch cannot see a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    count = torch.cuda.device_count()
    used = count if num_gpus is None else min(num_gpus, count)
    return sum(int(torch.cuda.get_device_properties(i).total_memory) for i in range(used))
