from __future__ import annotations

import os
from pathlib import Path

import pytest

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
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert leftovers == []


def test_concurrent_publish_keeps_first(tmp_path: Path) -> None:
    """A second worker that computed the same key discards its copy instead of failing."""
    store = ArtifactStore(tmp_path)
    other = ArtifactStore(tmp_path)

    def slow_compute(d: Path) -> None:
        _write(d, "second")
        # the other worker publishes first, while we are still computing
        other.resolve("s", version="1", params={}, upstream=[],
                      compute=lambda d2: _write(d2, "first"), load=str)

    value, _, hit = store.resolve("s", version="1", params={}, upstream=[],
                                  compute=slow_compute, load=lambda d: (d / "a.txt").read_text())
    assert value == "first" and not hit
    assert not any(p.name.startswith(".tmp") for p in tmp_path.rglob("*"))
    assert os.listdir(tmp_path / "s")
