"""scripts/bench_revisions.py: two revisions on one command, interleaved, with their wall
times, peak RSS, stage seconds and whether their per-query values agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_revisions.py"


def test_head_against_this_checkout(tmp_path: Path) -> None:
    out = tmp_path / "ab"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--old", "HEAD", "--new", "WORKTREE", "--reps", "1",
         # the static encoder: the script is checked, not a model, and its runs are half the
         # seconds without a transformer to import
         "--out", str(out), "--", "dataset=synthetic", "embedder=static_l3", "dataset.n_docs=60",
         "dataset.n_queries=12", "metrics.bootstrap_resamples=100", "latency.queries=5"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| 1 | old (HEAD) | 0 |" in proc.stdout and "| 1 | new (WORKTREE) | 0 |" in proc.stdout
    assert "per-query values identical: True" in proc.stdout
    doc = json.loads((out / "revisions.json").read_text())
    assert [r["side"] for r in doc["runs"]] == ["old", "new"]
    for r in doc["runs"]:
        assert r["wall_s"] > 0 and r["peak_rss_mb"] > 50 and r["stages"]["chunk"] >= 0
    # the HEAD checkout was a worktree of this check: gone from git's list afterwards
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True,
                            text=True, check=True).stdout
    assert str(out) not in listed


def test_bad_reps_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--old", "HEAD", "--reps", "0",
                           "--out", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "--reps must be >= 1" in proc.stderr
    assert not (tmp_path / "trees").exists()


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
