"""``python -m bench.data.squad2_calibration LABELLING [-o LABELS]``: the shipped human labels
for a run's judge verdicts (``bench.data.squad2_calibration.human_labels``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.docs import JUDGES
from bench.errors import InputError
from bench.metrics.cli import OneLineParser, run_cli


def _main(argv: Sequence[str] | None) -> int:
    from bench.data.squad2_calibration import human_labels
    from bench.judge.labelling import read_jsonl

    p = OneLineParser(prog="python -m bench.data.squad2_calibration",
                      description=__doc__.splitlines()[0], epilog=JUDGES.help_line(),
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("labelling", type=Path,
                   help="a run's judge_labelling.jsonl (dataset=squad2_calibration)")
    p.add_argument("-o", "--out", type=Path, default=None, help="labels JSONL (default stdout)")
    args = p.parse_args(argv)
    rows = [obj for _, obj in read_jsonl(args.labelling)]
    labels, skipped = human_labels(rows)
    if not labels:
        raise InputError(args.labelling, 0, "no item the shipped labels apply to (a "
                                            "context_relevance verdict on the question's own "
                                            f"paragraph); left out: {dict(skipped)}")
    text = "".join(json.dumps(x) + "\n" for x in labels)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
    left = ", ".join(f"{k} {n}" for k, n in sorted(skipped.items())) or "none"
    print(f"{len(labels)} items labelled from SQuAD 2.0; left out: {left}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
