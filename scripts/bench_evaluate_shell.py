"""End to end from a shell: ``python -m bench.evaluate`` vs a pytrec_eval script, interleaved.

Each timing is one fresh process (interpreter start, imports, kernel loading from numba's
cache, reading both files, evaluating, printing), as a user runs it. Both compute the same five
measures (nDCG@10, Recall@100, MAP, MRR, P@10) over the same TREC files (written by
``bench_metrics.make_data``: N queries x D docs, ties common, graded qrels). Runs alternate
(bench, pytrec_eval, bench, ...) so drift in machine load hits both; the table gives medians.
``--also TREE``: time another checkout's ``bench.evaluate`` too (e.g. main, to see a change).
Not a test: ``python scripts/bench_evaluate_shell.py [--queries 100000] [--reps 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTREC_SCRIPT = '''
import sys, pytrec_eval
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
measures = {"ndcg_cut.10", "recall.100", "map", "recip_rank", "P.10"}
res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
for m in ("ndcg_cut_10", "recall_100", "map", "recip_rank", "P_10"):
    print(m, sum(v[m] for v in res.values()) / len(res))
'''


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{tree / 'kernels'}"
    return env


def _time(cmd: list[str], env: dict[str, str]) -> float:
    # run from the checkout the PYTHONPATH names: ``-m`` puts the working folder first
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                   cwd=env["PYTHONPATH"].split(os.pathsep)[0])
    return time.perf_counter() - t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--docs", type=int, default=100)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=Path, help="reuse (or create) the files in this folder")
    p.add_argument("--also", type=Path, action="append", default=[],
                   help="another checkout whose bench.evaluate is timed too")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_metrics import make_data

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or Path(tmp)
        data.mkdir(parents=True, exist_ok=True)
        if not (data / "run.txt").exists():
            make_data(args.queries, args.docs, args.seed, data)
        script = Path(tmp) / "pytrec_script.py"
        script.write_text(PYTREC_SCRIPT)
        files = [str(data / "qrels.txt"), str(data / "run.txt")]
        metrics = ["-m", "ndcg@10", "recall@100", "map", "mrr", "precision@10"]
        contenders = {"bench.evaluate": ([sys.executable, "-m", "bench.evaluate", *files,
                                          *metrics], _env(ROOT))}
        for tree in args.also:
            contenders[f"bench.evaluate ({tree})"] = (
                [sys.executable, "-m", "bench.evaluate", *files, *metrics], _env(tree))
        contenders["pytrec_eval script"] = ([sys.executable, str(script), *files], _env(ROOT))
        for cmd, env in contenders.values():  # once untimed: page cache, numba cache
            _time(cmd, env)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.reps):
            for name, (cmd, env) in contenders.items():
                times[name].append(_time(cmd, env))
    ref = statistics.median(times["pytrec_eval script"])
    print(f"{args.queries} queries x {args.docs} docs, {args.reps} interleaved reps, one fresh "
          f"process each (medians); load average at the end: {os.getloadavg()[0]:.1f}")
    print("| command | median s | min s | pytrec_eval script / this |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.2f} | {min(ts):.2f} | {ref / med:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
