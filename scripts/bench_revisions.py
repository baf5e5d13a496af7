"""Two revisions of bench on the same ``python -m bench`` command, interleaved: the speed and
memory check behind a claim that a change made a run faster, slower or leaner.

    scripts/bench_revisions.py --old 0439370 --new HEAD --reps 2 --out /tmp/ab -- \\
        dataset=scale dataset.path=runs/c300k embedder=static_l3 index=ivf_flat

Each revision is checked out once into ``OUT/trees/<rev>`` (``git worktree``, removed at the
end; ``--new WORKTREE`` runs this checkout as it is, uncommitted changes included). Then,
``--reps`` times, each revision runs the command in a fresh process on an empty cache, old
then new: the order is the same every round, so a box that drifts during the check drifts for
both. Per run it records the wall time from outside the process (the interpreter's start
included), its peak RSS (``getrusage`` of the finished run, through a wrapper process of its
own) and each computed stage's seconds from the run's log. It prints a markdown table and
writes ``OUT/revisions.json``; it also says whether the last runs' per-query values are
identical (run and config ids aside). Run it on an idle box; every figure is this machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE_DONE = re.compile(r"\]\[bench\]\[INFO\] - stage (\S+)\s+done in ([0-9.]+)s")


def tree_of(rev: str, out: Path) -> Path:
    """A checkout of ``rev`` (this one for ``WORKTREE``)."""
    if rev == "WORKTREE":
        return ROOT
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = out / "trees" / sha
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha],
                       check=True, capture_output=True)
    return tree


def run_once(tree: Path, overrides: list[str], folder: Path) -> dict[str, object]:
    """One run of ``python -m bench`` from ``tree`` on an empty cache in ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "TQDM_DISABLE": "1"}
    cmd = [sys.executable, "-m", "bench", *overrides, f"cache_dir={folder / 'cache'}",
           f"hydra.run.dir={folder / 'run'}", "report.plot=false"]
    # a fresh wrapper per run: its children's peak RSS is this run's alone
    peak_file = folder / "peak_rss_kb"
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[2:]); "
               "open(sys.argv[1], 'w').write(str(resource.getrusage("
               "resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(r.returncode)")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", wrapper, str(peak_file), *cmd], cwd=tree,
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak = int(peak_file.read_text()) if peak_file.exists() else None
    log = (folder / "run" / "app.log")
    stages: dict[str, float] = {}
    for m in STAGE_DONE.finditer(log.read_text() if log.exists() else ""):
        stages[m.group(1)] = stages.get(m.group(1), 0.0) + float(m.group(2))
    return {"rc": proc.returncode, "wall_s": wall,
            "peak_rss_mb": peak / 1024 if peak else None, "stages": stages,
            "error": proc.stderr.strip().splitlines()[-1] if proc.returncode else None}


def same_values(a: Path, b: Path) -> bool | None:
    """Whether two runs' per_query.parquet hold the same values (ids aside)."""
    import pandas as pd

    fa, fb = a / "run" / "per_query.parquet", b / "run" / "per_query.parquet"
    if not (fa.exists() and fb.exists()):
        return None
    drop = ["run_id", "config_id"]
    x = pd.read_parquet(fa).drop(columns=drop, errors="ignore")
    y = pd.read_parquet(fb).drop(columns=drop, errors="ignore")
    return bool(x.equals(y))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="a git revision")
    p.add_argument("--new", default="WORKTREE", help="a git revision, or WORKTREE")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("overrides", nargs="*", help="the command's overrides (after --)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    trees = {"old": tree_of(args.old, args.out), "new": tree_of(args.new, args.out)}
    rows = []
    for rep in range(1, args.reps + 1):
        for side in ("old", "new"):
            r = run_once(trees[side], args.overrides, args.out / f"{side}-{rep}")
            rows.append({"rep": rep, "side": side, **r})
            print(f"rep {rep} {side}: rc {r['rc']} {r['wall_s']:.1f} s", file=sys.stderr)
    stages = sorted({s for r in rows for s in r["stages"]})  # type: ignore[attr-defined]
    print("| rep | revision | rc | wall s | peak RSS MB | " + " | ".join(stages) + " |")
    print("|---:|---|---:|---:|---:|" + "---:|" * len(stages))
    for r in rows:
        rss = "—" if r["peak_rss_mb"] is None else f"{r['peak_rss_mb']:,.0f}"
        cells = [f"{r['stages'].get(s, 0.0):.1f}" for s in stages]  # type: ignore[attr-defined]
        print(f"| {r['rep']} | {r['side']} ({args.old if r['side'] == 'old' else args.new}) | "
              f"{r['rc']} | {r['wall_s']:.1f} | {rss} | " + " | ".join(cells) + " |")
    same = same_values(args.out / f"old-{args.reps}", args.out / f"new-{args.reps}")
    print(f"per-query values identical: {same}")
    (args.out / "revisions.json").write_text(json.dumps(
        {"old": args.old, "new": args.new, "overrides": args.overrides, "runs": rows,
         "values_identical": same}, indent=2))
    for tree in {t for t in trees.values() if t != ROOT}:  # checkouts of this check only
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False, capture_output=True)
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
