"""What ``python -m bench --help`` prints before Hydra's generic help: what bench does and the
shipped experiments (each ``conf/experiment/*.yaml`` with the first phrase of its comment)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from bench.docs import EXPERIMENTS, GETTING_STARTED

INTRO = """\
bench: measure retrieval-augmented generation stage by stage (data -> chunking -> embedding
-> index -> retrieval -> metrics -> report) on the same golden queries, with per-query values,
bootstrap confidence intervals, paired comparisons and honest completion accounting.

usage: python -m bench +experiment=NAME [group=option] [group.key=value ...]
       python -m bench -m group.key=a,b ...      (a sweep)
       python -m bench.evaluate QRELS RUN         (score any TREC run, trec_eval-compatible)
       python -m bench.compare RUN_A RUN_B        (paired comparison of two runs)
"""


def describe(path: Path, width: int = 88) -> str:
    """The first phrase of the comment block at the top of an experiment file."""
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.startswith("#"):
            break
        text = raw.lstrip("#").strip()
        if not text.startswith("@package"):
            lines.append(text)
    joined = " ".join(lines)
    phrase = re.split(r"(?<=\.)\s", joined, maxsplit=1)[0].rstrip(".")
    return textwrap.shorten(phrase, width, placeholder=" ...")


def intro(conf_dir: str | Path) -> str:
    """The text: what bench does, then each shipped experiment on one line."""
    files = sorted(Path(conf_dir, "experiment").glob("*.yaml"))
    width = max((len(f.stem) for f in files), default=0)
    rows = [f"  {f.stem.ljust(width)}  {describe(f)}" for f in files]
    return "\n".join([INTRO, "experiments (+experiment=NAME):", *rows, "",
                      GETTING_STARTED.help_line(), EXPERIMENTS.help_line(), ""])
