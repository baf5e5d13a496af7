"""Per-file checksums of an artifact: recorded by the writer, checked before every load.

The writer records, for every file it produced, the byte size and an xxh3-128 digest in
``_meta.json``. A reader checks sizes first (one ``stat`` per file: catches truncation and
lost files for free), then digests (catches zeroed pages and flipped bytes). xxh3 runs at
memory bandwidth, so a verified load costs about one extra read of the artifact; files are
hashed through ``mmap`` so a memory-mapped ``.npy`` is not copied into RAM to be checked.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import xxhash

META = "_meta.json"
ALGO = "xxh3_128"
_CHUNK = 8 << 20


class VerifyMode(StrEnum):
    """How much a load checks: ``full`` sizes + digests, ``size`` sizes only, ``off`` nothing."""

    FULL = "full"
    SIZE = "size"
    OFF = "off"


def file_digest(path: Path) -> str:
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return h.hexdigest()
        if size <= _CHUNK:
            h.update(f.read())
            return h.hexdigest()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            view = memoryview(m)
            try:
                for off in range(0, size, _CHUNK):
                    h.update(view[off:off + _CHUNK])
            finally:
                view.release()
    return h.hexdigest()


def artifact_files(directory: Path) -> list[Path]:
    """Every regular file of an artifact except its metadata, sorted by relative path."""
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name != META)


def manifest(directory: Path) -> dict[str, Any]:
    """The integrity block written into ``_meta.json``: size + digest of every file."""
    files: dict[str, dict[str, Any]] = {}
    for p in artifact_files(directory):
        files[p.relative_to(directory).as_posix()] = {
            "size": p.stat().st_size, "hash": file_digest(p),
        }
    return {"algo": ALGO, "files": files}


def check(directory: Path, meta: Mapping[str, Any], mode: VerifyMode) -> str | None:
    """What is wrong with the artifact in ``directory`` (one phrase), or None if it verifies."""
    if mode is VerifyMode.OFF:
        return None
    block = meta.get("integrity")
    if not isinstance(block, Mapping) or not isinstance(block.get("files"), Mapping):
        return "metadata has no checksums (written by an older bench or damaged)"
    if block.get("algo") != ALGO:
        return f"unknown checksum algorithm {block.get('algo')!r}"
    files: Mapping[str, Any] = block["files"]
    # A file the manifest does not list could be read by a loader unchecked.
    extra = sorted({p.relative_to(directory).as_posix() for p in artifact_files(directory)}
                   - set(files))
    if extra:
        return f"{extra[0]}: not listed in the checksums"
    # All sizes before any digest: a truncated file is found without reading anything.
    for rel, rec in files.items():
        path = directory / rel
        try:
            size = path.stat().st_size
        except OSError:
            return f"{rel}: missing"
        if not isinstance(rec, Mapping) or size != rec.get("size"):
            want = rec.get("size") if isinstance(rec, Mapping) else "?"
            return f"{rel}: size {size} bytes, expected {want}"
    if mode is VerifyMode.SIZE:
        return None
    for rel, rec in files.items():
        try:
            got = file_digest(directory / rel)
        except OSError as exc:
            return f"{rel}: unreadable ({exc.strerror or exc})"
        if got != rec.get("hash"):
            want = str(rec.get("hash"))[:12]
            return f"{rel}: {ALGO} {got[:12]}.. differs from the recorded {want}.."
    return None
