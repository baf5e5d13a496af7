"""``python -m bench.data.foldoc build --out DIR``: fetch, parse, build and write in one go.

In: command-line arguments (``main``) or paths and ``BuildOptions`` (``build``). Out: the
benchmark folder written by ``source.write_benchmark``, one progress line a phase on stdout,
and an exit code (``main``) or the manifest written (``build``; None when already current).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from bench.data.base import CATEGORIES
from bench.data.foldoc.benchmark import BuildOptions, build_benchmark
from bench.data.foldoc.benchmark_v2 import BuildOptionsV2, build_benchmark_v2
from bench.data.foldoc.benchmark_v3 import BuildOptionsV3, build_benchmark_v3
from bench.data.foldoc.deb import describe_deb, extract_dictd, extract_members, fetch_deb
from bench.data.foldoc.dictd import read_dictd
from bench.data.foldoc.source import (
    AnyOptions,
    Extras,
    manifest_is_current,
    version_of,
    write_benchmark,
)
from bench.data.foldoc.wordnet import DATA_DIR as WORDNET_DIR
from bench.data.foldoc.wordnet import LICENSE as WORDNET_LICENSE
from bench.data.foldoc.wordnet import PACKAGE as WORDNET_PACKAGE
from bench.data.foldoc.wordnet import WordNet
from bench.docs import BENCHMARK_CARD
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


def build(out: Path, *, deb: Path | None, cache_dir: Path | None,
          opts: AnyOptions, force: bool = False,
          wordnet_deb: Path | None = None) -> dict[str, object] | None:
    """Build the benchmark into ``out`` unless it is already current; prints one line a phase.

    ``opts`` picks the version: ``BuildOptions`` builds version 1 (``dataset=foldoc_v1``),
    ``BuildOptionsV2`` version 2 (``dataset=foldoc_v2``), ``BuildOptionsV3`` version 3 (the
    default ``dataset=foldoc``); versions 2 and 3 also need Debian's wordnet-base
    (``wordnet_deb``, else fetched into ``cache_dir``).
    Returns the manifest written, or None when ``out`` was already up to date.
    """
    if not force and manifest_is_current(out, opts):
        version = version_of(opts).builder_version
        print(f"foldoc: {out} is up to date (builder version {version})", flush=True)
        return None
    if isinstance(opts, BuildOptionsV2):  # and BuildOptionsV3, its subclass
        return _build_v2(out, deb=deb, wordnet_deb=wordnet_deb, cache_dir=cache_dir, opts=opts)
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


def _build_v2(out: Path, *, deb: Path | None, wordnet_deb: Path | None,
              cache_dir: Path | None, opts: BuildOptionsV2) -> dict[str, object]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="foldoc-") as tmp_name:
        tmp = Path(tmp_name)
        debs = cache_dir or tmp / "deb"
        deb_path = deb if deb is not None else fetch_deb(debs)
        if not deb_path.is_file():
            raise BenchError(f"--deb {deb_path}: file not found")
        wn_path = wordnet_deb if wordnet_deb is not None else fetch_deb(debs, WORDNET_PACKAGE)
        if not wn_path.is_file():
            raise BenchError(f"--wordnet-deb {wn_path}: file not found")
        source, wn_source = describe_deb(deb_path), describe_deb(wn_path)
        print(f"foldoc: sources {source.deb}, {wn_source.deb}", flush=True)
        index, dict_dz = extract_dictd(deb_path, tmp / "x")
        entries = read_dictd(index, dict_dz)
        wn_files = tuple(f"{WORDNET_DIR}/data.{p}" for p in ("noun", "verb", "adj"))
        extract_members(wn_path, tmp / "wn", wn_files)
        if not all((tmp / "wn" / f).is_file() for f in wn_files):
            raise BenchError(f"{wn_path} does not contain {', '.join(wn_files)}")
        wordnet = WordNet.load(tmp / "wn" / WORDNET_DIR)
    print(f"foldoc: parsed {len(entries)} entries, {len(wordnet.nouns)} WordNet noun senses",
          flush=True)
    built = (build_benchmark_v3(entries, wordnet, opts) if isinstance(opts, BuildOptionsV3)
             else build_benchmark_v2(entries, wordnet, opts))
    counts = Counter(q.category for q in built.queries)
    print(f"foldoc: {built.n_qualifying} entries qualify, {len(built.matches)} match a "
          f"WordNet computing sense; corpus {len(built.documents)} documents", flush=True)
    print("foldoc: queries " + " ".join(f"{c}={counts[c]}" for c in version_of(opts).categories)
          + f" total={len(built.queries)}", flush=True)
    for cat, target in opts.targets().items():
        if counts[cat] < target:
            print(f"foldoc: WARNING only {counts[cat]} of {target} {cat} queries could be "
                  "built", flush=True)
    extras = Extras(
        sources={"wordnet": {**dataclasses.asdict(wn_source), "license": WORDNET_LICENSE}},
        files={
            "hard_negatives.jsonl": "".join(
                json.dumps({"query_id": q, "doc_ids": list(ids)}) + "\n"
                for q, ids in built.hard_negatives.items()),
            "wordnet_matches.tsv": "doc_id\theadword\tsynset\tgloss\n" + "".join(
                f"{m.doc_id}\t{m.headword}\t{m.synset}\t{m.gloss}\n" for m in built.matches),
        })
    manifest = write_benchmark(out, built, source, opts, len(entries), extras)
    print(f"foldoc: wrote {out} (fingerprint {str(manifest['fingerprint'])[:12]}...) in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.data.foldoc build --out DIR [--deb PATH] ...``; returns the exit code."""
    parser = _OneLineParser(prog="python -m bench.data.foldoc",
                            description="Build the FOLDOC RAG benchmark offline.",
                            epilog=BENCHMARK_CARD.help_line())
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build DIR/{corpus,queries}.jsonl + manifest.json",
                       epilog=BENCHMARK_CARD.help_line())
    b.add_argument("--out", required=True, type=Path, help="output folder")
    b.add_argument("--deb", type=Path, help="use this dict-foldoc .deb (default: apt-get it)")
    b.add_argument("--cache-dir", type=Path,
                   help="keep the downloaded .deb here (default: a temporary folder)")
    b.add_argument("--version", type=int, choices=(1, 2, 3), default=3,
                   help="benchmark version: 3 (default, dataset=foldoc), 2 (dataset=foldoc_v2) "
                        "or 1 (dataset=foldoc_v1)")
    b.add_argument("--wordnet-deb", type=Path,
                   help="versions 2 and 3: use this wordnet-base .deb (default: apt-get it)")
    b.add_argument("--seed", type=int, default=BuildOptions.seed)
    b.add_argument("--n-docs", type=int, default=BuildOptions.n_docs)
    b.add_argument("--force", action="store_true", help="rebuild even if DIR is up to date")
    try:
        args = parser.parse_args(argv)
        _check_args(args)
        opts: AnyOptions = {1: BuildOptions, 2: BuildOptionsV2, 3: BuildOptionsV3}[
            args.version](seed=args.seed, n_docs=args.n_docs)
        build(args.out, deb=args.deb, cache_dir=args.cache_dir, force=args.force, opts=opts,
              wordnet_deb=args.wordnet_deb)
    except BenchError as err:
        print(f"error: {err.one_line()}", file=sys.stderr)
        return err.exit_code
    return 0
