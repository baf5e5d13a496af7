"""Write a run's results: Parquet tables, TREC runs, run.json, report; release gates.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.budget.base import Budget
from bench.capacity.base import CapacityRun
from bench.chunking.stage import ChunkReport
from bench.config.schema import GateConfig
from bench.config.toplevel import check_gates_matched
from bench.cost.outputs import query_cost_of
from bench.cost.prices import (
    CostSummary,
    Prices,
    cost_summary,
)
from bench.data.base import Dataset
from bench.embedding.base import EmbeddingStats
from bench.embedding.stage import Embeddings
from bench.filters.entitlement import count_unauthorized
from bench.gates.junit import JUNIT_NAME, regression_cases, result_cases, write_junit
from bench.gates.regression import RegressionOutcome, evaluate
from bench.gates.release import (
    GateResult,
    completion_shares,
    config_has,
    evaluate_gates,
    stages_enabled,
)
from bench.generation.stage import ContextOp
from bench.judge.base import failure_mode, pair_failure_mode
from bench.metrics.decisions import DecisionRecord
from bench.metrics.stats import CompletionAccounting, PercentileCI, percentile_ci
from bench.pipeline.answers import answered
from bench.pipeline.e2e import (
    STAGE_SUM_SOURCE,
    WHOLE_REQUEST_SOURCE,
    e2e_timings,
    end_to_end_ms,
)
from bench.pipeline.executor import Executor
from bench.pipeline.latency import PERCENTILES, LatencyEstimate, LatencyRun, LatencySettings
from bench.pipeline.outcome import ConfigRun, Executed, RunResult
from bench.pipeline.outputs import RowInput
from bench.pipeline.plan import ConfigKind, Plan
from bench.pipeline.probe import probe_json, work_saved
from bench.pipeline.stages import STAGES, config_columns, config_gate_metrics, declared
from bench.precision import precision_json
from bench.report.base import ConfigReport
from bench.report.inrun import CAPACITY_SECTION, run_report, write_sections
from bench.report.markdown import capacity_section
from bench.results import schema
from bench.results.mteb import write_mteb_json
from bench.results.records import (
    Accounting,
    Comparison,
    ConfigRow,
    FilterDecisionRecord,
    FilterQueryRow,
    PerQueryRow,
    SummaryRow,
)
from bench.results.scores import ConfigScores
from bench.results.write import git_sha, package_versions, write_json, write_records
from bench.retrieval.base import Hits
from bench.rewrite.decide import RewriteReport
from bench.telemetry.base import (
    RecordingTelemetry,
    StageTiming,
    Telemetry,
    peak_vram,
    stage_records,
)
from bench.telemetry.basic import peak_rss_bytes

if TYPE_CHECKING:
    from bench.pipeline.probe_stages import PlannedProbe

log = logging.getLogger("bench")


def check_gates(gates: Sequence[GateConfig], rows: list[SummaryRow], pruned: set[str],
                config_rows: list[ConfigRow] | None = None, *,
                has: Mapping[str, frozenset[str]] | None = None,
                accounting: Mapping[tuple[str, str], Accounting] | None = None,
                notes: Mapping[tuple[str, str], str] | None = None) -> list[str]:
    """Failed gates over the configs that ran (a pruned config is reported as pruned, not
    gated), each with its value, bound and margin (``bench.gates.release``). Summary gates
    read summary rows (per scope); config gates (``config_gate_metrics()``) read the
    configs.parquet row of each config that has the metric (``has``: metric -> config ids;
    None: every config)."""
    return [g.line for g in gate_results(gates, rows, pruned, config_rows, has=has,
                                         accounting=accounting, notes=notes) if not g.passed]


def gate_results(gates: Sequence[GateConfig], rows: list[SummaryRow], pruned: set[str],
                 config_rows: list[ConfigRow] | None = None, *,
                 has: Mapping[str, frozenset[str]] | None = None,
                 accounting: Mapping[tuple[str, str], Accounting] | None = None,
                 notes: Mapping[tuple[str, str], str] | None = None) -> list[GateResult]:
    """Every gate on every config it reads, passed or not (check_gates: the failed ones)."""
    check_gates_matched(gates, [(r.metric, r.scope) for r in rows])
    configs = list(config_rows or [])
    if not configs:  # summary gates alone (callers without config rows)
        configs = [_bare_row(cid) for cid in dict.fromkeys(r.config_id for r in rows)]
    configs = [c if c.config_id not in pruned else replace(c, status="pruned")
               for c in configs]
    if has is None:
        ids = frozenset(c.config_id for c in configs)
        has = {m: ids for m in config_gate_metrics()}
    return evaluate_gates(gates, rows, configs, has=has, accounting=accounting or {},
                          notes=notes or {})


def _bare_row(config_id: str) -> ConfigRow:
    return ConfigRow.of({c.name: 0 if c.type == "int64" and not c.nullable else None
                         for _, c in config_columns()} | {
        "config_id": config_id, "label": "", "kind": "", "params_json": "{}", "status": "ok"})


def telemetry_json(telemetry: Telemetry) -> dict[str, Any]:
    """run.json's ``telemetry`` (sampler state and one record per stage) when the telemetry
    has a manifest (``bench.telemetry.sampler``)."""
    return ({"telemetry": telemetry.manifest()} if isinstance(telemetry, RecordingTelemetry)
            else {})


def budget_json(done: Executed, run_dir: Path) -> dict[str, Any] | None:
    """run.json's ``budget``: the budget, each config's probe, and the work pruning saved
    (the chain's; and the stage probes', from ``budget_probes.json``, written before)."""
    from bench.budget.stages import StageBudget
    from bench.pipeline.probe_stages import PROBES_FILE

    if done.probe is None or done.probe.budget is None:
        return None
    b = done.probe.budget
    out = {"budget": type(b).__name__, "settings": dict(vars(b)),
           "sample_query_ids": list(done.probe.sample_query_ids),
           "probes": probe_json(done.probe),
           "work_saved": work_saved(done.plan, done.executor, done.probe,
                                    len(done.dataset.queries))}
    stages = run_dir / PROBES_FILE
    if isinstance(b, StageBudget) and stages.is_file():
        doc = json.loads(stages.read_text())
        out["stage_probes"] = {k: doc.get(k) for k in (
            "configs_pruned", "seconds_saved_predicted", "seconds_saved_by_kind",
            "probe_cost_s", "wrong_prunes", "stated")}
    return out


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


def e2e_columns(e2e: list[float], measured: LatencyEstimate | None,
                settings: LatencySettings, source: str = STAGE_SUM_SOURCE) -> dict[str, Any]:
    """configs.parquet's e2e figures: the interleaved pass's where it timed the config, else
    ``e2e`` (per-query sums, described by ``source``); each percentile with its bootstrap CI
    over the requests it rests on."""
    pcts: Sequence[PercentileCI]
    if measured is not None:
        pcts, n, warm, source = ((measured.p50, measured.p95, measured.p99), measured.n,
                                 measured.n_warmup, measured.source)
    elif e2e:
        pcts = tuple(percentile_ci(np.asarray(e2e), q, resamples=settings.resamples,
                                   seed=settings.seed, confidence=settings.confidence)
                     for q in PERCENTILES)
        n, warm = len(e2e), None
    else:  # nothing timed (a pruned config)
        return {"n_e2e_samples": 0, "e2e_p50_ms": None, "e2e_p95_ms": None,
                "e2e_p99_ms": None}
    out: dict[str, Any] = {"n_e2e_samples": n, "n_latency_warmup": warm,
                           "latency_source": source}
    for name, p in zip(("p50", "p95", "p99"), pcts, strict=True):
        out |= {f"e2e_{name}_ms": p.value, f"e2e_{name}_ci_low": p.ci_low,
                f"e2e_{name}_ci_high": p.ci_high}
    return out


def completion_columns(s: ConfigScores) -> dict[str, object]:
    """configs.parquet's completion columns from a config's per-metric accounting."""
    shares = completion_shares({m: s.accounting(m) for m in s.values})
    out: dict[str, object] = {name: v for name, (v, _) in shares.items()}
    if "incomplete_share" in shares:
        out["incomplete_metric"] = shares["incomplete_share"][1]
    return out


def core_columns(row: RowInput) -> dict[str, Any]:
    """The core's configs.parquet columns of one config (``bench.pipeline.outputs.CORE``):
    identity, status, end-to-end latency along the chain, entitlement, peak VRAM and
    completion."""
    c, done = row.run, row.done
    spec = c.spec
    settings = done.settings.latency
    stages = done.e2e_stages(spec)
    e2e = end_to_end_ms(e2e_timings(c.timings, done.query_time_stages() or stages), stages)
    # the interleaved pass times retrieval chains; a generated config's whole request
    # (chain + context + generation) comes from its own request samples
    generated = spec.kind is ConfigKind.GENERATED
    measured = None if generated else row.latency.estimates.get(spec.config_id)
    out: dict[str, Any] = {
        "config_id": spec.config_id, "label": spec.label, "kind": spec.kind,
        "params_json": json.dumps(dict(spec.params), sort_keys=True, default=str),
        "parent_config_id": spec.parent_id,
        "status": "pruned" if c.pool is None else "failed" if c.failed_reason else "ok",
        "pruned_reason": c.pruned_reason,
        **e2e_columns(e2e, measured, settings,
                      WHOLE_REQUEST_SOURCE if generated else STAGE_SUM_SOURCE),
        "unauthorized_hits": 0 if c.pool is None
        else count_unauthorized(c.pool.hits, done.dataset)}
    probe = done.probe
    p = None if probe is None else probe.configs.get(spec.config_id)
    if p is not None and p.peak_vram_bytes is not None:
        out.update(peak_vram_bytes=p.peak_vram_bytes,
                   peak_vram_measure=f"{p.vram_measure} (probe)")
    else:
        chain = {n.stage for n in spec.chain}
        peak = peak_vram(r for r in stage_records(done.telemetry) if r.stage in chain)
        if peak is not None:
            out.update(peak_vram_bytes=peak[0], peak_vram_measure=f"{peak[1]} (chain stages)")
    if c.pool is not None:
        out.update(completion_columns(row.scores))
    return out


def config_row(row: RowInput) -> ConfigRow:
    """One config's configs.parquet row: the core's columns, then each stage's declared
    fill in stage-list order (a fill may read the columns filled before it); a column
    nobody filled is None (0 for a count that may not be null)."""
    values: dict[str, Any] = core_columns(row)
    for _, outputs in declared():
        values.update(outputs.filled(row, values))
    for _, col in config_columns():
        if col.name not in values and col.name not in ("schema_version", "run_id"):
            values[col.name] = None if col.nullable else 0
    return ConfigRow.of(values)


def filter_query_rows(c: ConfigRun, dataset: Dataset) -> list[FilterQueryRow]:
    """filters.parquet rows of one config: per query, the predicate applied, what it
    excluded and the unauthorized docs in the filter's output (none when the config has no
    filter or was pruned; a reranked config repeats its filtered pool's rows)."""
    o = c.filter_outcome
    if o is None or c.pool is None:
        return []
    bad = o.unauthorized_per_query
    return [FilterQueryRow(c.spec.config_id, q.query_id, o.predicates[i],
                           int(o.gold_per_query[i]), int(o.excluded_per_query[i]),
                           int(o.pool_excluded_per_query[i]),
                           None if o.gold_per_query[i] == 0
                           else bool(o.excluded_per_query[i] == o.gold_per_query[i]),
                           int(bad[i]))
            for i, q in enumerate(dataset.queries)]


