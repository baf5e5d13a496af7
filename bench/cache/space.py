"""Disk space checked before a large artifact is written, not discovered when the disk is full.

A corpus's document vectors are written through a memory map: on a full file system a write
to a mapped page does not raise an exception, the process dies of SIGBUS, half way through a
pass that may have run for hours. So the pass first asks the file system of its artifact
folder for the bytes it is about to write (they are known exactly once the chunks are: rows x
dimensions x 4) and stops with one line naming ``cache_dir`` when they cannot fit. The index
build does the same with its serialized size from the memory math (``bench.index.memory``),
and ``embedding=ray`` with the shards its workers write to ``embedding.shards_dir`` before the
vectors are assembled (plus the vectors themselves when both share a file system: the
memory-mapped artifact is sparse until it is filled, so its bytes still count as free).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.errors import ConfigError

#: kept free beyond the artifact: its metadata files, the store's event log, other writers
MARGIN_BYTES = 64 * 1024 * 1024


def _fmt(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def require_free(directory: Path, need: int, what: str, *, key: str = "cache_dir") -> None:
    """ConfigError(``key``) when the file system holding ``directory`` has fewer than
    ``need`` + :data:`MARGIN_BYTES` bytes free; ``what`` says what the bytes are for."""
    free = shutil.disk_usage(directory).free
    if need + MARGIN_BYTES > free:
        raise ConfigError(key, f"{what} needs {_fmt(need)} on disk and "
                               f"{directory.resolve()} has {_fmt(free)} free (with "
                               f"{_fmt(MARGIN_BYTES)} kept spare); free space or point "
                               f"{key} at a larger disk")


def same_disk(a: Path, b: Path) -> bool:
    """Whether two existing paths are on one file system (their bytes come from one pool)."""
    import os

    return os.stat(a).st_dev == os.stat(b).st_dev
