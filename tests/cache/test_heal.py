"""Damaged artifacts are detected, quarantined and rebuilt; killed writers leave nothing stuck."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench.cache.events import computations, read_events
from bench.cache.integrity import META
from bench.cache.lock import KeyLock, lock_is_live
from bench.cache.maintenance import gc
from bench.cache.store import (
    QUARANTINE_DIR,
    ArtifactStore,
    TempOwner,
    make_key,
    temp_folder_name,
    temp_folder_owner,
)

KEY = make_key("s", "1", {}, [])
DATA = np.arange(1000, dtype=np.float32)


def _compute(d: Path) -> None:
    np.save(d / "v.npy", DATA)
    (d / "info.json").write_text(json.dumps({"n": 1000}))


def _load(d: Path) -> float:
    info = json.loads((d / "info.json").read_text())
    return float(np.load(d / "v.npy", mmap_mode="r").sum()) + info["n"]


def _resolve(store: ArtifactStore) -> tuple[float, bool]:
    value, _, hit = store.resolve("s", version="1", params={}, upstream=[],
                                  compute=_compute, load=_load)
    return value, hit


def _truncate(p: Path) -> None:
    os.truncate(p, p.stat().st_size // 2)


def _zero(p: Path) -> None:
    p.write_bytes(bytes(p.stat().st_size))


def _flip(p: Path) -> None:
    raw = bytearray(p.read_bytes())
    raw[-1] ^= 0x01  # last byte: inside the array data / the JSON, still parseable
    p.write_bytes(bytes(raw))


EXPECTED = float(DATA.sum()) + 1000


@pytest.mark.parametrize("name", ["v.npy", "info.json"])
@pytest.mark.parametrize("damage", [_truncate, _zero, _flip])
def test_damage_is_detected_quarantined_rebuilt(tmp_path: Path, name: str, damage,
                                                caplog: pytest.LogCaptureFixture) -> None:
    store = ArtifactStore(tmp_path)
    assert _resolve(store) == (EXPECTED, False)
    damage(store.path_for("s", KEY) / name)
    caplog.clear()
    assert _resolve(store) == (EXPECTED, False)  # rebuilt, same value
    lines = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(lines) == 1 and name in lines[0] and "\n" not in lines[0]
    assert len(list((tmp_path / QUARANTINE_DIR / "s").iterdir())) == 1
    assert _resolve(store) == (EXPECTED, True)
    assert computations(tmp_path)[("s", KEY)] == 2


@pytest.mark.parametrize("meta_damage", ["delete", "garbage", "no_checksums", "emptied_list"])
def test_missing_or_bad_meta_is_rebuilt(tmp_path: Path, meta_damage: str) -> None:
    store = ArtifactStore(tmp_path)
    _resolve(store)
    meta = store.path_for("s", KEY) / META
    if meta_damage == "delete":
        meta.unlink()
    elif meta_damage == "garbage":
        meta.write_bytes(b"\x00" * 10)
    else:
        rec = json.loads(meta.read_text())
        if meta_damage == "no_checksums":
            del rec["integrity"]
        else:  # a manifest that lists nothing must not vouch for the files
            rec["integrity"]["files"] = {}
        meta.write_text(json.dumps(rec))
    assert _resolve(store) == (EXPECTED, False)
    assert [e["event"] for e in read_events(tmp_path)] == ["miss", "quarantine", "miss"]


def test_load_that_raises_is_quarantined_not_a_crash(tmp_path: Path) -> None:
    """Verification off (or checksums that match a badly written file): the loader's own
    error still leads to quarantine + rebuild."""
    store = ArtifactStore(tmp_path, verify="off")
    _resolve(store)
    (store.path_for("s", KEY) / "info.json").write_text("{not json")
    assert _resolve(store) == (EXPECTED, False)
    q = read_events(tmp_path)[1]
    assert q["event"] == "quarantine" and q["reason"].startswith("load failed (JSONDecodeError")


def test_size_mode_skips_digests(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, verify="size")
    _resolve(store)
    _flip(store.path_for("s", KEY) / "v.npy")  # same size: only a digest would see it
    assert _resolve(store)[1] is True
    assert ArtifactStore(tmp_path, verify="full").problem(store.path_for("s", KEY)) is not None


def test_bad_verify_env_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench.errors import ConfigError

    monkeypatch.setenv("BENCH_CACHE_VERIFY", "sometimes")
    with pytest.raises(ConfigError, match="BENCH_CACHE_VERIFY"):
        ArtifactStore(tmp_path)


def test_cache_dir_that_is_a_file(tmp_path: Path) -> None:
    from bench.errors import ConfigError

    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(ConfigError, match="cache_dir"):
        ArtifactStore(f)


KILLED_WRITER = """
import os, sys
from pathlib import Path
from bench.cache.store import ArtifactStore
def compute(d):
    (d / "half").write_text("x")
    os._exit(9)  # killed mid-write: lock file and temp folder stay behind
ArtifactStore(sys.argv[1]).resolve("s", version="1", params={}, upstream=[],
                                  compute=compute, load=str)