def judgement_rows(done: Executed) -> list[dict[str, Any]]:
    """judgements.parquet: every verdict of every generated config with its failure mode and
    rationale (``bench.judge.base.failure_mode``); pairwise verdicts of a candidate too."""
    rows: list[dict[str, Any]] = []
    for c in done.configs:
        if c.spec.kind is not ConfigKind.GENERATED or c.pool is None:
            continue
        a = answered(c.spec, done.executor)
        for v in a.verdicts:
            mode, why = failure_mode(v)
            rows.append({"config_id": c.spec.config_id, "query_id": v.query_id,
                         "judge": v.judge, "status": v.status, "failure_mode": mode,
                         "rationale": why, "attempts": v.attempts})
        if a.pairs is not None:
            for role, verdicts in (("pairwise", a.pairs.primary),
                                   ("pairwise:cross", a.pairs.cross)):
                for pv in verdicts:
                    mode, why = pair_failure_mode(pv)
                    rows.append({"config_id": c.spec.config_id, "query_id": pv.query_id,
                                 "judge": role, "status": pv.status, "failure_mode": mode,
                                 "rationale": why,
                                 "attempts": sum(x.attempts for x in pv.calls)})
    return rows


def per_query_rows(s: ConfigScores) -> list[PerQueryRow]:
    rows = []
    for metric, vals in s.values.items():
        for qid, cat, v, st, exp in zip(s.query_ids, s.categories, vals, s.statuses[metric],
                                        s.expects(metric), strict=True):
            if not exp:  # not expected here (an answer metric outside the answered subset)
                continue
            rows.append(PerQueryRow(s.config_id, qid, cat, metric,
                                    None if np.isnan(v) else float(v), st))
    return rows


