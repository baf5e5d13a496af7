"""``python -m bench.compare RUN_DIR_A RUN_DIR_B``: paired comparison of two runs per query.

Reads each dir's ``per_query.parquet`` (bench/results/schema.py) as the pipeline's
``ConfigScores`` (bench.results.scores), pairs values on the queries both scored exactly as the
run's own comparisons do (bench.metrics.pairing, in A's query order), and for every shared
metric reports mean A, mean B, delta (B - A), the bootstrap CI of the delta, a sign-flip
randomization p-value and the Holm-adjusted p across metrics — overall and per category
(category taken from A).

``--equivalence MARGIN`` adds TOST (bench.metrics.stats.tost): the (1 - 2 alpha) t interval of
the delta and whether it lies inside +-MARGIN ("B is equivalent to A within MARGIN").

Two more modes read every config of run or multirun dirs (bench/compare/runs.py):
``--cheapest-equivalent --margin D --metric M ... DIR...``: the cheapest config (``--cost``, a
configs.parquet column) whose metrics are all TOST-equivalent to the best config's within D;
``--decide RUN_DIR``: the pre-registered ``decisions`` of the run's config (or ``--rules``),
bench.metrics.decisions. ``--gate RULES BASELINE CURRENT``: regression gates
(bench.gates.regression), exit 3 on a regression, ``--junit PATH`` for CI.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bench.docs import COMPARE
from bench.metrics.cli import OneLineParser, UsageError, format_table, run_cli
from bench.metrics.pairing import paired
from bench.metrics.registry import find_metric
from bench.metrics.stats import holm, paired_compare, tost
from bench.results.run_dir import load_side, valued_metrics
from bench.results.scores import ConfigScores


def compare(a: ConfigScores, b: ConfigScores, metrics: Sequence[str] | None, *, resamples: int,
            seed: int, margin: float | None = None, alpha: float = 0.05) -> dict[str, object]:
    """The comparison as a JSON-ready dict (see the module docstring); ``margin`` adds the
    TOST figures at ``alpha`` to every (metric, scope). Values pair as in the run's own
    comparisons (``bench.metrics.pairing.paired``: on the queries both scored, in A's order)."""
    in_b = set(valued_metrics(b))
    shared = [m for m in valued_metrics(a) if m in in_b]
    if metrics:
        absent = [m for m in metrics if m not in shared]
        if absent:
            raise UsageError(f"metrics {absent} are not in both runs; shared: {shared}")
        shared = list(dict.fromkeys(metrics))
    if not shared:
        raise UsageError("the two runs share no metric")
    overall: dict[str, dict[str, object]] = {}
    by_cat: dict[str, dict[str, dict[str, object]]] = {}
    for m in shared:
        va, vb, cats = paired(a, b, m)  # the one pairing rule
        only_a, only_b = int(a.valued(m).sum()) - va.size, int(b.valued(m).sum()) - vb.size
        spec = find_metric(m)
        base = {"higher_is_better": spec.higher_is_better if spec else None,
                "unpaired_a": only_a, "unpaired_b": only_b}
        overall[m] = {**base, **_stats(va, vb, resamples, seed, margin, alpha)}
        for c in dict.fromkeys(cats.tolist()):
            sel = cats == c
            by_cat.setdefault(c, {})[m] = _stats(va[sel], vb[sel], resamples, seed, margin,
                                                 alpha)
    _holm(overall)
    for scope in by_cat.values():
        _holm(scope)
    out: dict[str, object] = {"config_a": a.config_id, "config_b": b.config_id,
                              "resamples": resamples, "seed": seed}
    if margin is not None:
        out["equivalence"] = {"margin": margin, "alpha": alpha,
                              "interval": f"{100 * (1 - 2 * alpha):g} % t"}
    return {**out, "overall": overall, "per_category": by_cat}


def _stats(va: np.ndarray, vb: np.ndarray, resamples: int, seed: int,
           margin: float | None = None, alpha: float = 0.05) -> dict[str, object]:
    if va.size == 0:
        return {"n": 0}
    out = asdict(paired_compare(va, vb, resamples=resamples, seed=seed))
    if margin is not None:
        if va.size < 2:
            return {**out, "tost_p": None, "tost_ci_low": None, "tost_ci_high": None,
                    "equivalent": None}
        t = tost(va, vb, margin=margin, alpha=alpha)
        out |= {"tost_p": t.p_value, "tost_ci_low": t.ci_low, "tost_ci_high": t.ci_high,
                "equivalent": t.equivalent}
    return out


def _holm(scope: dict[str, dict[str, object]]) -> None:
    """Holm-adjust the p-values of one scope across its metrics (in place)."""
    tested = [m for m, s in scope.items() if "p_value" in s]
    for m, p in zip(tested, holm([float(scope[m]["p_value"]) for m in tested]), strict=True):  # type: ignore[arg-type]
        scope[m]["p_holm"] = p


def _table(result: dict[str, object]) -> str:
    header = ["scope", "metric", "n", "mean_a", "mean_b", "delta", "ci_low", "ci_high", "p",
              "p_holm"]
    eq = result.get("equivalence")
    if eq is not None:
        header += ["tost_ci_low", "tost_ci_high", "tost_p", "equivalent"]
    rows: list[list[object]] = []
    scopes = [("all", result["overall"])] + [
        (f"category:{c}", s) for c, s in result["per_category"].items()  # type: ignore[attr-defined]
    ]
    for scope, stats in scopes:
        for m, s in stats.items():  # type: ignore[attr-defined]
            row = [scope, m, s.get("n"), s.get("mean_a"), s.get("mean_b"), s.get("delta"),
                   s.get("ci_low"), s.get("ci_high"), s.get("p_value"), s.get("p_holm")]
            if eq is not None:
                verdict = s.get("equivalent")
                row += [s.get("tost_ci_low"), s.get("tost_ci_high"), s.get("tost_p"),
                        None if verdict is None else "yes" if verdict else "no"]
            rows.append(row)
    unpaired = [f"{m}: {s['unpaired_a']} only in A, {s['unpaired_b']} only in B"
                for m, s in result["overall"].items()  # type: ignore[attr-defined]
                if s["unpaired_a"] or s["unpaired_b"]]
    head = f"A = {result['config_a']}  B = {result['config_b']}  delta = B - A"
    if eq is not None:
        head += (f"\nequivalence (TOST): {eq['interval']} interval of the delta inside "  # type: ignore[index]
                 f"+-{eq['margin']} (alpha {eq['alpha']}, per metric and scope, "  # type: ignore[index]
                 "not multiplicity-adjusted: requiring ALL to hold needs no adjustment)")
    tail = "unpaired queries: " + ("; ".join(unpaired) if unpaired else "none")
    return "\n\n".join([head, format_table(header, rows), tail])


def _parser() -> OneLineParser:
    p = OneLineParser(prog="python -m bench.compare", description=__doc__.splitlines()[0],
                      epilog=COMPARE.help_line())
    p.add_argument("runs", type=Path, nargs="+",
                   help="RUN_A RUN_B; with --cheapest-equivalent run or multirun dirs; with "
                        "--decide one run dir")
    p.add_argument("--config-a", help="config id or label (configs.parquet) of run A")
    p.add_argument("--config-b", help="config id or label (configs.parquet) of run B")
    p.add_argument("--metric", action="extend", nargs="+", default=None)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--equivalence", type=float, default=None, metavar="MARGIN",
                   help="add TOST within +-MARGIN to the two-run comparison")
    p.add_argument("--alpha", type=float, default=0.05, help="TOST level (default 0.05)")
    p.add_argument("--cheapest-equivalent", action="store_true",
                   help="the cheapest config TOST-equivalent to the best (needs --margin, "
                        "--metric)")
    p.add_argument("--margin", type=float, default=None, help="equivalence margin (metric units)")
    p.add_argument("--cost", default="e2e_p95_ms",
                   help="configs.parquet column that prices a config, lower is cheaper "
                        "(default e2e_p95_ms; e.g. p95_ms, index_bytes, cost_per_query)")
    p.add_argument("--best", help="the reference config (key or label; default: the best mean "
                                  "on the first --metric)")
    p.add_argument("--scope", default="all", help="all | category:<name> (default all)")
    p.add_argument("--decide", action="store_true",
                   help="evaluate the run's pre-registered decisions (its config's 'decisions')")
    p.add_argument("--rules", type=Path, default=None,
                   help="with --decide: a YAML/JSON file whose 'decisions' list is evaluated "
                        "instead of the run's")
    p.add_argument("--power", type=float, default=0.8,
                   help="with --decide: power of the n needed by an inconclusive decision")
    p.add_argument("--gate", type=Path, default=None, metavar="RULES",
                   help="regression gates: BASELINE CURRENT judged by the YAML rules file's "
                        "'regression:' block (bench.gates.regression); exit 3 on a regression")
    p.add_argument("--junit", type=Path, default=None,
                   help="with --gate: write the gates' results as JUnit XML here")
    return p


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.resamples < 1:
        raise UsageError("--resamples must be >= 1")
    if not 0 < args.alpha < 0.5:
        raise UsageError(f"--alpha must be in (0, 0.5), got {args.alpha}")
    if args.gate is not None:
        from bench.gates.regression import gate_main

        return gate_main(args.runs, args.gate, resamples=args.resamples, seed=args.seed,
                         junit=args.junit, fmt=args.format)
    if args.cheapest_equivalent and args.decide:
        raise UsageError("--cheapest-equivalent and --decide are separate modes: choose one")
    if args.cheapest_equivalent or args.decide:
        from bench.compare import runs as compare_runs  # the multi-config modes read whole run dirs

        return (compare_runs.cheapest_main(args) if args.cheapest_equivalent
                else compare_runs.decide_main(args))
    if len(args.runs) != 2:
        raise UsageError(f"a comparison takes two run dirs (RUN_A RUN_B), got {len(args.runs)}")
    if args.equivalence is not None and not (math.isfinite(args.equivalence)
                                             and args.equivalence > 0):
        raise UsageError(f"--equivalence must be a margin > 0, got {args.equivalence}")
    a = load_side(args.runs[0], args.config_a, "--config-a")
    b = load_side(args.runs[1], args.config_b, "--config-b")
    result = compare(a, b, args.metric, resamples=args.resamples, seed=args.seed,
                     margin=args.equivalence, alpha=args.alpha)
    print(json.dumps(result, indent=2) if args.format == "json" else _table(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0, or 2 on any input or usage error)."""
    return run_cli(_main, argv)

