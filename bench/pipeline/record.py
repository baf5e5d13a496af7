"""Write a run's results: Parquet tables, TREC runs, run.json, report; release gates.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from bench.data.base import Dataset
from bench.errors import BenchError
from bench.filters.base import FilterOutcome, eligible_gold
from bench.filters.entitlement import count_unauthorized
from bench.metrics.stats import CompletionAccounting
from bench.pipeline.context import RunContext, RunResult
from bench.pipeline.lanes import Ops, params_json
from bench.pipeline.scoring import Scored
from bench.pipeline.summarize import SummaryRow, accounting_columns
from bench.report.base import ConfigReport, RunReport
from bench.results import schema
from bench.results.write import git_sha, package_versions, write_json, write_table
from bench.retrieval.base import Hits
from bench.telemetry.basic import peak_rss_bytes

log = logging.getLogger("bench")



def check_gates(cfg: DictConfig, rows: list[SummaryRow]) -> list[str]:
    failed = []
    for gate in cfg.gates:
        for r in rows:
            if r.metric != gate.metric or r.scope != gate.scope:
                continue
            if r.mean is None:
                failed.append(f"{r.config_id} {gate.metric}[{gate.scope}]: no scored queries")
                continue
            lo = r.ci_low if gate.use_ci_bound else r.mean
            hi = r.ci_high if gate.use_ci_bound else r.mean
            if gate.min is not None and lo is not None and lo < gate.min:
                failed.append(f"{r.config_id} {gate.metric}[{gate.scope}] {lo:.4f} < {gate.min}")
            if gate.max is not None and hi is not None and hi > gate.max:
                failed.append(f"{r.config_id} {gate.metric}[{gate.scope}] {hi:.4f} > {gate.max}")
    return failed


def write_trec_run(path: Path, dataset: Dataset, hits: Hits, *, tag: str) -> None:
    """``qid Q0 docid rank score tag`` — checkable with trec_eval or bench.evaluate."""
    ids = dataset.doc_ids
    lines = []
    for qi, q in enumerate(dataset.queries):
        docs, scores = hits.for_query(qi)
        for r, (d, s) in enumerate(zip(docs, scores, strict=True), start=1):
            lines.append(f"{q.query_id} Q0 {ids[d]} {r} {float(s):.9g} {tag}\n")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(lines))
    tmp.replace(path)


def _exclusion(outcome: FilterOutcome | None) -> dict[str, float | None]:
    """False-exclusion rates of a filtered lane; None when no filter ran or the rate is
    undefined (no eligible gold: EmptyDenominatorError — reported as undefined, never 0)."""
    if outcome is None:
        return {"false_exclusion_rate": None, "doc_false_exclusion_rate": None}
    try:
        rates = outcome.exclusion_rates()
    except BenchError:
        return {"false_exclusion_rate": None, "doc_false_exclusion_rate": None}
    return {"false_exclusion_rate": rates.query_rate, "doc_false_exclusion_rate": rates.doc_rate}


def write_results(ctx: RunContext, dataset: Dataset, run_dir: Path, scored: list[Scored],
                  comparisons: list[dict[str, Any]], decisions: list[dict[str, Any]],
                  t_start: float) -> RunResult:
    cfg, run_id = ctx.cfg, ctx.run_id
    summary_rows = [r for s in scored for r in s.summary]
    failed = check_gates(cfg, summary_rows)
    per_query, timing_rows, config_rows, reports = [], [], [], []
    outcomes = ctx.filter_outcomes
    for s in scored:
        lane = s.lane
        missing = set(s.missing)
        for metric, vals in s.values.items():
            for qid, cat, v in zip(s.query_ids, s.categories, vals, strict=True):
                per_query.append({"run_id": run_id, "config_id": lane.config_id,
                                  "query_id": qid, "category": cat, "metric": metric,
                                  "value": float(v),
                                  "status": "missing_run" if qid in missing else "scored"})
        timing_rows += [{"run_id": run_id, "config_id": lane.config_id, **t.__dict__}
                        for t in lane.timings]
        outcome = outcomes.get(lane.config_id)
        config_rows.append({
            "run_id": run_id, "config_id": lane.config_id, "label": lane.label,
            "kind": lane.kind, "params_json": params_json(lane.params), "pruned_reason": None,
            **lane.ops.__dict__, "unauthorized_hits": count_unauthorized(lane.hits, dataset),
            "filter_removed": None if outcome is None else outcome.removed,
            **_exclusion(outcome),
        })
        run_path = run_dir / f"run.{lane.config_id}.trec"
        write_trec_run(run_path, dataset, lane.hits, tag=lane.config_id)
        reports.append(ConfigReport(lane.config_id, lane.label, dict(lane.params), s.accounting,
                                    s.summary, lane.timings, None, config_rows[-1]))
    n_expected = sum(1 for gold in eligible_gold(dataset).values()
                     if any(g >= cfg.metrics.relevance_level for g in gold.values()))
    for cid, label, reason, qp in ctx.pruned:
        acc = CompletionAccounting(n_expected, 0, 0, 0, 0, 0, n_expected)
        row = {"run_id": run_id, "config_id": cid, "label": label, "kind": "dense",
               "params_json": params_json(qp), "pruned_reason": reason, **Ops().__dict__,
               "unauthorized_hits": 0, "filter_removed": None, "false_exclusion_rate": None,
               "doc_false_exclusion_rate": None}
        config_rows.append(row)
        reports.append(ConfigReport(cid, label, qp, acc, (), tuple(ctx.base_timings), reason,
                                    row))
    acc_by_cid = {c.config_id: accounting_columns(c.accounting) for c in reports}
    write_table(per_query, schema.PER_QUERY, run_dir / "per_query.parquet")
    write_table(timing_rows, schema.TIMINGS, run_dir / "timings.parquet")
    write_table([{"run_id": run_id, **r.__dict__, **acc_by_cid[r.config_id]}
                 for r in summary_rows], schema.SUMMARY, run_dir / "summary.parquet")
    write_table(config_rows, schema.CONFIGS, run_dir / "configs.parquet")
    write_table([{"run_id": run_id, **c} for c in comparisons], schema.COMPARISONS,
                run_dir / "comparisons.parquet")
    cache_hits = {name: n.hit for name, n in ctx.nodes.items()}
    wall_s = time.perf_counter() - t_start
    stats = ctx.embedding_stats
    write_json(run_dir / "run.json", {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": run_id,
        "experiment": cfg.experiment_name,
        "config": OmegaConf.to_container(cfg, resolve=True),
        "git_sha": git_sha(Path(__file__).resolve().parent),
        "packages": package_versions(),
        "device": ctx.device,
        "dataset": {"name": dataset.name, "fingerprint": dataset.fingerprint,
                    "documents": len(dataset.documents), "queries": len(dataset.queries),
                    "chunks": ctx.n_chunks},
        "seeds": {"seed": cfg.seed, "bootstrap": cfg.seed},
        "cache": {"dir": str(ctx.store.root), "hits": cache_hits,
                  "events": [e.__dict__ for e in ctx.store.events]},
        "embedding": None if stats is None else {
            "texts_per_s": stats.texts_per_s, "tokens_per_s": stats.tokens_per_s,
            "truncated_chunks": stats.n_truncated, "measured_by_this_run":
                not cache_hits.get("embed_docs", True)},
        "index": None if ctx.build_info is None else ctx.build_info.__dict__,
        "chunks": ctx.chunk_report,
        "configs": {r.config_id: {"label": r.label, "params": r.query_params,
                                  "completion": r.accounting.__dict__,
                                  "pruned_reason": r.pruned_reason,
                                  "trec_run": None if r.pruned_reason
                                  else f"run.{r.config_id}.trec"} for r in reports},
        "resources": [s.__dict__ for s in ctx.telemetry.samples],
        "peak_rss_bytes": peak_rss_bytes(),
        "filter_decisions": decisions,
        "failed_gates": failed,
        "wall_s": wall_s,
    })
    if ctx.comps.reporter is not None:
        ctx.comps.reporter.write(RunReport(
            run_id=run_id, run_dir=run_dir, experiment=str(cfg.experiment_name),
            device=ctx.device, dataset_name=dataset.name,
            dataset_fingerprint=dataset.fingerprint, n_documents=len(dataset.documents),
            n_queries=len(dataset.queries), n_without_relevant=len(dataset.queries) - n_expected,
            n_chunks=ctx.n_chunks,
            configs=tuple(reports), comparisons=tuple(comparisons),
            decisions=tuple(decisions), cache_hits=cache_hits,
            filters_enabled=ctx.comps.filters is not None, chunk_report=ctx.chunk_report,
            failed_gates=tuple(failed), wall_s=wall_s, resources=tuple(ctx.telemetry.samples)))
    log.info("run %s finished in %.1fs: %s", run_id, wall_s, run_dir)
    return RunResult(run_dir, run_id, 3 if failed else 0, tuple(summary_rows), cache_hits,
                     tuple(failed))
