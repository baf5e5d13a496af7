"""Content-addressed artifact store that computes each artifact once and never serves damage.

An artifact is a folder ``<root>/<stage>/<key[:2]>/<key>/`` holding Parquet / .npy / faiss
files and ``_meta.json``. The key is a sha256 over the stage name, the stage code version, the
stage's own semantic parameters and the keys of its upstream artifacts (which transitively
include the dataset fingerprint). Nothing is pickled: loaders read only plain formats.

Writing: a writer holds the key's lock (bench/cache/lock.py: an O_EXCL file with heartbeat
and stale takeover, safe on NFS), fills a private temp folder, records size + xxh3-128 of
every file in ``_meta.json`` and publishes with one atomic ``rename``. Workers that find the
key locked wait and then load the winner's artifact, so a sweep computes it once.

The temp folder is ``.tmp-<key>-<random>-<pid>-<host>``: it names its owner, so a writer of
the key removes, before it builds and again once it has published, every temp folder of that
key whose owner is a dead process on this host (a writer killed with -9), however recent. A
live owner's folder on this host is never removed; one from another host (whose process cannot
be probed) or from before owners were named goes once it is older than ``lock_stale_s``.

Reading: sizes then digests are checked before ``load`` (``BENCH_CACHE_VERIFY=full|size|off``,
default full). A truncated, zeroed or altered file, a missing or unreadable ``_meta.json``, or
a ``load`` that raises on the files, is logged in one line, moved to ``<root>/_quarantine/``
and rebuilt. Every resolution is appended to the persistent event log (bench/cache/events.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from bench.cache.events import EventLog
from bench.cache.integrity import META, VerifyMode, check, manifest
from bench.cache.lock import HOST, KeyLock, pid_alive
from bench.errors import BenchError, ConfigError

log = logging.getLogger("bench")

T = TypeVar("T")

LOCKS_DIR = "_locks"
QUARANTINE_DIR = "_quarantine"
TMP_PREFIX = ".tmp-"


_SAFE_HOST = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_TMP_NAME = re.compile(r"^[0-9a-f]{8}-(?P<pid>[0-9]{1,10})-(?P<host>.+)$")


def _host_tag(host: str) -> str:
    """The host as a file-name part: itself when plainly spelt, else a digest of it."""
    if _SAFE_HOST.match(host):
        return host
    return "h" + hashlib.sha256(host.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TempOwner:
    """The writer a temp folder's name records (``host`` as :func:`_host_tag` spells it)."""

    pid: int
    host: str

    def dead_here(self) -> bool:
        """True only when we can be sure: this host, and the process is gone."""
        return self.host == _host_tag(HOST) and not pid_alive(self.pid)

    def alive_here(self) -> bool:
        return self.host == _host_tag(HOST) and pid_alive(self.pid)


def temp_folder_name(key: str) -> str:
    """A new temp folder name of ``key`` owned by this process."""
    return f"{TMP_PREFIX}{key}-{uuid.uuid4().hex[:8]}-{os.getpid()}-{_host_tag(HOST)}"


def temp_folder_owner(name: str) -> tuple[str, TempOwner | None]:
    """(key, owner) of a temp folder name; owner None for a name without one (written by an
    older bench: ``.tmp-<key>-<random>``)."""
    rest = name[len(TMP_PREFIX):]
    key, _, tail = rest.partition("-")
    m = _TMP_NAME.match(tail)
    return key, (TempOwner(int(m["pid"]), m["host"]) if m else None)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def make_key(stage: str, version: str, params: Mapping[str, Any], upstream: Sequence[str]) -> str:
    payload = canonical_json(
        {"stage": stage, "version": version, "params": params, "upstream": list(upstream)}
    )
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEvent:
    """One stage resolution. ``hit`` is False only when this process computed the artifact;
    ``kind`` is ``hit`` | ``wait`` (another worker computed it while we waited) | ``miss``."""

    stage: str
    key: str
    hit: bool
    wall_s: float
    path: str
    kind: str = ""


@dataclass
class _Attempt(Generic[T]):
    value: T | None = None
    ok: bool = False
    problem: str | None = None  # None with ok=False: nothing there
    writer: str | None = None  # writer token of the artifact that was tried


def read_meta(directory: Path) -> dict[str, Any]:
    """The artifact's metadata; raises ValueError/OSError if missing, unreadable or not JSON."""
    meta = json.loads((directory / META).read_text())
    if not isinstance(meta, dict):
        raise ValueError("metadata is not a JSON object")
    return meta


