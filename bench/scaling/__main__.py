"""``python -m bench.scaling``: predict a corpus size from a scale profile, or check the
prediction against the sizes measured.

    python -m bench.scaling plan runs/scale --chunks 8841823 [--queries 6980] \
        [--stated gpu_check.json] [--dim 768] [--json plan.json]
    python -m bench.scaling validate runs/scale [--ratio 10] [--json checks.json]

The profile is ``scripts/bench_scale.py``'s ``--out`` folder (or its scale.json). A bad
profile or argument is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bench.docs import PERFORMANCE
from bench.errors import BenchError
from bench.index.memory import machine_memory_bytes
from bench.scaling.planner import (
    METHODS,
    at_dim,
    index_memory,
    memory_notes,
    predict,
    read_stated,
    validate,
)
from bench.scaling.profile import read_profile
from bench.scaling.report import prediction_markdown, to_json, validation_markdown


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1, ``8,841,823`` or ``8_841_823`` too (a bad value is
    argparse's usage and one line, exit 2)."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 1:
        raise argparse.ArgumentTypeError(f"must be > 1, got {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.scaling",
                                description=(__doc__ or "").split("\n\n")[0],
                                epilog=PERFORMANCE.help_line())
    sub = p.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="predict wall time, peak memory and disk at a size")
    plan.add_argument("profile", help="bench_scale.py's --out folder or its scale.json")
    size = plan.add_mutually_exclusive_group(required=True)
    size.add_argument("--chunks", type=positive_int, help="the target corpus in chunks")
    size.add_argument("--docs", type=positive_int,
                      help="the target corpus in documents (chunks per document: the profile's)")
    plan.add_argument("--queries", type=positive_int, help="default: the profile's")
    plan.add_argument("--stated", help="the GPU box's gpu_check.json, or a YAML of rates "
                                       "stated for another machine")
    plan.add_argument("--dim", type=positive_int,
                      help="vectors of this width (bytes from the math; default: the profile's)")
    check = sub.add_parser("validate", help="predict each measured size from smaller ones")
    check.add_argument("profile")
    check.add_argument("--ratio", type=_ratio, default=10.0,
                       help="fit on sizes at least this many times smaller (default 10)")
    for sp in (plan, check):
        sp.add_argument("--method", choices=METHODS, default="work")
        sp.add_argument("--json", help="also write the figures here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        profile = read_profile(args.profile)
        if len(profile.points) < 2:
            print(f"bench.scaling: {profile.source}: one size measured; the planner needs two "
                  "(scripts/bench_scale.py --sizes A B, or two python -m bench runs)",
                  file=sys.stderr)
            return 2
        if args.command == "plan":
            last = profile.points[-1]
            chunks = args.chunks or max(1, round(args.docs * last.n_chunks / last.n_docs))
            stated = read_stated(args.stated) if args.stated else None
            pred = predict(profile, chunks, n_queries=args.queries, method=args.method,
                           stated=stated)
            pred = replace(pred, index_memory=index_memory(profile.settings.get("ann"),
                                                           chunks, last.dim))
            if args.dim:
                pred = at_dim(pred, profile, args.dim)
            ram = None if stated is not None else machine_memory_bytes()
            pred = replace(pred, notes=(*pred.notes, *memory_notes(pred, stated, ram)))
            print(prediction_markdown(profile, pred))
            payload = to_json(profile, pred)
        else:
            checks = validate(profile, ratio=args.ratio, method=args.method)
            print(validation_markdown(profile, checks, ratio=args.ratio, method=args.method))
            payload = to_json(profile, checks=checks)
    except BenchError as exc:
        print(f"bench.scaling: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
