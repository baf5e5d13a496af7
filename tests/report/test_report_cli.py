"""python -m bench.report: merged output files; bad dirs one line, exit 2."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from report_fixture import N_CONFIGS, write_run

from bench.report.__main__ import main


def test_merges_runs_into_md_html_png_tensorboard(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", run_id="a")
    b = write_run(tmp_path / "b", run_id="b")
    out = tmp_path / "out"
    assert main([str(a), str(b), "--out", str(out), "--all-pairs"]) == 0
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for run in ("a", "b"):  # the configs table: "| # | run | config | ..."
        assert len(re.findall(rf"^\| \d+ \| {run} \| ", md, re.M)) == N_CONFIGS
    assert "All-pairs comparisons" in md and "Per-query drill-down" in md
    assert html.count('src="data:image/png;base64,') == len(list((out / "figures").iterdir()))
    assert "<script src" not in html and "<link" not in html  # self-contained
    assert len(list((out / "tensorboard").iterdir())) == 2 * N_CONFIGS


def test_bad_dir_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for arg in (str(tmp_path / "missing"), str(tmp_path / "empty")):
        p = subprocess.run([sys.executable, "-m", "bench.report", arg, "--no-tensorboard"],
                           capture_output=True, text=True, check=False)
        assert p.returncode == 2
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert arg in p.stderr
    p = subprocess.run([sys.executable, "-m", "bench.report", str(tmp_path / "empty"),
                        "--metrics", "nope@3"], capture_output=True, text=True, check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
