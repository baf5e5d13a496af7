"""The store's event log, persisted across processes and hosts.

Each process appends JSON lines to its own file ``<root>/_events/<host>-<pid>.jsonl``: one
``write`` per line with ``O_APPEND``. One file per process rather than one shared file because
``O_APPEND`` is not atomic across NFS clients (two hosts appending to one file can overwrite
each other's lines); readers merge all files and sort by time.

A record: ``{"time", "host", "pid", "stage", "key", "event", "wall_s", ...}`` where event is
``hit`` (verified and loaded), ``miss`` (computed here), ``wait`` (another worker computed it
while this one waited on the key lock), ``quarantine`` (a damaged artifact moved aside, with
``reason``), ``takeover`` (a stale lock of a dead writer was broken) or ``orphan_tmp`` (a
killed writer's temp folder removed, with ``path`` and ``reason``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.cache.lock import HOST

EVENTS_DIR = "_events"
KINDS = ("hit", "miss", "wait", "quarantine", "takeover")


class EventLog:
    def __init__(self, root: Path) -> None:
        self.dir = root / EVENTS_DIR

    def _file(self) -> Path:
        # pid read at each write: a forked worker (joblib/loky) gets its own file.
        return self.dir / f"{re.sub(r'[^A-Za-z0-9._-]', '_', HOST)}-{os.getpid()}.jsonl"

    def append(self, stage: str, key: str, event: str, **extra: Any) -> None:
        rec = {"time": time.time(), "host": HOST, "pid": os.getpid(), "stage": stage,
               "key": key, "event": event, **extra}
        line = (json.dumps(rec, default=str) + "\n").encode()
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._file(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def read_events(root: str | Path) -> list[dict[str, Any]]:
    """Every event of every process, oldest first; a torn last line (killed writer) is skipped."""
    out: list[dict[str, Any]] = []
    d = Path(root) / EVENTS_DIR
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.jsonl")):
        for line in f.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    out.sort(key=lambda r: float(r.get("time", 0.0)))
    return out


def computations(root: str | Path) -> Counter[tuple[str, str]]:
    """How many times each (stage, key) was computed, over all processes that used ``root``."""
    return Counter((r["stage"], r["key"]) for r in read_events(root) if r.get("event") == "miss")
