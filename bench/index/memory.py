"""The memory math of a faiss index, computed before it is built, and the refusal when it
cannot fit.

What a built index holds in RAM (or GPU memory) is known from its type, N and d before any
vector is added: faiss itself is asked for the per-vector code size of the configured factory
(an empty index of that factory is constructed, nothing is trained), and the rest is the
arithmetic of faiss' data structures:

- Flat / SQ / PQ (no inverted file): ``N x code_size`` (Flat: ``4 d``; SQ8: ``d``; PQm: ``m``).
- IVF: the inverted lists, ``N x (code_size + 8)`` (codes + int64 ids; on disk with
  ``on_disk=true``: mapped pages the kernel can drop, not heap), the coarse centroids
  ``nlist x 4 d``, a PQ codebook ``ksub x 4 d``.
- HNSW: the stored vectors plus the graph: each vector has ``2 M`` level-0 links and ``M`` per
  upper level (int32); a vector reaches level >= l with probability ``M^-l``, so the expected
  upper-level links are ``M / (M - 1)``; plus its level (int32) and its offset (int64).

Build temporaries: the k-means training sample (``min(N, train_size) x 4 d``, a copy) while an
IVF / PQ index trains, and one add batch (``add_batch x (4 d + 8)``: faiss assigns and encodes
a batch at a time).

Not counted (stated so the figure is not read as more than it is): Python and the faiss
library themselves (~0.3 GB of RSS), and the document vectors being read — a memory-mapped
``.npy`` whose pages are page cache, reclaimable by the kernel (reported apart as
``input_bytes``). The estimate is checked against faiss' own serialized size in the tests and
against measured heap in ``scripts/bench_index_memory.py`` (docs/performance.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

GIB = 1024**3

#: bytes of one inverted-list entry's id (faiss idx_t)
ID_BYTES = 8


@dataclass(frozen=True)
class IndexMemory:
    """Bytes a faiss index over ``n`` x ``dim`` float32 vectors needs.

    ``resident``: (part, bytes) held in RAM once built (GPU memory on device=cuda);
    ``build_extra``: (part, bytes) held on top of it while building; ``disk_lists``: inverted
    lists on disk (``on_disk``); ``input_bytes``: the vectors read (a memmap: page cache)."""

    factory: str
    n: int
    dim: int
    resident: tuple[tuple[str, int], ...]
    build_extra: tuple[tuple[str, int], ...]
    disk_lists: int
    input_bytes: int

    @property
    def resident_bytes(self) -> int:
        return sum(b for _, b in self.resident)

    @property
    def peak_bytes(self) -> int:
        """Resident + the build's temporaries: what the build must find free."""
        return self.resident_bytes + sum(b for _, b in self.build_extra)

    def describe(self) -> str:
        """One line: the math, part by part."""
        parts = " + ".join(f"{name} {_fmt(b)}" for name, b in self.resident)
        extra = " + ".join(f"{name} {_fmt(b)}" for name, b in self.build_extra)
        line = (f"{self.factory} on {self.n:,} x {self.dim}: resident {_fmt(self.resident_bytes)}"
                f" ({parts})")
        if extra:
            line += f"; while building + {extra} = peak {_fmt(self.peak_bytes)}"
        if self.disk_lists:
            line += f"; inverted lists on disk {_fmt(self.disk_lists)} (mapped)"
        return line + f"; input vectors {_fmt(self.input_bytes)} (memmap, page cache)"

    def as_dict(self) -> dict[str, object]:
        return {"factory": self.factory, "n": self.n, "dim": self.dim,
                "resident": dict(self.resident), "build_extra": dict(self.build_extra),
                "resident_bytes": self.resident_bytes, "peak_bytes": self.peak_bytes,
                "disk_lists_bytes": self.disk_lists, "input_bytes": self.input_bytes}


def _fmt(n_bytes: int) -> str:
    if n_bytes >= GIB:
        return f"{n_bytes / GIB:.2f} GiB"
    return f"{n_bytes / 1024**2:.1f} MiB"


