from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from bench.cache.events import computations, read_events
from bench.cache.store import ArtifactStore, make_key


def _write(tmp: Path, text: str) -> None:
    (tmp / "a.txt").write_text(text)


def test_miss_then_hit(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    calls = []

    def compute(d: Path) -> None:
        calls.append(1)
        _write(d, "x")

    for _ in range(2):
        value, key, _ = store.resolve("s", version="1", params={"a": 1}, upstream=["u"],
                                      compute=compute, load=lambda d: (d / "a.txt").read_text())
        assert value == "x"
    assert calls == [1]
    assert [e.hit for e in store.events] == [False, True]
    assert [e.kind for e in store.events] == ["miss", "hit"]
    assert key == make_key("s", "1", {"a": 1}, ["u"])


def test_key_depends_on_every_part() -> None:
    base = make_key("s", "1", {"a": 1}, ["u"])
    assert base != make_key("t", "1", {"a": 1}, ["u"])
    assert base != make_key("s", "2", {"a": 1}, ["u"])
    assert base != make_key("s", "1", {"a": 2}, ["u"])
    assert base != make_key("s", "1", {"a": 1}, ["v"])
    assert base == make_key("s", "1", {"a": 1}, ["u"])


def test_failed_compute_leaves_nothing(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)

    def boom(d: Path) -> None:
        _write(d, "half")
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        store.resolve("s", version="1", params={}, upstream=[], compute=boom, load=str)
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and "_events" not in p.parts]
    assert leftovers == []


def test_publish_race_keeps_first(tmp_path: Path) -> None:
    """A writer that lost its lock and finishes second discards its copy instead of failing."""
    store = ArtifactStore(tmp_path)
    key = make_key("s", "1", {}, [])
    with store._writer("s", key, {"writer": {"token": "late"}}) as late:
        _write(late, "second")
        with store._writer("s", key, {"writer": {"token": "early"}}) as early:
            _write(early, "first")
    assert (store.path_for("s", key) / "a.txt").read_text() == "first"
    assert not any(p.name.startswith(".tmp") for p in tmp_path.rglob("*"))


def test_threads_compute_once(tmp_path: Path) -> None:
    """Two workers started together on an empty cache: one computes, the other waits and
    loads the winner's artifact."""
    calls: list[int] = []
    results: list[tuple[str, bool]] = []

    def compute(d: Path) -> None:
        calls.append(1)
        time.sleep(0.5)
        _write(d, "x")

    def worker() -> None:
        value, _, hit = ArtifactStore(tmp_path).resolve(
            "s", version="1", params={}, upstream=[], compute=compute,
            load=lambda d: (d / "a.txt").read_text())
        results.append((value, hit))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]
    assert sorted(results) == [("x", False), ("x", True)]
    kinds = sorted(e["event"] for e in read_events(tmp_path))
    assert kinds == ["miss", "wait"]
    assert computations(tmp_path) == {("s", make_key("s", "1", {}, [])): 1}
