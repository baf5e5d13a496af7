"""Does pruning before paying pay? ``+experiment=budget_sweep`` three ways, in one process
tree, each on its own cold cache, one after another (run it under the CPU lock):

A. pruned: the experiment as shipped (``budget=stages``);
B. unpruned: the same sweep with the experiment's ceilings lifted;
C. validation: ``budget.validate=true`` on B's cache (the pruned configs' nodes are B's: their
   measured figures are B's computations; the probes are measured afresh).

Prints (and writes ``OUT/budget_sweep.md``): configs planned / pruned / run, A's probe cost vs
the work it saved (B's wall minus A's wall without its probes), the validation table per probe
kind (prediction errors, bounds missed, pruned configs that would have passed), the
per-query identity of every surviving config of A against B (by config id), and the quality
vs latency front of A against B's (nDCG@10 vs end-to-end p95 across every job's configs).

    flock /tmp/bench-cpu.lock python scripts/bench_budget_sweep.py OUT [hydra overrides...]
    python scripts/bench_budget_sweep.py OUT --reuse   # the tables again from OUT's sweeps
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq


def sweep(out: Path, name: str, extra: list[str]) -> tuple[float, list[Path]]:
    d = out / name
    cmd = [sys.executable, "-m", "bench", "+experiment=budget_sweep",
           f"cache_dir={out / ('cache_' + ('B' if name == 'C' else name))}",
           f"hydra.sweep.dir={d}", "report.plot=false", *extra]
    t0 = time.perf_counter()
    with (out / f"{name}.log").open("w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    if rc not in (0, 3):
        raise SystemExit(f"sweep {name} exited {rc}: see {out / (name + '.log')}")
    return wall, _jobs(d)


def _jobs(d: Path) -> list[Path]:
    return sorted((p for p in d.iterdir() if (p / "run.json").is_file()),
                  key=lambda p: int(p.name))


def configs(jobs: list[Path]) -> list[dict]:
    return [{**r, "job": j.name} for j in jobs
            for r in pq.read_table(j / "configs.parquet").to_pylist()]


def per_query(jobs: list[Path]) -> dict[tuple[str, str], dict[tuple[str, str], float]]:
    out: dict[tuple[str, str], dict[tuple[str, str], float]] = {}
    for j in jobs:
        for r in pq.read_table(j / "per_query.parquet",
                               columns=["config_id", "query_id", "metric", "value"]).to_pylist():
            out.setdefault((j.name, r["config_id"]), {})[(r["query_id"], r["metric"])] = \
                r["value"]
    return out


def probes(jobs: list[Path]) -> list[dict]:
    return [json.loads((j / "budget_probes.json").read_text()) for j in jobs
            if (j / "budget_probes.json").is_file()]


def front(jobs: list[Path], keep: set[tuple[str, str]] | None = None,
          metric: str = "ndcg@10") -> set[tuple[str, str]]:
    """(job, config id) of the configs on the sweep's front of ``metric`` (higher is better,
    mean over all queries) vs end-to-end p95 latency (lower is better), over the configs run
    (``keep``: only these)."""
    from bench.report.pareto import pareto_front

    quality = {(j.name, r["config_id"]): r["mean"] for j in jobs
               for r in pq.read_table(j / "summary.parquet").to_pylist()
               if r["scope"] == "all" and r["metric"] == metric and r["mean"] is not None}
    points = {}
    for j in jobs:
        for r in pq.read_table(j / "configs.parquet").to_pylist():
            k = (j.name, r["config_id"])
            if r["status"] != "pruned" and k in quality and r["e2e_p95_ms"] is not None \
                    and (keep is None or k in keep):
                points[k] = (quality[k], r["e2e_p95_ms"])
    keys = sorted(points)
    flags = pareto_front([points[k] for k in keys], [True, False])
    return {k for k, f in zip(keys, flags, strict=True) if f}


def report_front(jobs: list[Path], keep: set[tuple[str, str]] | None = None,
                 metric: str = "ndcg@10") -> dict[tuple[str, str], str]:
    """(job, config id) -> the merged report's verdict on the quality vs end-to-end p95
    front (as ``bench.report.views.front`` draws it: front / tied / dominated / pruned) over
    the configs run (``keep``: only these; the others count as pruned): a config off the
    point-estimate front is dominated only where that is resolved (the paired CI of the
    quality delta, or latency CIs that separate), else tied with the front."""
    from bench.report.load import load_runs
    from bench.report.pareto import FrontInput, quality_cost_front
    from bench.report.views import cost_axes, paired_quality

    merged = load_runs(jobs)
    axis = cost_axes()[0]  # p95 latency (end to end), with its CI
    by_key = {c.key: (c.run_dir.name, c.config_id) for c in merged.configs}
    inputs = []
    for c in merged.configs:
        row = c.mean(metric, "all")
        lo, hi = axis.ci(c) if axis.ci is not None else (None, None)
        inputs.append(FrontInput(
            c.key, None if row is None else row.mean, None if row is None else row.ci_low,
            None if row is None else row.ci_high, axis.value(c),
            pruned=not c.kept or (keep is not None and by_key[c.key] not in keep),
            cost_ci_low=lo, cost_ci_high=hi))
    points = quality_cost_front(inputs, higher_is_better=merged.higher_is_better(metric),
                                paired=paired_quality(merged, metric))
    return {by_key[p.key]: p.status for p in points}


def _equal(a: dict[tuple[str, str], float], b: dict[tuple[str, str], float]) -> bool:
    """Same keys, same values (NaN equal to NaN: an undefined metric on both sides)."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (a[k] is not None and b[k] is not None and np.isnan(a[k])
                         and np.isnan(b[k])) for k in a)


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    extra = sys.argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    walls = out / "walls.json"
    if extra[:1] == ["--reuse"]:  # the tables again from OUT's finished sweeps
        w = json.loads(walls.read_text())
        wall_a, wall_b, wall_c = w["A"], w["B"], w["C"]
        jobs_a, jobs_b, jobs_c = (_jobs(out / n) for n in "ABC")
    else:
        wall_a, jobs_a = sweep(out, "A", extra)
        # the experiment's ceilings lifted (budget=none would refuse its budget.* keys): no
        # ceiling, nothing probed, nothing pruned
        wall_b, jobs_b = sweep(out, "B", [*extra, "budget.max_embed_docs_s=null",
                                          "budget.max_stage_p95_ms={}"])
        wall_c, jobs_c = sweep(out, "C", [*extra, "budget.validate=true"])
        walls.write_text(json.dumps({"A": wall_a, "B": wall_b, "C": wall_c}))
    ca = configs(jobs_a)
    pruned = [c for c in ca if c["status"] == "pruned"]
    docs_a = probes(jobs_a)
    probe_cost = sum(d["probe_cost_s"] for d in docs_a)
    saved = wall_b - (wall_a - probe_cost)
    lines = ["| | value |", "|---|---:|",
             f"| jobs | {len(jobs_a)} |", f"| configs planned | {len(ca)} |",
             f"| configs pruned | {len(pruned)} |", f"| configs run | {len(ca) - len(pruned)} |",
             f"| wall, pruned sweep (A) | {wall_a:.1f} s |",
             f"| wall, unpruned sweep (B) | {wall_b:.1f} s |",
             f"| probe cost in A (sum of probing seconds) | {probe_cost:.1f} s |",
             f"| work saved = B - (A - probes) | {saved:.1f} s |",
             f"| probe cost / work saved | "
             f"{probe_cost / saved if saved > 0 else float('nan'):.2f} |",
             f"| wall, validation sweep (C, on B's cache) | {wall_c:.1f} s |", ""]
    rows = [r for d in probes(jobs_c) for r in d.get("validation", [])]
    kinds: dict[str, list[dict]] = {}
    for r in rows:
        kinds.setdefault(f"{r['kind']} {r['name']}", []).append(r)
    lines += ["| probe estimate | n | median abs rel error | bounds missed | pruned | "
              "wrong prunes |", "|---|---:|---:|---:|---:|---:|"]
    for k, rs in sorted(kinds.items()):
        errs = [abs(r["rel_error"]) for r in rs if r["rel_error"] is not None]
        lines.append(f"| {k} | {len(rs)} | "
                     f"{np.median(errs) if errs else float('nan'):.2f} | "
                     f"{sum(1 for r in rs if r['within_bounds'] is False)} | "
                     f"{sum(1 for r in rs if r['pruned'])} | "
                     f"{sum(1 for r in rs if r['wrong_prune'])} |")
    wrong = sum(1 for r in rows if r["wrong_prune"])
    lines += ["", f"pruned configs that would have passed (validation): **{wrong}**", ""]
    qa, qb = per_query(jobs_a), per_query(jobs_b)
    kept = [(c["job"], c["config_id"]) for c in ca if c["status"] != "pruned"]
    same = sum(1 for k in kept if k in qb and _equal(qa.get(k, {}), qb[k]))
    lines.append(f"per-query identity of surviving configs, A vs B (same job, same config "
                 f"id, every (query, metric) value equal): **{same} of {len(kept)}**")
    # the front of the pruned sweep vs the unpruned one's: equal once the configs the budget
    # pruned (they broke a ceiling) are taken off B's front; each side on its own measurements
    front_a, front_b = front(jobs_a), front(jobs_b)
    pruned_keys = {(c["job"], c["config_id"]) for c in pruned}
    lines += ["", f"front (nDCG@10 vs e2e p95): A {len(front_a)} configs, B {len(front_b)}, "
              f"of which pruned in A: {len(front_b & pruned_keys)}; A's front equals B's less "
              f"the pruned: **{front_a == front_b - pruned_keys}**",
              f"B's front over A's survivors only (B's measurements): "
              f"**{front(jobs_b, set(kept)) == front_a}**"]
    for k in sorted(front_a ^ (front_b - pruned_keys)):
        lines.append(f"- on one front only: job {k[0]} config {k[1]} "
                     f"({'A' if k in front_a else 'B'})")
    # the report's verdicts (front / tied: not shown worse beyond its CIs; dominated), which
    # is what a reader acts on: the survivors' verdicts in A against B's for the same configs
    va, vb = report_front(jobs_a), report_front(jobs_b, set(kept))
    both = [k for k in kept if k in va and k in vb]
    top = {"front", "tied"}
    moved = [k for k in both if (va[k] in top) != (vb[k] in top)]
    lines += [f"the report's verdicts (front or tied vs dominated; B over A's survivors, on "
              f"B's measurements) of the {len(both)} surviving configs, A vs B: "
              f"**{len(both) - len(moved)} of {len(both)} equal**; not dominated: A "
              f"{sum(va[k] in top for k in both)}, B {sum(vb[k] in top for k in both)}"]
    for k in moved:
        lines.append(f"- verdict moved: job {k[0]} config {k[1]}: A {va[k]}, B {vb[k]}")
    text = "\n".join(lines)
    print(text)
    (out / "budget_sweep.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
