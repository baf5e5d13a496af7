"""A per-key lock on a shared filesystem (local disk, NFS, Lustre) without fcntl/flock.

``flock`` is not reliable across NFS clients, so the lock is a file created with
``O_CREAT | O_EXCL`` (atomic on NFSv3+ and every local filesystem) holding its owner
(host, pid, token, time). The holder touches it from a heartbeat thread. A waiter declares it
stale when its (mtime, size, token) has not changed for ``stale_s`` seconds of the waiter's own
monotonic clock — so clocks of different hosts need not agree — or at once when the owner is
a dead process on this same host. Breaking a stale lock is serialised by a second O_EXCL file
(``.break``) so two waiters cannot both break it and then remove each other's fresh lock.

Publishing stays an atomic rename: even a holder that lost its lock (a heartbeat starved for
``stale_s``) cannot leave a half artifact, at worst the work is done twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("bench")

HOST = socket.gethostname()


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    token: str
    created_unix: float


def read_owner(path: Path) -> Owner | None:
    """The owner recorded in a lock file; None if absent or unreadable (being written)."""
    try:
        rec: dict[str, Any] = json.loads(path.read_text())
        return Owner(str(rec["host"]), int(rec["pid"]), str(rec["token"]),
                     float(rec["created_unix"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def owner_dead_here(owner: Owner | None) -> bool:
    """True only when we can be sure: same host and the process is gone."""
    return owner is not None and owner.host == HOST and not pid_alive(owner.pid)


def lock_is_live(path: Path, stale_s: float, now: float | None = None) -> bool:
    """One-shot judgement for maintenance (gc): held, heartbeat recent by mtime, owner not dead.

    Uses wall-clock mtime age, so it assumes the host running gc and the file server roughly
    agree on time; a waiting worker never relies on that (see KeyLock).
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    if owner_dead_here(read_owner(path)):
        return False
    return ((time.time() if now is None else now) - st.st_mtime) < stale_s


class LockLost(RuntimeError):
    pass


class KeyLock:
    """``with KeyLock(path):`` — blocks (polling) until this process holds the lock.

    ``acquire(ready=...)`` returns False without taking the lock as soon as ``ready()`` is
    true (the artifact another worker was computing has been published).
    """

    def __init__(self, path: Path, *, heartbeat_s: float = 5.0, stale_s: float = 60.0,
                 poll_s: float = 0.05, max_poll_s: float = 1.0) -> None:
        if stale_s <= 2 * heartbeat_s:
            raise ValueError("stale_s must exceed two heartbeats")
        self.path = path
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self.token = uuid.uuid4().hex
        self.held = False
        self.lost = False
        self.waited_s = 0.0
        self.broke_stale: Owner | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- acquiring -------------------------------------------------------------------------
    def _try_create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, json.dumps({"host": HOST, "pid": os.getpid(), "token": self.token,
                                     "created_unix": time.time()}).encode())
        finally:
            os.close(fd)
        return True

    def acquire(self, ready: Callable[[], bool] | None = None,
                timeout_s: float | None = None) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        delay = self.poll_s
        seen: tuple[Any, ...] | None = None
        seen_at = t0
        while True:
            if self._try_create():
                self.held = True
                self.waited_s = time.monotonic() - t0
                self._start_heartbeat()
                return True
            if ready is not None and ready():
                self.waited_s = time.monotonic() - t0
                return False
            now = time.monotonic()
            snap = self._snapshot()
            if snap != seen:
                seen, seen_at = snap, now
            owner = read_owner(self.path)
            if snap is not None and (owner_dead_here(owner) or now - seen_at >= self.stale_s):
                self._break(snap, owner)
                seen = None
                continue
            if timeout_s is not None and now - t0 > timeout_s:
                raise TimeoutError(f"lock {self.path} still held after {timeout_s:.0f}s")
            time.sleep(delay)
            delay = min(delay * 1.5, self.max_poll_s)

    def _snapshot(self) -> tuple[Any, ...] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _break(self, snap: tuple[Any, ...], owner: Owner | None) -> None:
        guard = self.path.with_name(self.path.name + ".break")
        try:
            fd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            # A breaker that died holding the guard would block everyone: the guard is only
            # held for a few system calls, so one older than stale_s is an orphan.
            try:
                if time.time() - guard.stat().st_mtime > self.stale_s:
                    guard.unlink()
            except FileNotFoundError:
                pass
            return
        os.close(fd)
        try:
            # Only remove the very lock we judged stale, not a fresh one taken meanwhile.
            if self._snapshot() == snap and read_owner(self.path) == owner:
                self.path.unlink()
                self.broke_stale = owner
                who = f"{owner.host}:{owner.pid}" if owner else "unknown owner"
                log.warning("cache: took over stale lock %s (held by %s)", self.path.name, who)
        except FileNotFoundError:
            pass
        finally:
            with contextlib.suppress(FileNotFoundError):
                guard.unlink()

    # -- holding ---------------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name="bench-lock-heartbeat",
                                      daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            owner = read_owner(self.path)
            if owner is None or owner.token != self.token:
                self.lost = True
                log.warning("cache: lost lock %s (taken over after a missed heartbeat)",
                            self.path.name)
                return
            try:
                os.utime(self.path)
            except OSError:
                self.lost = True
                return

    def release(self) -> None:
        if not self.held:
            return
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        self.held = False
        owner = read_owner(self.path)
        if owner is not None and owner.token == self.token:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def __enter__(self) -> KeyLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