"""


def test_killed_writer_lock_and_tmp_are_recovered(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(tmp_path)], env=env,
                          timeout=120)
    assert proc.returncode == 9
    store = ArtifactStore(tmp_path, lock_stale_s=0.5, heartbeat_s=0.1)
    lock = store.lock_path("s", KEY)
    tmps = list(store.path_for("s", KEY).parent.glob(".tmp-*"))
    assert lock.is_file() and len(tmps) == 1
    time.sleep(0.6)  # older than the threshold
    t0 = time.perf_counter()
    assert _resolve(store) == (EXPECTED, False)
    assert time.perf_counter() - t0 < 5  # dead owner on this host: no waiting for staleness
    assert not lock.exists() and not tmps[0].exists()
    assert [e["event"] for e in read_events(tmp_path)] == ["takeover", "orphan_tmp", "miss"]


def test_stale_lock_without_heartbeat_is_taken_over(tmp_path: Path) -> None:
    """An owner on another host cannot be probed: its lock goes stale when its heartbeat stops."""
    path = tmp_path / "k.lock"
    path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "token": "t",
                                "created_unix": 0.0}))
    lock = KeyLock(path, heartbeat_s=0.05, stale_s=0.4)
    t0 = time.monotonic()
    assert lock.acquire(timeout_s=10)
    assert 0.4 <= time.monotonic() - t0 < 5
    assert lock.broke_stale is not None and lock.broke_stale.host == "elsewhere"
    lock.release()
    assert not path.exists()


def test_heartbeat_keeps_a_slow_holder_alive(tmp_path: Path) -> None:
    path = tmp_path / "k.lock"
    holder = KeyLock(path, heartbeat_s=0.05, stale_s=0.5)
    holder.acquire()
    waiter = KeyLock(path, heartbeat_s=0.05, stale_s=0.5)
    with pytest.raises(TimeoutError):
        waiter.acquire(timeout_s=1.5)  # three stale periods, yet the holder keeps beating
    assert lock_is_live(path, stale_s=0.5) and not holder.lost
    holder.release()
    assert waiter.acquire(timeout_s=1)
    waiter.release()


SIGKILLED_WRITER = """
import sys, time
from pathlib import Path
from bench.cache.store import ArtifactStore
def compute(d):
    (d / "half.npy").write_bytes(b"0" * 4096)
    Path(sys.argv[2]).write_text("writing")
    time.sleep(600)  # the parent kills it here with SIGKILL
ArtifactStore(sys.argv[1]).resolve("s", version="1", params={}, upstream=[],
                                  compute=compute, load=str)
"""

LIVE_TEMP_OWNER = """
import sys, time
from pathlib import Path
from bench.cache.store import temp_folder_name
tmp = Path(sys.argv[1]) / temp_folder_name(sys.argv[2])
tmp.mkdir(parents=True)
(tmp / "part.npy").write_bytes(b"1" * 100)
Path(sys.argv[3]).write_text(str(tmp))
time.sleep(600)  # a live writer (one that lost its lock, say): its folder must survive
"""


def _child(code: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env)


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "child did not start"
        time.sleep(0.05)


def test_sigkilled_writer_temp_folder_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    # issue 18: kill -9 during a write, rerun at once: the rerun took over the lock and
    # published, but the killed writer's .tmp-<key>-<id> folder (recent, so spared) stayed
    cache, ready = tmp_path / "cache", tmp_path / "ready"
    proc = _child(SIGKILLED_WRITER, str(cache), str(ready))
    _wait_for(ready, proc)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    store = ArtifactStore(cache)  # default lock_stale_s=60: the folder is seconds old
    shard = store.path_for("s", KEY).parent
    (orphan,) = shard.glob(".tmp-*")
    assert (orphan / "half.npy").is_file() and store.lock_path("s", KEY).is_file()
    assert _resolve(store) == (EXPECTED, False)
    assert not orphan.exists() and not list(shard.glob(".tmp-*"))
    assert sorted(p.name for p in shard.iterdir()) == [KEY]
    events = read_events(cache)
    assert [e["event"] for e in events] == ["takeover", "orphan_tmp", "miss"]
    assert events[1]["path"] == str(orphan) and f"pid {proc.pid}" in events[1]["reason"]


def test_a_live_writers_temp_folder_is_never_removed(tmp_path: Path) -> None:
    cache, ready = tmp_path / "cache", tmp_path / "ready"
    store = ArtifactStore(cache, lock_stale_s=0.5, heartbeat_s=0.1)
    shard = store.path_for("s", KEY).parent
    proc = _child(LIVE_TEMP_OWNER, str(shard), KEY, str(ready))
    try:
        _wait_for(ready, proc)
        live = Path(ready.read_text())
        old = time.time() - 3600  # older than any staleness threshold: only the owner counts
        os.utime(live / "part.npy", (old, old))
        os.utime(live, (old, old))
        assert _resolve(store) == (EXPECTED, False)
        assert (live / "part.npy").is_file()
        assert gc(store, tmp_age_s=1.0).kept_live_tmps == 1 and live.is_dir()
    finally:
        proc.kill()
        proc.wait(timeout=60)
    # its owner is gone now: gc drops it at once, whatever its age
    os.utime(live, None)
    rep = gc(store, tmp_age_s=3600.0)
    assert [what for what, _, _ in rep.removed] == ["orphan temp"] and not live.exists()


def test_temp_folder_names_carry_their_owner() -> None:
    name = temp_folder_name(KEY)
    assert name.startswith(f".tmp-{KEY}-")
    key, owner = temp_folder_owner(name)
    assert key == KEY and owner is not None and owner.pid == os.getpid()
    assert temp_folder_owner(f".tmp-{KEY}-deadbeef") == (KEY, None)  # written before owners
    assert temp_folder_owner(f".tmp-{KEY}-0badf00d-123-ip-10-0-0-1.example") == (
        KEY, TempOwner(pid=123, host="ip-10-0-0-1.example"))