def core_index(faiss: Any, index: Any) -> Any:
    """The index under pre-transforms / id maps / refinement, where the query knobs live."""
    idx = faiss.downcast_index(index)
    while True:
        if isinstance(idx, faiss.IndexPreTransform | faiss.IndexIDMap | faiss.IndexIDMap2):
            idx = faiss.downcast_index(idx.index)
        elif isinstance(idx, faiss.IndexRefine):
            idx = faiss.downcast_index(idx.base_index)
        else:
            return idx


def estimate(faiss: Any, index: Any, *, n: int, dim: int, factory: str, train_n: int,
             add_batch: int, on_disk: bool = False) -> IndexMemory:
    """The memory math of ``index`` (an EMPTY faiss index of the resolved ``factory``, as
    ``faiss.index_factory`` returns it) once ``n`` vectors of ``dim`` are added."""
    core = core_index(faiss, index)
    resident: list[tuple[str, int]] = []
    extra: list[tuple[str, int]] = []
    disk = 0
    if isinstance(core, faiss.IndexIVF):
        lists = n * (int(core.code_size) + ID_BYTES)
        if on_disk:
            disk = lists
        else:
            resident.append(("inverted lists", lists))
        resident.append(("centroids", _quantizer_bytes(faiss, core.quantizer, int(core.nlist))))
        pq = getattr(faiss.downcast_index(core), "pq", None)
        if pq is not None:
            resident.append(("PQ codebook", int(pq.M) * int(pq.ksub) * int(pq.dsub) * 4))
    elif isinstance(core, faiss.IndexHNSW):
        m = _hnsw_m(faiss, core)
        resident.append(("stored vectors", n * _storage_code_size(faiss, core, dim)))
        resident.append(("graph links", int(n * (2 * m + m / (m - 1)) * 4)))
        resident.append(("levels + offsets", n * (4 + 8)))
    else:
        code = int(index.sa_code_size()) if hasattr(index, "sa_code_size") else dim * 4
        resident.append(("codes", n * code))
        pq = getattr(faiss.downcast_index(core), "pq", None)
        if pq is not None:
            resident.append(("PQ codebook", int(pq.M) * int(pq.ksub) * int(pq.dsub) * 4))
    transforms = _transform_bytes(faiss, index)
    if transforms:
        resident.append(("pre-transforms", transforms))
    if not index.is_trained and n > train_n:  # a sample is copied; all N train in place
        extra.append(("training sample", train_n * dim * 4))
    if isinstance(core, faiss.IndexIVF):
        extra.append(("add batch", min(n, add_batch) * (dim * 4 + ID_BYTES)))
    return IndexMemory(factory, n, dim, tuple(resident), tuple(extra), disk, n * dim * 4)


def _transform_bytes(faiss: Any, index: Any) -> int:
    """The matrices of an IndexPreTransform's linear transforms (OPQ, PCA): d_out x d_in + d_out
    float32 each (empty before training, so sized from their dimensions)."""
    idx = faiss.downcast_index(index)
    if not isinstance(idx, faiss.IndexPreTransform):
        return 0
    total = 0
    for i in range(idx.chain.size()):
        vt = faiss.downcast_VectorTransform(idx.chain.at(i))
        if isinstance(vt, faiss.LinearTransform):
            total += (int(vt.d_in) * int(vt.d_out) + int(vt.d_out)) * 4
    return total


def _quantizer_bytes(faiss: Any, quantizer: Any, nlist: int) -> int:
    """The coarse quantizer holding ``nlist`` centroids (empty before training)."""
    q = faiss.downcast_index(quantizer)
    d = int(q.d)
    if isinstance(q, faiss.IndexHNSW):
        m = _hnsw_m(faiss, q)
        return nlist * d * 4 + int(nlist * (2 * m + m / (m - 1)) * 4) + nlist * 12
    return nlist * d * 4


def _hnsw_m(faiss: Any, core: Any) -> int:
    """M of an HNSW index (its level-1 neighbour count; level 0 has 2 M)."""
    return int(core.hnsw.nb_neighbors(1))


def _storage_code_size(faiss: Any, core: Any, dim: int) -> int:
    storage = faiss.downcast_index(core.storage)
    return int(storage.sa_code_size()) if hasattr(storage, "sa_code_size") else dim * 4


def machine_memory_bytes() -> int:
    """This machine's physical memory (``MemTotal``; ``os.sysconf`` where /proc is absent)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
