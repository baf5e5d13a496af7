"""``python -m bench.evaluate QRELS RUN [-m METRIC ...]``: trec_eval-compatible evaluation.

Per-query values equal trec_eval's / pytrec_eval's. Metric names are ours (``ndcg@10``) or
trec_eval's (``ndcg_cut.10``, ``P_5``, ``P.5,10,20``). Which queries a mean is taken over is
``--averaging`` (docs/metrics.md), named in every output: ``bench`` (qrels queries with
>= 1 relevant doc; a query without a run scores 0 and is counted), ``trec_eval`` (trec_eval's
default: queries in both files, all-non-relevant ones scoring 0), ``trec_eval_c`` (``-c``:
every qrels query). Input errors print ``file:line: what is wrong`` and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.docs import EVALUATE, METRICS
from bench.errors import InputError
from bench.metrics.base import DuplicateDocError, Evaluation
from bench.metrics.cli import OneLineParser, UsageError, format_table, run_cli
from bench.metrics.engine import AVERAGING, Averaging, evaluate
from bench.metrics.registry import MetricSpec, help_lines, parse_metrics
from bench.metrics.trec_io import locate_duplicate, read_qrels, read_run, run_tag

DEFAULT_METRICS = ("ndcg@10", "recall@100", "map", "mrr", "precision@10")

AVERAGING_HELP = {
    "bench": "qrels queries with >= 1 relevant doc; a query without a run scores 0 "
             "(counted as missing_runs); all-non-relevant queries left out (counted)",
    "trec_eval": "trec_eval's default: queries in both qrels and run; a query whose "
                 "judgments are all non-relevant scores 0 and is averaged in",
    "trec_eval_c": "trec_eval -c: every qrels query; one without a run scores 0",
}


def _epilog() -> str:
    rows = help_lines()
    width = max(len(names) for names, _ in rows)
    lines = ["metrics (ours or trec_eval's names; K >= 1; comma form P.5,10,20 or "
             "ndcg@5,10):"]
    lines += [f"  {names.ljust(width)}  {desc}" for names, desc in rows]
    lines.append("")
    lines.append("averaging (--averaging; the output names the one used):")
    lines += [f"  {name.ljust(12)} {text}" for name, text in AVERAGING_HELP.items()]
    lines.append("")
    lines.append("Input as trec_eval reads it: columns split on any whitespace, blank lines "
                 "and lines starting with # skipped, run columns after the sixth ignored.")
    lines.append("")
    lines.append(EVALUATE.help_line())
    lines.append(METRICS.help_line())  # the definitions and averaging modes
    return "\n".join(lines)


def _parser() -> OneLineParser:
    p = OneLineParser(prog="python -m bench.evaluate", description=__doc__.splitlines()[0],
                      epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("qrels", type=Path, help="TREC qrels (qid 0 docid rel) or BEIR TSV")
    p.add_argument("run", type=Path, help="TREC run (qid Q0 docid rank score tag)")
    p.add_argument("-m", "--metric", action="extend", nargs="+", default=None,
                   help=f"metric names (default: {' '.join(DEFAULT_METRICS)})")
    p.add_argument("-q", "--per-query", action="store_true", help="also show per-query values")
    p.add_argument("-l", "--relevance-level", type=int, default=1,
                   help="minimum grade that counts as relevant (default 1)")
    p.add_argument("-M", "--max-docs", type=int, default=None,
                   help="score only each query's first N docs (trec_eval order), as -M")
    p.add_argument("--averaging", choices=AVERAGING, default=None,
                   help="which queries a mean is over (default: bench; trec_eval with "
                        "--format trec_eval)")
    p.add_argument("-c", dest="complete", action="store_true",
                   help="trec_eval's -c: same as --averaging trec_eval_c")
    p.add_argument("--format", choices=("table", "json", "trec_eval"), default="table",
                   help="trec_eval: its three columns (measure, qid|all, value)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    return p


def report(ev: Evaluation, *, per_query: bool) -> dict[str, object]:
    """The JSON object of an evaluation (averaging, aggregate, optional per_query, counts)."""
    out: dict[str, object] = {"averaging": ev.averaging, "aggregate": ev.aggregate()}
    if per_query:
        out["per_query"] = ev.per_query()
    out["num_queries"] = ev.num_queries
    out["missing_runs"] = len(ev.missing_runs)
    out["queries_without_relevant"] = len(ev.queries_without_relevant)
    return out


def _table(ev: Evaluation, per_query: bool) -> str:
    agg = ev.aggregate()
    parts = [f"averaging: {ev.averaging} ({AVERAGING_HELP[ev.averaging]})",
             format_table(["metric", "value"], [[m, v] for m, v in agg.items()])]
    parts.append(
        f"num_queries {ev.num_queries}  missing_runs {len(ev.missing_runs)}  "
        f"queries_without_relevant {len(ev.queries_without_relevant)}"
    )
    if per_query:
        names = list(ev.values)
        rows = [[q, *[float(ev.values[m][i]) for m in names]] for i, q in enumerate(ev.query_ids)]
        parts.append(format_table(["query_id", *names], rows))
    return "\n\n".join(parts)


def trec_eval_lines(ev: Evaluation, specs: Sequence[MetricSpec], *, per_query: bool,
                    run_id: str | None = None) -> list[str]:
    """trec_eval's output lines (``%-22s\\t%s\\t%.4f``): per query (sorted by id, as trec_eval
    sorts) when asked, then ``runid``, ``num_q`` and each metric over ``all``."""
    lines = []
    if per_query:
        for i in sorted(range(len(ev.query_ids)), key=lambda j: ev.query_ids[j].encode()):
            lines += [f"{s.trec_name:<22}\t{ev.query_ids[i]}\t{ev.values[s.name][i]:.4f}"
                      for s in specs]
    if run_id is not None:
        lines.append(f"{'runid':<22}\tall\t{run_id}")
    lines.append(f"{'num_q':<22}\tall\t{ev.num_queries}")
    agg = ev.aggregate()
    lines += [f"{s.trec_name:<22}\tall\t{agg[s.name]:.4f}" for s in specs]
    return lines


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    specs: dict[str, MetricSpec] = {}
    for name in args.metric or DEFAULT_METRICS:
        for spec in parse_metrics(name, ranking_only=True):
            specs.setdefault(spec.name, spec)
    if args.relevance_level < 1:
        raise UsageError("--relevance-level must be >= 1 (trec_eval's convention)")
    if args.max_docs is not None and args.max_docs < 1:
        raise UsageError("-M/--max-docs must be >= 1")
    if args.complete and args.averaging not in (None, "trec_eval_c"):
        raise UsageError(f"-c contradicts --averaging {args.averaging}")
    averaging: Averaging = ("trec_eval_c" if args.complete else args.averaging
                            or ("trec_eval" if args.format == "trec_eval" else "bench"))
    qrels = read_qrels(args.qrels)
    run = read_run(args.run)
    try:
        ev = evaluate(qrels, run, list(specs), relevance_level=args.relevance_level,
                      device=args.device, averaging=averaging, max_docs=args.max_docs)
    except DuplicateDocError as err:
        path = args.run if err.source == "run" else args.qrels
        raise locate_duplicate(path, "run" if err.source == "run" else "qrels") or InputError(
            path, 0, str(err)) from None
    if ev.num_queries == 0:
        what = (f"no query has a doc with grade >= {args.relevance_level}"
                if averaging == "bench" else "no qrels query is in the run")
        raise InputError(args.qrels, 0, f"{what}: nothing to average ({averaging} averaging)")
    if args.format == "json":
        print(json.dumps(report(ev, per_query=args.per_query), indent=2))
    elif args.format == "trec_eval":
        print("\n".join(trec_eval_lines(ev, list(specs.values()), per_query=args.per_query,
                                        run_id=run_tag(args.run))))
    else:
        print(_table(ev, args.per_query))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0, or 2 on any input or usage error)."""
    return run_cli(_main, argv)


def _exit_now(code: int) -> None:
    """Flush the output and end the process without the interpreter's teardown.

    A one-shot CLI: finalising the modules and freeing the run's arrays piece by piece (numba's
    and LLVM's finalizers among them) took ~0.4 s of a 100k-query evaluation; the OS reclaims
    the memory at once. Nothing is left to write: the output is flushed here (a closed pipe
    exits 120, as Python's own exit would).
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        os._exit(120)
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