def completion(s: ConfigScores, metric: str) -> CompletionAccounting:
    a = s.accounting(metric)
    return CompletionAccounting(a.n_expected, a.n_scored, a.n_missing, a.n_timeout,
                                a.n_invalid, a.n_no_claims, a.n_pruned)


def write_results(done: Executed, run_dir: Path, comparisons: list[Comparison],
                  decisions: list[FilterDecisionRecord], t_start: float,
                  capacity: CapacityRun | None = None,
                  registered: Sequence[DecisionRecord] = (),
                  latency: LatencyRun | None = None,
                  rewrite: RewriteReport | None = None) -> RunResult:
    settings, run_id, dataset = done.settings, done.run_id, done.dataset
    summary_rows = [r for s in done.scores for r in s.summary]
    per_query: list[PerQueryRow] = []
    timing_rows: list[tuple[str, StageTiming]] = []
    config_rows: list[ConfigRow] = []
    reports: list[ConfigReport] = []
    primary = settings.primary_metric
    filter_rows: list[FilterQueryRow] = []
    prices = done.comps.get("cost")
    costs: list[CostSummary] = []
    for c, s in zip(done.configs, done.scores, strict=True):
        if isinstance(prices, Prices) and c.pool is not None:
            costs.append(cost_summary(c.spec.config_id, c.spec.label,
                                      query_cost_of(c, done, prices)))
        per_query += per_query_rows(s)
        filter_rows += filter_query_rows(c, dataset)
        timing_rows += [(c.spec.config_id, t) for t in c.timings]
        row = config_row(RowInput(c, s, done, latency or LatencyRun({}, [])))
        config_rows.append(row)
        if c.pool is not None:
            write_trec_run(run_dir / f"run.{c.spec.config_id}.trec", dataset, c.pool.hits,
                           tag=c.spec.config_id)
        reports.append(ConfigReport(c.spec.config_id, c.spec.label, dict(c.spec.params),
                                    completion(s, primary), s.summary, c.timings,
                                    c.pruned_reason, row, s, failed_reason=c.failed_reason))
    summary_acc = {(s.config_id, m): s.accounting(m) for s in done.scores for m in s.values}
    results = gate_results(settings.gates, summary_rows,
                           {c.spec.config_id for c in done.configs if c.pool is None},
                           config_rows, has=gate_configs(done), accounting=summary_acc,
                           notes=gate_notes(config_rows))
    failed = [g.line for g in results if not g.passed]
    for g in results:
        if g.passed:
            log.info("gate passed: %s", g.line)
        else:
            log.error("gate failed: %s", g.line)
    write_records(per_query, schema.PER_QUERY, run_dir / "per_query.parquet", run_id)
    write_records([{"config_id": cid, **asdict(t)} for cid, t in timing_rows], schema.TIMINGS,
                  run_dir / "timings.parquet", run_id)
    write_records([{**asdict(r), **summary_acc[(r.config_id, r.metric)].columns()}
                   for r in summary_rows], schema.SUMMARY, run_dir / "summary.parquet", run_id)
    write_records([r.columns() for r in config_rows], schema.CONFIGS,
                  run_dir / "configs.parquet", run_id)
    # written with no filter too (empty), like comparisons.parquet: readers find every table
    write_records(filter_rows, schema.FILTER_QUERIES, run_dir / "filters.parquet", run_id)
    write_records(comparisons, schema.COMPARISONS, run_dir / "comparisons.parquet", run_id)
    if latency is not None and latency.requests:
        write_records([{"config_id": r.config_id, "query_id": r.query_id, "round": r.round,
                        "position": r.position, "warmup": r.warmup, "e2e_ms": r.e2e_ms,
                        "stage_ms_json": json.dumps(dict(r.stage_ms))}
                       for r in latency.requests], schema.LATENCY,
                      run_dir / "latency.parquet", run_id)
    write_records(judgement_rows(done), schema.JUDGEMENTS, run_dir / "judgements.parquet",
                  run_id)
    regression = regression_gates(done, run_dir, config_rows, results)
    if regression is not None:
        for f in regression.failure_lines():
            log.error("gate failed: %s", f)
        failed += regression.failure_lines()
    # stages' own tables and sections (Stage.writer), after the run's tables
    stage_reports = [sr for st in STAGES
                     if (sr := st.write(done, run_dir, comparisons,
                                        latency or LatencyRun({}, []))) is not None]
    write_sections(run_dir, [(sr.name, sr.markdown) for sr in stage_reports]
                   + ([] if capacity is None
                      else [(CAPACITY_SECTION, tuple(capacity_section(capacity)))]))
    ex = done.executor
    cache_hits = {done.plan.node_name(r.node): r.hit for r in ex.resolutions if r.node.cached}
    chunk_report: ChunkReport = ex.value(done.plan.chunk_stats)
    embed_failed = ex.failure(done.plan.embed_docs)  # a remote embedder that failed
    # a corpus pass every config's budget pruned is not computed just for these stats
    embed_run = (any(r.node.key == done.plan.embed_docs.key for r in ex.resolutions)
                 or ex.is_cached(done.plan.embed_docs))
    embed: Embeddings = (ex.value(done.plan.embed_docs) if embed_failed is None and embed_run
                         else Embeddings(np.zeros((0, 0), np.float32),
                                         EmbeddingStats(0, 0, 0.0, 0)))
    index_res = next((r for r in ex.resolutions if r.node.key == done.plan.index.key), None)
    embed_hit = next((r.hit for r in ex.resolutions if r.node.key == done.plan.embed_docs.key),
                     True)
    n_chunks = chunk_report.stats.n_chunks
    wall_s = time.perf_counter() - t_start
    stats = embed.stats
    if stats.n_truncated:
        log.warning("%d of %d passages are longer than the embedder's maximum length and were "
                    "truncated: text past it is not embedded (chunker %s)", stats.n_truncated,
                    stats.n_texts, settings.chunker)
    mteb_files = write_mteb_files(run_dir, dataset, summary_rows, reports, wall_s)
    write_json(run_dir / "run.json", {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": run_id,
        "experiment": settings.experiment,
        "config": dict(settings.resolved),
        "git_sha": git_sha(Path(__file__).resolve().parent),
        "packages": package_versions(),
        "device": done.device,
        "dataset": {"name": dataset.name, "fingerprint": dataset.fingerprint,
                    "corpus_fingerprint": dataset.corpus.fingerprint,
                    "documents": len(dataset.documents), "queries": len(dataset.queries),
                    "chunks": n_chunks, "dropped_queries": dataset.n_dropped_queries,
                    "dropped_reason": dataset.dropped_reason},
        "seeds": {"seed": settings.seed, "bootstrap": settings.seed},
        "plan": done.plan.to_json(ex.is_cached),
        "cache": {"dir": str(ex.store.root), "hits": cache_hits,
                  "events": [e.__dict__ for e in ex.store.events]},
        "embedding": {"texts_per_s": stats.texts_per_s, "tokens_per_s": stats.tokens_per_s,
                      "truncated_chunks": stats.n_truncated, "chunks_embedded": stats.n_texts,
                      "measured_by_this_run": not embed_hit,
                      # the pass also filled this artifact (bench.embedding.shared): its
                      # throughput is the shared pass's; null for a pass of its own
                      "shared_pass_with": stats.shared_with,
                      # what the embedder's maximum length cut off, counted (chunk_sweep's
                      # 1024-token chunks on a 512-position model)
                      "max_tokens": stats.max_tokens,
                      "truncated_tokens": stats.n_truncated_tokens,
                      "truncation": stats.truncation()},
        # the compute precision that ran (embedder.precision=auto resolves per machine)
        "precision": {"embedder": precision_json(done.comps.embedder),
                      "reranker": precision_json(done.comps.reranker)},
        "mteb_results": mteb_files,
        "index": None if index_res is None else index_res.value.info.__dict__,
        "chunks": chunk_report.to_json(),
        "configs": {r.config_id: {"label": r.label, "params": r.query_params,
                                  "completion": r.accounting.__dict__,
                                  "pruned_reason": r.pruned_reason,
                                  "failed_reason": r.failed_reason,
                                  "trec_run": None if r.pruned_reason
                                  else f"run.{r.config_id}.trec"} for r in reports},
        # configs a served backend failed during work (the others completed): exit code 5
        "failed_configs": [{"config_id": r.config_id, "label": r.label,
                            "reason": r.failed_reason} for r in reports if r.failed_reason],
        "resources": [s.__dict__ for s in done.telemetry.samples],
        **telemetry_json(done.telemetry),
        "budget": budget_json(done, run_dir),
        "peak_rss_bytes": peak_rss_bytes(),
        "filter_decisions": [asdict(d) for d in decisions],
        "preregistered_decisions": [asdict(d) for d in registered],
        "rewrite": None if rewrite is None else rewrite.to_json(),
        "generation": generation_json(done),
        "lost_in_middle": [asdict(p) for p in done.gold_probes.values()] or None,
        "failed_gates": failed,
        **data_selection_json(done),
        "regression_gates": None if regression is None else regression.to_json(),
        "gates": [asdict(g) for g in results],
        "cost": None if not isinstance(prices, Prices) else {
            "prices": prices.settings(), "configs": [asdict(x) for x in costs]},
        "wall_s": wall_s,
        "stages": {sr.name: {"tables": list(sr.tables), **sr.manifest} for sr in stage_reports},
        **({} if capacity is None else {"capacity": capacity.to_json()}),
    })
    if done.comps.reporter is not None:
        # report.md from the files just written (bench.report.inrun), never from memory
        done.comps.reporter.write(run_report(run_dir))
    log.info("run %s finished in %.1fs: %s", run_id, wall_s, run_dir)
    return RunResult(run_dir, run_id, 3 if failed else 0, tuple(summary_rows), cache_hits,
                     tuple(failed))