def _env_mode() -> VerifyMode:
    raw = os.environ.get("BENCH_CACHE_VERIFY", "full").strip().lower()
    try:
        return VerifyMode(raw)
    except ValueError:
        raise ConfigError("BENCH_CACHE_VERIFY", f"must be full, size or off, got {raw!r}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


class ArtifactStore:
    def __init__(self, root: str | Path, *, verify: VerifyMode | str | None = None,
                 lock_stale_s: float = 60.0, heartbeat_s: float = 5.0) -> None:
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError("cache_dir", f"{self.root} exists and is not a folder")
        self.verify = _env_mode() if verify is None else VerifyMode(verify)
        self.lock_stale_s = lock_stale_s
        self.heartbeat_s = heartbeat_s
        self.events: list[CacheEvent] = []
        self.log = EventLog(self.root)

    # -- layout ----------------------------------------------------------------------------
    def path_for(self, stage: str, key: str) -> Path:
        return self.root / stage / key[:2] / key

    def lock_path(self, stage: str, key: str) -> Path:
        return self.root / LOCKS_DIR / stage / f"{key}.lock"

    def lookup(self, stage: str, key: str) -> Path | None:
        path = self.path_for(stage, key)
        return path if (path / META).is_file() else None

    # -- reading ---------------------------------------------------------------------------
    def problem(self, directory: Path) -> str | None:
        """What is wrong with a published artifact (one phrase), or None if it verifies."""
        try:
            meta = read_meta(directory)
        except FileNotFoundError:
            return f"{META} missing"
        except (OSError, ValueError) as exc:
            return f"{META} unreadable ({_one_line(exc)})"
        return check(directory, meta, self.verify)

    def _attempt(self, final: Path, load: Callable[[Path], T],
                 rejected: dict[str, str]) -> _Attempt[T]:
        if not final.exists():
            return _Attempt()
        writer = writer_token(final)
        if writer is not None and writer in rejected:
            return _Attempt(problem=rejected[writer], writer=writer)
        problem = self.problem(final)
        if problem is None:
            try:
                return _Attempt(value=load(final), ok=True, writer=writer)
            except BenchError:
                raise  # the user's problem (e.g. a missing extra), not the artifact's
            except Exception as exc:
                # Checksums match what was written, yet the loader rejects it: damaged.
                problem = f"load failed ({_one_line(exc)})"
        if writer is not None:
            rejected[writer] = problem
        return _Attempt(problem=problem, writer=writer)

    def quarantine(self, stage: str, key: str, reason: str) -> Path | None:
        """Move a damaged artifact aside (kept for inspection, pruned by ``gc``)."""
        src = self.path_for(stage, key)
        dest = (self.root / QUARANTINE_DIR / stage /
                f"{key}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(src, dest)
        except FileNotFoundError:
            return None
        (dest / "_quarantine.json").write_text(json.dumps(
            {"stage": stage, "key": key, "reason": reason, "time": time.time(),
             "host": HOST, "pid": os.getpid()}))
        log.warning("cache: %s %s damaged (%s): moved to %s, rebuilding",
                    stage, key[:12], reason, dest.relative_to(self.root))
        self.log.append(stage, key, "quarantine", reason=reason, path=str(dest))
        return dest

    # -- writing ---------------------------------------------------------------------------
    def _clean_tmps(self, final: Path, stage: str, key: str) -> None:
        """Temp folders of this key left by killed writers. We hold the key's lock, yet a
        writer that lost it (a heartbeat starved for ``lock_stale_s``) may still be filling
        one: a folder whose owner is alive on this host is kept, one whose owner is dead goes
        at once, and one we cannot judge (another host, an unnamed owner) goes only when
        nothing in it changed for ``lock_stale_s``."""
        for tmp in final.parent.glob(f"{TMP_PREFIX}{key}-*"):
            _, owner = temp_folder_owner(tmp.name)
            if owner is not None and owner.alive_here():
                continue
            if owner is not None and owner.dead_here():
                why = f"its writer (pid {owner.pid}) is gone"
            elif time.time() - newest_mtime(tmp) > self.lock_stale_s:
                why = f"unchanged for more than {self.lock_stale_s:g}s"
            else:
                continue
            shutil.rmtree(tmp, ignore_errors=True)
            log.info("cache: removed orphaned temp folder %s (%s)", tmp.name, why)
            self.log.append(stage, key, "orphan_tmp", path=str(tmp), reason=why)

    @contextmanager
    def _writer(self, stage: str, key: str, meta: Mapping[str, Any]) -> Iterator[Path]:
        final = self.path_for(stage, key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / temp_folder_name(key)
        tmp.mkdir()
        try:
            yield tmp
            full = {**meta, "integrity": manifest(tmp)}
            (tmp / META).write_text(json.dumps(full, indent=2, default=str))
            try:
                os.rename(tmp, final)
            except OSError:
                # Another worker published the same key first (it lost its lock, or we did);
                # its artifact is equivalent.
                if (final / META).is_file():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def resolve(
        self,
        stage: str,
        *,
        version: str,
        params: Mapping[str, Any],
        upstream: Sequence[str],
        compute: Callable[[Path], None],
        load: Callable[[Path], T],
        log_level: int = logging.INFO,
    ) -> tuple[T, str, bool]:
        """Load the artifact for these inputs, computing and storing it on a miss.

        ``compute(tmp_dir)`` writes the artifact files into ``tmp_dir``; ``load(dir)`` reads
        them back. Returns (artifact, key, hit); hit is False only when this process computed
        it. Logs one line with hit/miss and wall time (and one when it starts building) at
        ``log_level``: many small artifacts summarised elsewhere (the generation memo) log at
        DEBUG.
        """
        key = make_key(stage, version, params, upstream)
        t0 = time.perf_counter()
        final = self.path_for(stage, key)
        rejected: dict[str, str] = {}  # writer token -> what was wrong with that artifact
        att = self._attempt(final, load, rejected)
        if att.ok:
            return self._done(stage, key, "hit", att.value, t0,  # type: ignore[arg-type]
                              log_level)

        def published() -> bool:
            token = writer_token(final)
            return token is not None and token not in rejected

        lock = KeyLock(self.lock_path(stage, key), heartbeat_s=self.heartbeat_s,
                       stale_s=self.lock_stale_s)
        while True:
            got = lock.acquire(ready=published)
            if lock.broke_stale is not None:
                self.log.append(stage, key, "takeover", owner=lock.broke_stale.__dict__)
                lock.broke_stale = None
            try:
                att = self._attempt(final, load, rejected)
                if att.ok:
                    return self._done(stage, key, "wait", att.value,  # type: ignore[arg-type]
                                      t0, log_level)
                if not got:
                    continue  # published while we waited, but it does not verify: lock it
                if final.exists():
                    self.quarantine(stage, key, att.problem or "incomplete artifact")
                self._clean_tmps(final, stage, key)
                log.log(log_level, "stage %-10s building (cache miss, key %s)", stage,
                        key[:12])
                meta = {
                    "stage": stage,
                    "version": version,
                    "params": params,
                    "upstream": list(upstream),
                    "created_unix": time.time(),
                    "writer": {"host": HOST, "pid": os.getpid(), "token": uuid.uuid4().hex},
                }
                with self._writer(stage, key, meta) as tmp:
                    compute(tmp)
                # a writer killed while we built (one that had lost the lock to us) left its
                # folder after the clean-up above: this is the last writer of the key to look
                self._clean_tmps(final, stage, key)
            finally:
                lock.release()
            break
        value = load(final)  # just written and hashed: a failure here is a bug, not damage
        return self._done(stage, key, "miss", value, t0, log_level)

    def _done(self, stage: str, key: str, kind: str, value: T, t0: float,
              log_level: int) -> tuple[T, str, bool]:
        wall = time.perf_counter() - t0
        path = self.path_for(stage, key)
        self.events.append(CacheEvent(stage, key, kind != "miss", wall, str(path), kind))
        self.log.append(stage, key, kind, wall_s=round(wall, 6))
        log.log(log_level, "stage %-10s done in %.2fs (cache %s, key %s)", stage, wall, kind,
                key[:12])
        return value, key, kind != "miss"


def writer_token(directory: Path) -> str | None:
    try:
        token = read_meta(directory).get("writer", {}).get("token")
    except (OSError, ValueError, AttributeError):
        return None
    return token if isinstance(token, str) else None


def newest_mtime(path: Path) -> float:
    """Latest mtime of a folder and everything in it (a writer filling a memmap touches only
    the file, not the folder)."""
    try:
        latest = path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
    for p in path.rglob("*"):
        try:
            latest = max(latest, p.stat().st_mtime)
        except FileNotFoundError:
            continue
    return latest
