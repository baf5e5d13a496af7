"""``python -m bench --help`` opens with what bench does and every shipped experiment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.app import CONF_DIR
from bench.intro import describe, intro

ROOT = Path(__file__).resolve().parents[1]


def test_intro_lists_every_experiment() -> None:
    text = intro(CONF_DIR)
    names = sorted(f.stem for f in Path(CONF_DIR, "experiment").glob("*.yaml"))
    assert names and all(f"\n  {n} " in text for n in names)
    assert text.startswith("bench: measure retrieval-augmented generation")


def test_describe_takes_the_first_sentence(tmp_path: Path) -> None:
    f = tmp_path / "x.yaml"
    f.write_text("# @package _global_\n# Short one: a, b. Second sentence.\nkey: 1\n# later\n")
    assert describe(f) == "Short one: a, b"
    f.write_text("# " + "word " * 40 + "\n")
    assert len(describe(f)) <= 88 and describe(f).endswith(" ...")


def test_help_prints_the_intro_before_hydra() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "kernels")]))
    out = subprocess.run([sys.executable, "-m", "bench", "--help"], capture_output=True,
                         text=True, env=env, timeout=120, check=True).stdout
    assert out.index("experiments (+experiment=NAME):") < out.index("Configuration groups")