def regression_gates(done: Executed, run_dir: Path, config_rows: list[ConfigRow],
                     results: Sequence[GateResult]) -> RegressionOutcome | None:
    """The regression gates against ``gates_against`` (per_query.parquet and configs.parquet
    of this run must be written), and the JUnit XML of every gate (gates.junit.xml in the run
    dir, and ``gates_junit``) when the run has any."""
    s = done.settings
    outcome = None
    if s.regression is not None:
        sel = done.selection
        outcome = evaluate(s.regression, run_dir,
                           current_selection=(None, None) if sel is None
                           else (sel.split, sel.line()),
                           current_corpus=done.dataset.corpus.fingerprint)
        # a failure's table is a warning: it is what the user must read
        log.log(logging.WARNING if outcome.failed else logging.INFO, "regression gates:\n%s",
                outcome.table())
    cases = result_cases(results, [c for c in config_rows if c.status == "pruned"], s.gates)
    if outcome is not None:
        cases += regression_cases(outcome)
    if cases:
        if done.selection is not None:
            log.info("gates judged on %s", done.selection.line())
        split = None if done.selection is None else done.selection.split
        props = (("run_id", done.run_id), ("split", split or "none (every query)"))
        for path in (run_dir / JUNIT_NAME, *([Path(s.gates_junit).expanduser()]
                                             if s.gates_junit else [])):
            write_junit(path, cases, properties=props)
    return outcome


