"""``python -m bench.data.splits make|check``: write a grouped, seeded split file, or check
one for contamination (the library is ``bench.data.splits``; docs/data.md)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.data.base import Dataset
from bench.data.splits import (
    check_split,
    contamination,
    groups,
    make_splits,
    with_splits,
)
from bench.errors import BenchError


def _shares(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        name = name.strip()
        check_split(name, "--shares")
        try:
            share = float(value)
        except ValueError:
            raise BenchError(f"--shares: {part!r} is not SPLIT=SHARE") from None
        if not (math.isfinite(share) and share > 0):
            raise BenchError(f"--shares: the share of {name} must be > 0, got {value}")
        if name in out:
            raise BenchError(f"--shares: {name} is given twice")
        out[name] = share
    return out


def _load(args: argparse.Namespace) -> Dataset:
    """The dataset named on the command line (one source's files)."""
    if args.golden:
        from bench.data.golden import GoldenDataset

        return GoldenDataset(corpus=args.golden[0], queries=args.golden[1]).load()
    if args.beir:
        from bench.data.beir import BeirDataset

        return BeirDataset(path=args.beir, split=args.beir_split).load()
    if args.csv:
        from bench.data.csv_source import CsvDataset

        return CsvDataset(corpus=args.csv[0], queries=args.csv[1], qrels=args.csv[2]).load()
    from bench.data.foldoc import FoldocDataset

    return FoldocDataset(path=args.foldoc).load()


def _parser() -> argparse.ArgumentParser:
    from bench.docs import DATA
    from bench.metrics.cli import OneLineParser

    p = OneLineParser(prog="python -m bench.data.splits",
                      description="Write a grouped, seeded split file, or check one for "
                                  "contamination.",
                      epilog=DATA.help_line())
    p.add_argument("command", choices=("make", "check"))
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--golden", nargs=2, metavar=("CORPUS", "QUERIES"))
    src.add_argument("--beir", metavar="DIR")
    src.add_argument("--csv", nargs=3, metavar=("CORPUS", "QUERIES", "QRELS"))
    src.add_argument("--foldoc", metavar="DIR")
    p.add_argument("--beir-split", default="test", help="the BEIR qrels split (default test)")
    p.add_argument("--shares", default="development=0.6,calibration=0.1,release=0.3",
                   help="make: SPLIT=SHARE,... (default development=0.6,calibration=0.1,"
                        "release=0.3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="make: the split file to write (JSONL)")
    p.add_argument("--splits", type=Path, help="check: the split file to check (default: the "
                                               "queries' own split field)")
    p.add_argument("--run", type=Path, action="append", default=[],
                   help="check: a run dir whose run.json config is checked for release-split "
                        "query ids (repeatable)")
    return p


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    ds = _load(args)
    if args.command == "make":
        if args.out is None:
            raise BenchError("make needs --out FILE")
        shares = _shares(args.shares)
        split = make_splits(ds.queries, shares, seed=args.seed)
        tmp = args.out.with_name(f".{args.out.name}.tmp")
        tmp.write_text("".join(json.dumps({"query_id": q.query_id, "split": split[q.query_id]})
                               + "\n" for q in ds.queries))
        tmp.replace(args.out)
        counts = Counter(split.values())
        print(f"{args.out}: {len(split)} queries in {len(groups(ds.queries))} groups; "
              + ", ".join(f"{s} {counts[s]}" for s in shares))
        return 0
    if args.splits is not None:
        ds = with_splits(ds, str(args.splits))
    found = contamination(ds.queries)
    lines = found.warnings()
    for run in args.run:
        config = _run_config(run)
        lines += [f"{run}: {w}" for w in
                  contamination(ds.queries, config).warnings()
                  if w.startswith("the run's config")]
    for line in lines:
        print(f"contamination: {line}")
    if not lines:
        print("no contamination found")
    return 1 if lines else 0


def _run_config(run: Path) -> dict[str, object]:
    path = run / "run.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise BenchError(f"{path}: not a readable run.json ({exc})") from None
    config = manifest.get("config") if isinstance(manifest, dict) else None
    if not isinstance(config, dict):
        raise BenchError(f"{path}: has no 'config' object")
    return config


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: exit 0 (written / nothing found), 1 (contamination found), 2 (bad
    input, one line)."""
    from bench.metrics.cli import run_cli

    return run_cli(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
