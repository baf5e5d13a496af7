"""python -m bench.cache verify|gc|du on a small store."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bench.cache.__main__ import main
from bench.cache.store import ArtifactStore, make_key


def _fill(root: Path) -> ArtifactStore:
    store = ArtifactStore(root)
    for i in range(3):
        store.resolve("s", version="1", params={"i": i}, upstream=[],
                      compute=lambda d: (d / "a.bin").write_bytes(b"x" * 1000), load=str)
    store.resolve("t", version="1", params={}, upstream=[],
                  compute=lambda d: (d / "b.json").write_text("{}"), load=str)
    return store


def test_verify_finds_damage_and_heals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _fill(tmp_path)
    assert main(["--root", str(tmp_path), "verify"]) == 0
    assert "4 artifacts checked, 0 damaged" in capsys.readouterr().out
    bad = store.path_for("s", make_key("s", "1", {"i": 1}, [])) / "a.bin"
    bad.write_bytes(b"x" * 999 + b"y")
    assert main(["--root", str(tmp_path), "verify", "-q"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "DAMAGED: a.bin: xxh3_128" in out[0]
    assert main(["--root", str(tmp_path), "verify", "--quick"]) == 0  # same size: sizes pass
    capsys.readouterr()
    assert main(["--root", str(tmp_path), "verify", "--heal"]) == 0
    assert "-> quarantined" in capsys.readouterr().out
    assert not bad.exists()
    assert main(["--root", str(tmp_path), "verify"]) == 0


def test_gc_prunes_quarantine_orphans_and_unlisted(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    store = _fill(tmp_path)
    keep_key = make_key("t", "1", {}, [])
    store.quarantine("s", make_key("s", "1", {"i": 0}, []), "test")
    orphan = store.path_for("s", "ab" * 32).parent / f".tmp-{'ab' * 32}-deadbeef"
    orphan.mkdir(parents=True)
    (orphan / "half.npy").write_bytes(b"0" * 100)
    fresh = store.path_for("s", "cd" * 32).parent / f".tmp-{'cd' * 32}-0badf00d"
    fresh.mkdir(parents=True)
    old = time.time() - 7200
    os.utime(orphan / "half.npy", (old, old))
    os.utime(orphan, (old, old))
    assert main(["--root", str(tmp_path), "gc", "--tmp-age", "3600"]) == 0
    out = capsys.readouterr().out
    assert "quarantine" in out and "orphan temp" in out
    assert not orphan.exists() and fresh.exists()  # a recent temp folder may be a live writer
    assert not (tmp_path / "_quarantine" / "s").exists() or not any(
        (tmp_path / "_quarantine" / "s").iterdir())
    keep = tmp_path / "keep.txt"
    keep.write_text(f"{keep_key}  # the only one\n")
    assert main(["--root", str(tmp_path), "gc", "--keep", str(keep), "-n"]) == 0
    assert "would remove not kept" in capsys.readouterr().out
    assert main(["--root", str(tmp_path), "gc", "--keep", str(keep)]) == 0
    capsys.readouterr()
    assert main(["--root", str(tmp_path), "du"]) == 0
    rows = {ln.split()[0]: ln.split()[1] for ln in capsys.readouterr().out.splitlines()}
    assert rows["t"] == "1" and rows.get("s", "0") == "0"
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"cache": {"events": []}}))
    assert main(["--root", str(tmp_path), "gc", "--keep", str(run_json)]) == 0


def test_missing_root_is_one_line_exit_2(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(tmp_path / "nope"), "du"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no cache folder" in err