def data_selection_json(done: Executed) -> dict[str, Any]:
    """run.json's ``queries_selected`` (split, subset) and ``contamination``."""
    return {"queries_selected": None if done.selection is None else done.selection.to_json(),
            "contamination": None if done.contamination is None
            else done.contamination.to_json()}


def gate_configs(done: Executed) -> dict[str, frozenset[str]]:
    """Config metric -> ids of the configs whose rows hold it (``bench.gates.release``)."""
    enabled = stages_enabled(done.comps)
    return {m: frozenset(c.config_id for c in done.plan.configs if config_has(m, c, enabled))
            for m in config_gate_metrics()}


def gate_notes(config_rows: Sequence[ConfigRow]) -> dict[tuple[str, str], str]:
    """What a config value rests on, for gate lines: cost's unpriced parts, completion's
    worst metric."""
    out: dict[tuple[str, str], str] = {}
    for c in config_rows:
        if c.cost_unpriced:
            out[(c.config_id, "cost_per_query")] = f"not priced: {c.cost_unpriced}"
        if c.incomplete_metric:
            out[(c.config_id, "incomplete_share")] = f"worst metric {c.incomplete_metric}"
    return out


def write_mteb_files(run_dir: Path, dataset: Dataset, rows: list[SummaryRow],
                     reports: list[ConfigReport], wall_s: float) -> dict[str, str]:
    """``mteb.<config_id>.json`` (MTEB's results layout) for each config that scored nDCG@10,
    MTEB's main retrieval score; config_id -> file name. The task is the dataset's name, the
    split the BEIR split when the name carries one (``beir:NAME:SPLIT``), else ``test``."""
    parts = dataset.name.split(":")
    split = parts[2] if parts[0] == "beir" and len(parts) == 3 else "test"
    out: dict[str, str] = {}
    for r in reports:
        agg = {x.metric: x.mean for x in rows if x.config_id == r.config_id
               and x.scope == "all" and x.mean is not None}
        if r.pruned_reason is not None or "ndcg@10" not in agg:
            continue
        name = f"mteb.{r.config_id}.json"
        write_mteb_json(run_dir / name, task=dataset.name, split=split,
                        aggregate=agg, evaluation_time_s=wall_s)
        out[r.config_id] = name
    return out


