"""Option checks and pair bookkeeping shared by the rerankers (no heavy imports)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from bench.config.build import OptionError
from bench.errors import DeviceError

DEFAULT_DEPTHS = (20, 50, 100)
DEVICES = ("cpu", "cuda")


def check_depths(depths: Sequence[int]) -> list[int]:
    """Unique, ascending, each >= 1."""
    if not depths:
        raise OptionError("depths", "must list at least one depth")
    bad = [d for d in depths if d < 1]
    if bad:
        raise OptionError("depths", f"must be >= 1, got {bad[0]}")
    if len(set(depths)) != len(depths):
        raise OptionError("depths", f"must be unique, got {list(depths)}")
    return sorted(depths)


def check_positive(option: str, value: int) -> int:
    if value < 1:
        raise OptionError(option, f"must be >= 1, got {value}")
    return value


def check_device(device: str) -> str:
    """A resolved device (the pipeline turns ``auto`` into cpu|cuda before building).

    cuda without a GPU is an error here too, so a reranker built outside the pipeline cannot
    quietly run on the CPU. torch is imported only when cuda is asked for."""
    if device not in DEVICES:
        raise OptionError("device", f"must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cuda":
        from bench.pipeline.device import cuda_available

        if not cuda_available():
            raise DeviceError(
                "config key device: the reranker needs cuda but no CUDA GPU is visible to "
                "torch (use device=cpu or device=auto)"
            )
    return device


def local_or_hub(model: str) -> str:
    """An existing local folder -> its expanded path; anything else is left as a hub name."""
    path = os.path.expanduser(model)
    return path if os.path.exists(path) else model


def check_pools(queries: Sequence[str], passages: Sequence[Sequence[str]]) -> None:
    if len(queries) != len(passages):
        raise ValueError(f"{len(queries)} queries but {len(passages)} passage lists")


def dedupe(passages: Sequence[Sequence[str]]) -> tuple[list[str], list[np.ndarray]]:
    """Distinct texts over all pools, and per pool the index of each passage in them.

    Pools of neighbouring queries overlap (same chunks retrieved again), so encoders that
    score passages independently of the query encode each text once per call."""
    index: dict[str, int] = {}
    where = []
    for pool in passages:
        where.append(np.fromiter((index.setdefault(t, len(index)) for t in pool),
                                 dtype=np.int64, count=len(pool)))
    return list(index), where


def split(flat: np.ndarray, passages: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """Scores of all pairs in pool order -> one float32 array per query."""
    if not passages:
        return []
    bounds = np.cumsum([len(p) for p in passages])[:-1]
    return [np.ascontiguousarray(s, dtype=np.float32) for s in np.split(flat, bounds)]
