"""``python -m bench.data.foldoc build --out DIR``: fetch, parse, build and write in one go.

In: command-line arguments (``main``) or paths and ``BuildOptions`` (``build``). Out: the
benchmark folder written by ``source.write_benchmark``, one progress line a phase on stdout,
and an exit code (``main``) or the manifest written (``build``; None when already current).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from bench.data.base import CATEGORIES
from bench.data.foldoc.benchmark import BUILDER_VERSION, BuildOptions, build_benchmark
from bench.data.foldoc.deb import describe_deb, extract_dictd, fetch_deb
from bench.data.foldoc.dictd import read_dictd
from bench.data.foldoc.source import manifest_is_current, write_benchmark
from bench.errors import BenchError

#: seeds are hashed as text, but numpy-facing code downstream needs them in 64 bits
_MAX_SEED = 2**63 - 1


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one BenchError line (exit 2), not a usage block."""

    def error(self, message: str) -> NoReturn:
        raise BenchError(f"{self.prog}: {message} (see --help)")


def _check_args(args: argparse.Namespace) -> None:
    """Reject bad values before the .deb is fetched or unpacked."""
    if not 0 <= args.seed <= _MAX_SEED:
        raise BenchError(f"--seed must be between 0 and {_MAX_SEED}, got {args.seed}")
    if not 1 <= args.n_docs <= 10_000_000:
        raise BenchError(f"--n-docs must be between 1 and 10000000, got {args.n_docs}")
    for probe in (args.out, *args.out.parents):
        if probe.exists():
            if not probe.is_dir():
                raise BenchError(f"--out {args.out}: {probe} is a file, not a directory")
            break


def build(out: Path, *, deb: Path | None, cache_dir: Path | None, opts: BuildOptions,
          force: bool = False) -> dict[str, object] | None:
    """Build the benchmark into ``out`` unless it is already current; prints one line a phase.

    Returns the manifest written, or None when ``out`` was already up to date.
    """
    if not force and manifest_is_current(out, opts):
        print(f"foldoc: {out} is up to date (builder version {BUILDER_VERSION})", flush=True)
        return None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="foldoc-") as tmp_name:
        tmp = Path(tmp_name)
        deb_path = deb if deb is not None else fetch_deb(cache_dir or tmp / "deb")
        if not deb_path.is_file():
            raise BenchError(f"--deb {deb_path}: file not found")
        source = describe_deb(deb_path)
        print(f"foldoc: source {source.deb} (version {source.version}, sha256 "
              f"{source.sha256[:12]}...)", flush=True)
        index, dict_dz = extract_dictd(deb_path, tmp / "x")
        entries = read_dictd(index, dict_dz)
    print(f"foldoc: parsed {len(entries)} entries", flush=True)
    built = build_benchmark(entries, opts)
    n_restricted = sum(1 for d in built.documents if d.allowed_roles)
    print(f"foldoc: {built.n_qualifying} entries qualify; corpus {len(built.documents)} "
          f"documents ({n_restricted} role-restricted)", flush=True)
    counts = Counter(q.category for q in built.queries)
    print("foldoc: queries " + " ".join(f"{c}={counts[c]}" for c in CATEGORIES)
          + f" total={len(built.queries)}", flush=True)
    for cat, target in opts.targets().items():
        if counts[cat] < target:
            print(f"foldoc: WARNING only {counts[cat]} of {target} {cat} queries could be "
                  "built", flush=True)
    manifest = write_benchmark(out, built, source, opts, len(entries))
    print(f"foldoc: wrote {out} (fingerprint {str(manifest['fingerprint'])[:12]}...) in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.data.foldoc build --out DIR [--deb PATH] ...``; returns the exit code."""
    parser = _OneLineParser(prog="python -m bench.data.foldoc",
                            description="Build the FOLDOC RAG benchmark offline.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build DIR/{corpus,queries}.jsonl + manifest.json")
    b.add_argument("--out", required=True, type=Path, help="output folder")
    b.add_argument("--deb", type=Path, help="use this dict-foldoc .deb (default: apt-get it)")
    b.add_argument("--cache-dir", type=Path,
                   help="keep the downloaded .deb here (default: a temporary folder)")
    b.add_argument("--seed", type=int, default=BuildOptions.seed)
    b.add_argument("--n-docs", type=int, default=BuildOptions.n_docs)
    b.add_argument("--force", action="store_true", help="rebuild even if DIR is up to date")
    try:
        args = parser.parse_args(argv)
        _check_args(args)
        build(args.out, deb=args.deb, cache_dir=args.cache_dir, force=args.force,
              opts=BuildOptions(seed=args.seed, n_docs=args.n_docs))
    except BenchError as err:
        print(f"error: {err.one_line()}", file=sys.stderr)
        return err.exit_code
    return 0
