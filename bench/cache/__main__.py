"""``python -m bench.cache verify|gc|du [--root DIR]`` — check, prune and size the store.

verify  list every artifact and check sizes + checksums (exit 1 if any is damaged);
        ``--heal`` moves damaged ones to the quarantine (the next run rebuilds them).
gc      remove quarantined artifacts, orphaned temp folders of killed writers and stale
        locks; ``--older-than DAYS`` / ``--keep FILE`` also prune artifacts (between sweeps).
du      artifacts and bytes per stage, plus quarantine, temp folders, locks and event log.

The root defaults to ``$BENCH_CACHE_DIR`` or ``.cache/bench`` as for ``python -m bench``.
Exit codes: 0 ok, 1 verify found damage, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.cache.maintenance import du, gc, heal, read_keep, verify
from bench.cache.store import ArtifactStore
from bench.docs import CACHE
from bench.errors import BenchError


def _mib(n: int) -> str:
    return f"{n / 2**20:10.2f} MiB"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cache", description=__doc__.split("\n")[0],
                                epilog=CACHE.help_line())
    p.add_argument("--root", type=Path,
                   default=Path(os.environ.get("BENCH_CACHE_DIR", ".cache/bench")))
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="check every artifact's sizes and checksums")
    v.add_argument("--stage", default=None)
    v.add_argument("--quick", action="store_true", help="sizes only, no checksums")
    v.add_argument("--heal", action="store_true", help="quarantine damaged artifacts")
    v.add_argument("-q", "--quiet", action="store_true", help="print damaged artifacts only")
    g = sub.add_parser("gc", help="prune quarantine, orphan temp folders, stale locks")
    g.add_argument("--tmp-age", type=float, default=3600.0, metavar="SECONDS",
                   help="temp folders untouched this long and not locked are orphans (a "
                        "folder whose writer died on this host goes at once, a live one stays)")
    g.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                   help="also remove artifacts neither created nor used for DAYS")
    g.add_argument("--keep", type=Path, default=None, metavar="FILE",
                   help="also remove artifacts not listed (a run.json or one key per line)")
    g.add_argument("--keep-quarantine", action="store_true")
    g.add_argument("-n", "--dry-run", action="store_true")
    sub.add_parser("du", help="disk use per stage")
    args = p.parse_args(argv)
    try:
        return _run(args)
    except BenchError as exc:
        print(f"bench.cache: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code


def _run(args: argparse.Namespace) -> int:
    root: Path = args.root
    if not root.is_dir():
        raise BenchError(f"{root}: no cache folder there (set --root or BENCH_CACHE_DIR)")
    if args.cmd == "verify":
        store = ArtifactStore(root, verify="size" if args.quick else "full")
        n = bad = 0
        for c in verify(store, args.stage):
            n += 1
            a = c.artifact
            status = "ok" if c.problem is None else f"DAMAGED: {c.problem}"
            if c.problem is not None:
                bad += 1
                if args.heal and heal(store, c):
                    status += " -> quarantined"
            if c.problem is not None or not args.quiet:
                print(f"{a.stage:14s} {a.key[:16]} {_mib(a.bytes)} {c.check_s * 1000:8.1f} ms  "
                      f"{status}")
        print(f"{n} artifacts checked, {bad} damaged")
        return 1 if bad and not args.heal else 0
    if args.cmd == "gc":
        keep = read_keep(args.keep) if args.keep is not None else None
        rep = gc(ArtifactStore(root), tmp_age_s=args.tmp_age, older_than_days=args.older_than,
                 keep=keep, keep_quarantine=args.keep_quarantine, dry_run=args.dry_run)
        for what, path, size in rep.removed:
            verb = "would remove" if args.dry_run else "removed"
            print(f"{verb} {what:12s} {_mib(size)}  {path}")
        print(f"{len(rep.removed)} entries, {rep.bytes / 2**20:.2f} MiB"
              f"{' (dry run)' if args.dry_run else ''}; {rep.kept_live_tmps} temp folders in use")
        return 0
    total = 0
    for u in du(root):
        total += u.bytes
        print(f"{u.name:16s} {u.count:6d} {_mib(u.bytes)}")
    print(f"{'total':16s} {'':6s} {_mib(total)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
