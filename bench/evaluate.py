"""``python -m bench.evaluate QRELS RUN [-m METRIC ...]``: trec_eval-compatible evaluation.

Per-query values equal pytrec_eval's; aggregates follow /work/shared/METRICS.md (mean over
queries with >= 1 relevant doc, missing runs scored as empty rankings and counted). Input
errors print ``file:line: what is wrong`` and exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bench.errors import InputError
from bench.metrics.base import DuplicateDocError, Evaluation
from bench.metrics.cli import OneLineParser, UsageError, format_table, run_cli
from bench.metrics.engine import evaluate
from bench.metrics.registry import parse_metric
from bench.metrics.trec_io import locate_duplicate, read_qrels, read_run

DEFAULT_METRICS = ("ndcg@10", "recall@100", "map", "mrr", "precision@10")


def _parser() -> OneLineParser:
    p = OneLineParser(prog="python -m bench.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("qrels", type=Path, help="TREC qrels (qid 0 docid rel) or BEIR TSV")
    p.add_argument("run", type=Path, help="TREC run (qid Q0 docid rank score tag)")
    p.add_argument("-m", "--metric", action="extend", nargs="+", default=None,
                   help=f"metric names (default: {' '.join(DEFAULT_METRICS)})")
    p.add_argument("--per-query", action="store_true", help="also show per-query values")
    p.add_argument("--relevance-level", type=int, default=1,
                   help="minimum grade that counts as relevant (default 1)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    return p


def report(ev: Evaluation, *, per_query: bool) -> dict[str, object]:
    """The JSON object of an evaluation (aggregate, optional per_query, counts)."""
    out: dict[str, object] = {"aggregate": ev.aggregate()}
    if per_query:
        out["per_query"] = ev.per_query()
    out["num_queries"] = ev.num_queries
    out["missing_runs"] = len(ev.missing_runs)
    out["queries_without_relevant"] = len(ev.queries_without_relevant)
    return out


def _table(ev: Evaluation, per_query: bool) -> str:
    agg = ev.aggregate()
    parts = [format_table(["metric", "value"], [[m, v] for m, v in agg.items()])]
    parts.append(
        f"num_queries {ev.num_queries}  missing_runs {len(ev.missing_runs)}  "
        f"queries_without_relevant {len(ev.queries_without_relevant)}"
    )
    if per_query:
        names = list(ev.values)
        rows = [[q, *[float(ev.values[m][i]) for m in names]] for i, q in enumerate(ev.query_ids)]
        parts.append(format_table(["query_id", *names], rows))
    return "\n\n".join(parts)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    names = [parse_metric(m).name for m in (args.metric or DEFAULT_METRICS)]
    if args.relevance_level < 1:
        raise UsageError("--relevance-level must be >= 1 (trec_eval's convention)")
    qrels = read_qrels(args.qrels)
    run = read_run(args.run)
    try:
        ev = evaluate(qrels, run, names, relevance_level=args.relevance_level,
                      device=args.device)
    except DuplicateDocError as err:
        path = args.run if err.source == "run" else args.qrels
        raise locate_duplicate(path, "run" if err.source == "run" else "qrels") or InputError(
            path, 0, str(err)) from None
    if ev.num_queries == 0:
        raise InputError(args.qrels, 0, f"no query has a doc with grade >= "
                                        f"{args.relevance_level}: nothing to average")
    if args.format == "json":
        print(json.dumps(report(ev, per_query=args.per_query), indent=2))
    else:
        print(_table(ev, args.per_query))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0, or 2 on any input or usage error)."""
    return run_cli(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