def write_plan(the_plan: Plan, executor: Executor, run_dir: Path,
               budget: Budget | None = None,
               scale: tuple[Sequence[str], Sequence[Mapping[str, object]]] = ((), ()),
               probes: tuple[Sequence[PlannedProbe], bool] = ((), False)) -> str:
    """plan.txt / plan.json of ``plan_only=true``: the graph, with per node whether the
    cache has it, its cost from the store's log and the budget ceilings that prune it;
    ``scale``: the scale planner's lines and entries (``bench.scaling.preview``), if any;
    ``probes``: the budget's probes before paying (``planned_probes``), if any."""
    from bench.pipeline.preview import preview, probe_lines

    view = preview(the_plan, executor.store, budget, executor.is_cached)
    seconds, known, unknown = view.to_compute(the_plan, executor.is_cached)
    header = (f"to compute: ~{seconds:.1f} s for the {known} uncached nodes of known cost"
              + (f", {unknown} of unknown cost" if unknown else "")
              + " (the store's last computations of each node's stage and options)",
              *scale[0])
    text = the_plan.render(executor.is_cached, view.notes, header)
    if probes[0]:
        text += "\n" + "\n".join(probe_lines(the_plan, *probes))
    (run_dir / "plan.txt").write_text(text + "\n")
    body = the_plan.to_json(executor.is_cached, view.fields)
    if scale[1]:  # only with scale_plan.profile: plan.json is unchanged without it
        body["scale_plan"] = list(scale[1])
    if probes[0]:  # only with budget=stages probes to make
        body["probes"] = [asdict(p) for p in probes[0]]
    write_json(run_dir / "plan.json", body)
    return text


