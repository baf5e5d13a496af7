"""Exact top-k by brute force in torch: one matmul and one ``topk`` per block, on any CUDA box.

Why: faiss-gpu has no pip wheel many users can install, but every CUDA box with torch can
multiply matrices. This index scores every query against every vector (inner product, i.e.
cosine on normalised vectors), so it is the exact search on the GPU and makes exact-vs-ANN
measurable there.

Memory: queries are processed ``query_batch`` at a time and the corpus ``block_rows`` rows at
a time; each block's top-k is merged into a running top-k, so the largest temporary is one
``query_batch x block_rows`` score block whatever the corpus size. On CUDA the corpus is kept
on the GPU (in ``precision``) when it fits in half the free memory, else streamed block by
block from host memory; a CUDA out-of-memory halves the query batch and retries.

Precision: fp32 everywhere (the only choice on CPU); fp16/bf16 on CUDA halve the memory and
use the tensor cores, but round scores to ~3 (fp16) or ~2 (bf16) significant digits, so two
close candidates can swap. Only fp32 is therefore declared ``exact`` (the ANN-recall
reference); a half-precision run is exhaustive but gets its ANN recall measured against the
fp32 reference like any approximate index.

Saved as ``vectors.npy`` (float32, memory-mapped on load): no pickle, readable anywhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import DeviceError, MissingDependencyError
from bench.index.base import BuildInfo, SearchResult

log = logging.getLogger(__name__)

VECTORS_FILE = "vectors.npy"
PRECISIONS = ("fp32", "fp16", "bf16")
#: score of a missing result (k > N), as faiss pads: the lowest finite float32
MISSING_SCORE = float(np.finfo(np.float32).min)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "cpu", "index=torch_flat") from None
    return torch


def _dtype(torch: Any, precision: str) -> Any:
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


class TorchFlatBuiltIndex:
    """The corpus vectors (float32, host) and the settings to search them on ``device``."""

    def __init__(self, vectors: np.ndarray, *, device: str, precision: str, query_batch: int,
                 block_rows: int) -> None:
        self.vectors = vectors
        self.device = device
        self.precision = precision
        self.query_batch = query_batch
        self.block_rows = block_rows
        self._resident: Any = None  # the corpus on the device, when it fits

    def _on_device(self, torch: Any) -> Any:
        """The whole corpus as one device tensor, or None when it should be streamed."""
        if self._resident is not None:
            return self._resident
        dtype = _dtype(torch, self.precision)
        n, d = self.vectors.shape
        need = n * d * torch.tensor([], dtype=dtype).element_size()
        if self.device == "cuda":
            free, _ = torch.cuda.mem_get_info()
            if need > free // 2:
                log.info("index: torch_flat streams the corpus (%d MiB > half the free GPU "
                         "memory)", need >> 20)
                return None
            host = torch.from_numpy(np.ascontiguousarray(self.vectors, dtype=np.float32))
            self._resident = host.to("cuda").to(dtype)
            return self._resident
        # CPU: a float32 copy would only duplicate the (possibly memory-mapped) host array
        return None

    def _blocks(self, torch: Any) -> Iterator[tuple[int, Any]]:
        resident = self._on_device(torch)
        dtype = _dtype(torch, self.precision)
        n = self.vectors.shape[0]
        for b0 in range(0, n, self.block_rows):
            b1 = min(n, b0 + self.block_rows)
            if resident is not None:
                yield b0, resident[b0:b1]
            else:
                block = torch.from_numpy(np.array(self.vectors[b0:b1], dtype=np.float32))
                if self.device == "cuda":
                    block = block.pin_memory().to("cuda", non_blocking=True)
                yield b0, block.to(dtype)

    def _search_batch(self, torch: Any, q: np.ndarray, k: int) -> tuple[Any, Any]:
        dtype = _dtype(torch, self.precision)
        qt = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32)).to(self.device)
        qt = qt.to(dtype)
        best_s = torch.full((len(q), k), -float("inf"), dtype=torch.float32, device=self.device)
        best_i = torch.full((len(q), k), -1, dtype=torch.int64, device=self.device)
        for b0, block in self._blocks(torch):
            scores = (qt @ block.T).float()  # topk and the merge in fp32 for every precision
            kk = min(k, scores.shape[1])
            s, i = torch.topk(scores, kk, dim=1)
            cat_s = torch.cat([best_s, s], dim=1)
            cat_i = torch.cat([best_i, i + b0], dim=1)
            best_s, pos = torch.topk(cat_s, k, dim=1)
            best_i = torch.gather(cat_i, 1, pos)
        return best_s, best_i

    def search(self, queries: np.ndarray, k: int,
               params: Mapping[str, int | float]) -> SearchResult:
        if params:
            raise ValueError(f"torch_flat has no query-time parameters, got {dict(params)}")
        if queries.ndim != 2 or queries.shape[1] != self.vectors.shape[1]:
            raise ValueError(f"need [n_q, {self.vectors.shape[1]}] queries, got "
                             f"{queries.shape}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        torch = _torch()
        n_q = queries.shape[0]
        ids = np.full((n_q, k), -1, dtype=np.int64)
        scores = np.full((n_q, k), MISSING_SCORE, dtype=np.float32)
        kk = min(k, self.vectors.shape[0])
        batch = self.query_batch
        q0 = 0
        with torch.inference_mode():
            while q0 < n_q:
                q1 = min(n_q, q0 + batch)
                try:
                    s, i = self._search_batch(torch, queries[q0:q1], kk)
                except torch.cuda.OutOfMemoryError:
                    if batch == 1:
                        raise
                    batch = max(1, batch // 2)
                    torch.cuda.empty_cache()
                    log.info("index: torch_flat out of GPU memory; query batch now %d", batch)
                    continue
                s_np, i_np = s.cpu().numpy(), i.cpu().numpy()
                # equal scores in id order, so the result does not depend on block boundaries
                order = np.lexsort((i_np, -s_np), axis=1)
                ids[q0:q1, :kk] = np.take_along_axis(i_np, order, axis=1)
                scores[q0:q1, :kk] = np.take_along_axis(s_np, order, axis=1)
                q0 = q1
        if self.device == "cuda":
            torch.cuda.synchronize()
        return SearchResult(ids=ids, scores=scores)

    def save(self, directory: Path) -> None:
        np.save(directory / VECTORS_FILE, np.asarray(self.vectors, dtype=np.float32),
                allow_pickle=False)


class TorchFlatIndex:
    """Exact inner-product top-k with torch (see the module docstring).

    precision: fp32 | fp16 | bf16 (half precisions need device=cuda).
    query_batch: queries scored at once; block_rows: corpus rows scored at once.
    """

    def __init__(self, *, precision: str = "fp32", query_batch: int = 1024,
                 block_rows: int = 65536,
                 query_params: Sequence[Mapping[str, int | float]] = ({},),
                 device: str = "cpu") -> None:
        if precision not in PRECISIONS:
            raise OptionError("precision", f"must be one of {', '.join(PRECISIONS)}, got "
                                           f"{precision!r}")
        if precision != "fp32" and device != "cuda":
            raise OptionError("precision", f"{precision} needs device=cuda (got {device}); "
                                           "use fp32 on the CPU")
        if not 1 <= query_batch <= 1 << 20:
            raise OptionError("query_batch", f"must be between 1 and {1 << 20}, got "
                                             f"{query_batch}")
        if not 1 <= block_rows <= 1 << 26:
            raise OptionError("block_rows", f"must be between 1 and {1 << 26}, got {block_rows}")
        if list(query_params) != [{}]:
            raise OptionError("query_params", "torch_flat has no query-time parameters: use [{}]")
        if device not in ("cpu", "cuda"):
            raise OptionError("device", f"must be cpu or cuda, got {device!r}")
        self.precision = precision
        self.query_batch = query_batch
        self.block_rows = block_rows
        self.device = device
        #: only fp32 is the exact reference: half precisions round scores (module docstring)
        self.exact = precision == "fp32"

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        # batch sizes and device change no result beyond float rounding: not in the key
        return {"kind": "torch_flat", "precision": self.precision}

    def query_params(self) -> list[dict[str, int | float]]:
        return [{}]

    def _check_device(self) -> None:
        if self.device == "cuda":
            torch = _torch()
            if not torch.cuda.is_available():
                raise DeviceError("index: device=cuda but torch sees no CUDA GPU (use "
                                  "device=cpu)")

    def build(self, vectors: np.ndarray) -> tuple[TorchFlatBuiltIndex, BuildInfo]:
        if vectors.ndim != 2 or vectors.shape[0] < 1:
            raise ValueError(f"need [N >= 1, d] vectors, got {vectors.shape}")
        self._check_device()
        t0 = time.perf_counter()
        built = TorchFlatBuiltIndex(vectors, device=self.device, precision=self.precision,
                                    query_batch=self.query_batch, block_rows=self.block_rows)
        if self.device == "cuda":
            torch = _torch()
            built._on_device(torch)  # the copy to the GPU is this index's build cost
            torch.cuda.synchronize()
        build_s = time.perf_counter() - t0
        n, dim = vectors.shape
        log.info("index: torch_flat %s on %s over %d x %d vectors (%.2f s)", self.precision,
                 self.device, n, dim, build_s)
        return built, BuildInfo(build_s, int(n * dim * 4), int(n), int(dim))

    def load(self, directory: Path) -> TorchFlatBuiltIndex:
        self._check_device()
        vectors = np.load(directory / VECTORS_FILE, mmap_mode="r", allow_pickle=False)
        return TorchFlatBuiltIndex(vectors, device=self.device, precision=self.precision,
                                   query_batch=self.query_batch, block_rows=self.block_rows)
