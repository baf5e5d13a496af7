"""Cost of cache verification on a warm second run of an experiment (default: quickstart).

Runs ``python -m bench +experiment=X`` as separate processes on ONE warm cache, interleaved
(off, full, size, off, full, size, ...) so drift in machine load hits every mode alike, with
``BENCH_CACHE_VERIFY`` set per run. Reports per mode the median of: the process wall time,
and the summed wall time of the cache resolutions the run made (from ``run.json``: verify +
load of every stage artifact), and the bytes of the artifacts the run verified.

Not a test: ``HF_HUB_OFFLINE=1 python scripts/bench_cache_verify.py --cache DIR --reps 4
[-- extra overrides]`` (fill the cache with one run first; every run must be all hits).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("off", "full", "size")


def one(mode: str, cache: Path, out: Path, experiment: str,
        extra: list[str]) -> tuple[float, float, int]:
    env = {**os.environ, "BENCH_CACHE_VERIFY": mode}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bench", f"+experiment={experiment}",
                    f"cache_dir={cache}", f"hydra.run.dir={out}", *extra],
                   env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    manifest = json.loads((out / "run.json").read_text())
    events = manifest["cache"]["events"]
    if not all(e["hit"] for e in events):
        raise SystemExit(f"run {out} was not all cache hits: warm the cache first")
    size = sum(p.stat().st_size for e in events for p in Path(e["path"]).rglob("*")
               if p.is_file())
    return wall, sum(e["wall_s"] for e in events), size


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--experiment", default="quickstart")
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("extra", nargs="*")
    args = p.parse_args()
    res: dict[str, list[tuple[float, float, int]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for mode in MODES:
                out = Path(tmp) / f"{mode}-{rep}"
                res[mode].append(one(mode, args.cache, out, args.experiment, args.extra))
                print(f"rep {rep} {mode:4s}: {res[mode][-1][0]:6.2f} s process, "
                      f"{res[mode][-1][1] * 1000:7.1f} ms in cache resolutions", flush=True)
    base_wall = statistics.median(w for w, _, _ in res["off"])
    base_cache = statistics.median(c for _, c, _ in res["off"])
    print("\n| verify | process wall s (median) | cache resolve ms (median) | "
          "overhead vs off | artifact MiB |")
    print("|---|---:|---:|---:|---:|")
    for mode in MODES:
        w = statistics.median(x for x, _, _ in res[mode])
        c = statistics.median(x for _, x, _ in res[mode])
        print(f"| {mode} | {w:.2f} | {c * 1000:.1f} | {(c - base_cache) * 1000:+.1f} ms "
              f"({(w - base_wall) / base_wall * 100:+.1f} % of wall) | "
              f"{res[mode][0][2] / 2**20:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