def generation_json(done: Executed) -> dict[str, object] | None:
    """run.json ``generation``: the answered subset, sampling, and per generated config its
    latency, abstention and judge schema-validity figures (None for a retrieval-only run)."""
    if not done.generation:
        return None
    g = done.settings.generation
    # bench's own generated configs (a black-box system's answers have no prompt of ours:
    # it answers every query of the run, bench.system)
    ours = [c for c in done.plan.configs if c.kind is ConfigKind.GENERATED
            and c.answers is not None and isinstance(c.answers.input("contexts").op, ContextOp)]
    first = ours[0] if ours else next(c for c in done.plan.configs
                                      if c.kind is ConfigKind.GENERATED)
    assert first.answers is not None
    ctx = first.answers.input("contexts").op
    return {
        "max_queries": g.max_queries, "seed": g.seed,
        "queries": list(ctx.subset) if isinstance(ctx, ContextOp)
        else [q.query_id for q in done.dataset.queries],
        "sampling": dict(first.answers.op.params()["sampling"]) if ours else None,
        "configs": {cid: asdict(s) for cid, s in done.generation.items()},
        # the exact pool's generated config: every answer is paired against it (its id is
        # the same in every job of an ANN sweep; bench.report.sweep pairs across jobs on it)
        "exact_reference": first.config_id if g.exact_reference else None,
        "memo": g.memo,
    }
