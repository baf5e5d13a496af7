"""Listing, checking and pruning a store: the functions behind ``python -m bench.cache``.

Safe while sweeps run: ``verify`` (read only; ``--heal`` takes each key's lock before moving
anything), quarantine and orphan-temp pruning. Pruning published artifacts (``--older-than``,
``--keep``) deletes what a running job might be about to load: run it between sweeps.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.cache.events import EVENTS_DIR, read_events
from bench.cache.lock import KeyLock, lock_is_live
from bench.cache.store import (
    LOCKS_DIR,
    QUARANTINE_DIR,
    TMP_PREFIX,
    ArtifactStore,
    newest_mtime,
    read_meta,
    temp_folder_owner,
)

SPECIAL = {LOCKS_DIR, QUARANTINE_DIR, EVENTS_DIR}


@dataclass(frozen=True)
class Artifact:
    stage: str
    key: str
    path: Path
    bytes: int


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def stages(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name not in SPECIAL
                  and not p.name.startswith("."))


def artifacts(root: Path, stage: str | None = None) -> Iterator[Artifact]:
    for sdir in stages(root):
        if stage is not None and sdir.name != stage:
            continue
        for shard in sorted(p for p in sdir.iterdir() if p.is_dir()):
            for art in sorted(shard.iterdir()):
                if art.is_dir() and not art.name.startswith(TMP_PREFIX):
                    yield Artifact(sdir.name, art.name, art, tree_bytes(art))


def temp_folders(root: Path) -> Iterator[tuple[str, Path]]:
    for sdir in stages(root):
        for tmp in sdir.glob(f"*/{TMP_PREFIX}*"):
            if tmp.is_dir():
                yield sdir.name, tmp


@dataclass(frozen=True)
class Checked:
    artifact: Artifact
    problem: str | None
    check_s: float


def verify(store: ArtifactStore, stage: str | None = None) -> Iterator[Checked]:
    for art in artifacts(store.root, stage):
        t0 = time.perf_counter()
        problem = store.problem(art.path)
        yield Checked(art, problem, time.perf_counter() - t0)


def heal(store: ArtifactStore, checked: Checked) -> bool:
    """Quarantine a damaged artifact under its key's lock (the next run rebuilds it)."""
    a = checked.artifact
    with KeyLock(store.lock_path(a.stage, a.key), stale_s=store.lock_stale_s,
                 heartbeat_s=store.heartbeat_s):
        problem = store.problem(a.path)  # someone may have healed it meanwhile
        if problem is None:
            return False
        return store.quarantine(a.stage, a.key, problem) is not None


@dataclass
class GcReport:
    removed: list[tuple[str, str, int]]  # (what, path relative to root, bytes)
    kept_live_tmps: int = 0

    @property
    def bytes(self) -> int:
        return sum(b for _, _, b in self.removed)


def last_used(root: Path) -> dict[str, float]:
    """key -> last time any process resolved it (from the event log)."""
    out: dict[str, float] = {}
    for rec in read_events(root):
        if rec.get("event") in ("hit", "miss", "wait"):
            out[str(rec["key"])] = max(out.get(str(rec["key"]), 0.0), float(rec["time"]))
    return out


def read_keep(path: Path) -> set[str]:
    """Keys to keep: a run.json (its cache events) or a text file with one key per line."""
    text = path.read_text()
    if path.suffix == ".json":
        manifest = json.loads(text)
        return {str(e["key"]) for e in manifest.get("cache", {}).get("events", [])}
    return {ln.split("#")[0].strip() for ln in text.splitlines() if ln.split("#")[0].strip()}


def gc(store: ArtifactStore, *, tmp_age_s: float = 3600.0, older_than_days: float | None = None,
       keep: set[str] | None = None, keep_quarantine: bool = False,
       dry_run: bool = False) -> GcReport:
    root = store.root
    now = time.time()
    rep = GcReport([])

    def drop(what: str, path: Path) -> None:
        size = tree_bytes(path)
        rep.removed.append((what, str(path.relative_to(root)), size))
        if not dry_run:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    if not keep_quarantine and (root / QUARANTINE_DIR).is_dir():
        for sdir in (root / QUARANTINE_DIR).iterdir():
            for q in sdir.iterdir() if sdir.is_dir() else []:
                drop("quarantine", q)
    for stage, tmp in temp_folders(root):
        key, owner = temp_folder_owner(tmp.name)
        if owner is not None and owner.dead_here():  # a killed writer's, however recent
            drop("orphan temp", tmp)
            continue
        held = len(key) == 64 and lock_is_live(store.lock_path(stage, key), store.lock_stale_s)
        alive = owner is not None and owner.alive_here()
        if held or alive or now - newest_mtime(tmp) < tmp_age_s:
            rep.kept_live_tmps += 1
            continue
        drop("orphan temp", tmp)
    locks = root / LOCKS_DIR
    if locks.is_dir():
        for lk in locks.glob("*/*.lock"):
            if not lock_is_live(lk, store.lock_stale_s):
                drop("stale lock", lk)
    if older_than_days is not None or keep is not None:
        used = last_used(root)
        for art in artifacts(root):
            if keep is not None and art.key not in keep:
                drop("not kept", art.path)
                continue
            if older_than_days is not None:
                try:
                    created = float(read_meta(art.path).get("created_unix", 0.0))
                except (OSError, ValueError):
                    created = 0.0
                if now - max(created, used.get(art.key, 0.0)) > older_than_days * 86400:
                    drop("unused", art.path)
    return rep


@dataclass(frozen=True)
class Usage:
    name: str
    count: int
    bytes: int


def du(root: Path) -> list[Usage]:
    rows = []
    for sdir in stages(root):
        arts = list(artifacts(root, sdir.name))
        rows.append(Usage(sdir.name, len(arts), sum(a.bytes for a in arts)))
    tmps = [t for _, t in temp_folders(root)]
    rows.append(Usage("(temp folders)", len(tmps), sum(tree_bytes(t) for t in tmps)))
    for special in (QUARANTINE_DIR, LOCKS_DIR, EVENTS_DIR):
        d = root / special
        files = [p for p in d.rglob("*")] if d.is_dir() else []
        count = (len([p for p in d.glob("*/*") if p.is_dir()]) if special == QUARANTINE_DIR
                 else len([p for p in files if p.is_file()]))
        rows.append(Usage(f"({special.strip('_')})", count, tree_bytes(d) if d.is_dir() else 0))
    return rows
