"""Run one experiment config: build components, resolve cached nodes, score, report, gate.

``run(cfg, run_dir) -> RunResult`` is the whole pipeline; ``bench/__main__.py`` only wires
Hydra to it. One run evaluates several configs ("lanes") on the same queries: each query-time
setting of the index, the lexical lane, each fusion variant. They are compared pairwise with
the first lane as baseline.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from bench.budget.base import Budget, BudgetDecision, ProbeMeasurement
from bench.cache.store import ArtifactStore
from bench.chunking.base import Chunker
from bench.config.build import build
from bench.data.base import Dataset, DatasetSource
from bench.embedding.base import Embedder, EmbeddingStats
from bench.errors import BenchError, ConfigError
from bench.filters.base import FilterOutcome, ResultFilter, eligible_gold
from bench.filters.entitlement import count_unauthorized
from bench.filters.hard_vs_soft import HardVsSoft
from bench.fusion.base import Fusion
from bench.index.base import BuildInfo, BuiltIndex, SearchResult, VectorIndex
from bench.lexical.base import LexicalIndex
from bench.metrics.engine import Qrels
from bench.metrics.registry import parse_metric
from bench.metrics.stats import CompletionAccounting
from bench.pipeline import stages
from bench.pipeline.device import resolve_device
from bench.pipeline.lanes import Lane, Ops, config_id, label_of, ops_from, params_json
from bench.pipeline.scoring import Scored, compare, score_lane
from bench.pipeline.summarize import SummaryRow, accounting_columns
from bench.report.base import ConfigReport, Reporter, RunReport
from bench.results import schema
from bench.results.write import git_sha, package_versions, write_json, write_table
from bench.retrieval.base import Hits, Retriever, order_key
from bench.telemetry.base import StageTiming, Telemetry, TimingLog
from bench.telemetry.basic import BasicTelemetry, peak_rss_bytes

log = logging.getLogger("bench")

#: groups whose stages this pipeline does not run yet; they must be `none`
DISABLED_ONLY = ("reranker", "generator", "judge")
#: groups that shape the candidates, hashed into every config_id
PIPELINE_GROUPS = ("dataset", "chunker", "embedder", "index", "retriever", "lexical",
                   "fusion", "filters", "reranker", "generator", "judge")
#: ANN recall is reported at these cutoffs (chunk level, vs the exact flat search)
ANN_RECALL_K = (10, 100)


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    run_id: str
    exit_code: int
    summary: tuple[SummaryRow, ...]
    cache_hits: dict[str, bool] = field(default_factory=dict)
    failed_gates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Components:
    source: DatasetSource
    chunker: Chunker
    embedder: Embedder
    index: VectorIndex
    retriever: Retriever
    lexical: LexicalIndex | None
    fusion: Fusion | None
    filters: ResultFilter | HardVsSoft | None
    budget: Budget | None
    reporter: Reporter | None


def build_components(cfg: DictConfig, device: str) -> Components:
    for group in DISABLED_ONLY:
        if build(cfg[group], group) is not None:
            raise ConfigError(group, "this stage is not part of the pipeline yet; use `none`")
    required: dict[str, Any] = {
        "dataset": build(cfg.dataset, "dataset"),
        "chunker": build(cfg.chunker, "chunker"),
        "embedder": build(cfg.embedder, "embedder", device=device),
        "index": build(cfg.index, "index", device=device),
        "retriever": build(cfg.retriever, "retriever"),
    }
    for group, obj in required.items():
        if obj is None:
            raise ConfigError(group, "this stage is required; `_target_` must not be null")
    fusion = build(cfg.fusion, "fusion")
    lexical = build(cfg.lexical, "lexical")
    if fusion is not None and lexical is None:
        raise ConfigError("fusion", "fusing needs a lexical lane: set lexical=bm25")
    return Components(
        required["dataset"], required["chunker"], required["embedder"], required["index"],
        required["retriever"], lexical, fusion, build(cfg.filters, "filters"),
        build(cfg.budget, "budget"), build(cfg.report, "report"),
    )


def validate_top_level(cfg: DictConfig) -> None:
    m = cfg.metrics
    if not m.names:
        raise ConfigError("metrics.names", "must list at least one metric")
    for i, name in enumerate(m.names):
        try:
            parse_metric(name)
        except BenchError as exc:
            raise ConfigError(f"metrics.names[{i}]", exc.one_line()) from None
    if m.relevance_level < 1:
        raise ConfigError("metrics.relevance_level", f"must be >= 1, got {m.relevance_level}")
    if m.bootstrap_resamples < 100:
        raise ConfigError("metrics.bootstrap_resamples", "must be >= 100 (METRICS.md asks 1000)")
    if not 0.5 < m.confidence < 1.0:
        raise ConfigError("metrics.confidence", f"must be in (0.5, 1), got {m.confidence}")
    for i, gate in enumerate(cfg.gates):
        try:
            parse_metric(gate.metric)
        except BenchError as exc:
            raise ConfigError(f"gates[{i}].metric", exc.one_line()) from None
        if gate.min is None and gate.max is None:
            raise ConfigError(f"gates[{i}]", "needs min or max")


@dataclass
class _Ctx:
    """Mutable bookkeeping of one run (never crosses a stage boundary)."""

    cfg: DictConfig
    comps: Components
    store: ArtifactStore
    telemetry: Telemetry
    device: str
    run_id: str
    pipeline: dict[str, Any]
    nodes: dict[str, stages.Node] = field(default_factory=dict)
    base_timings: list[StageTiming] = field(default_factory=list)
    pruned: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    embedding_stats: EmbeddingStats | None = None
    build_info: BuildInfo | None = None
    n_chunks: int = 0
    filter_outcomes: dict[str, FilterOutcome] = field(default_factory=dict)
    #: lane label -> {"hard": config_id, "soft": config_id} when filters=hard_vs_soft
    filter_pairs: dict[str, dict[str, str]] = field(default_factory=dict)
    dataset_ref: Dataset | None = None
    chunk_report: dict[str, Any] = field(default_factory=dict)


def run(cfg: DictConfig, run_dir: Path) -> RunResult:
    t_start = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    validate_top_level(cfg)
    device = resolve_device(cfg.device)
    comps = build_components(cfg, device)
    telemetry: Telemetry = build(cfg.telemetry, "telemetry") or BasicTelemetry()
    ctx = _Ctx(cfg, comps, ArtifactStore(Path(cfg.cache_dir).expanduser()), telemetry, device,
               f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}",
               {g: OmegaConf.to_container(cfg[g], resolve=True) for g in PIPELINE_GROUPS})
    log.info("run %s on device=%s, cache %s", ctx.run_id, device, ctx.store.root)

    with telemetry.watch("data"):
        t0 = time.perf_counter()
        dataset = comps.source.load()
        data_ms = (time.perf_counter() - t0) * 1000.0
    log.info("stage %-10s loaded %s: %d documents, %d queries in %.2fs (fingerprint %s)",
             "data", dataset.name, len(dataset.documents), len(dataset.queries),
             data_ms / 1000, dataset.fingerprint[:12])
    ctx.base_timings.append(StageTiming("data", "total", len(dataset.documents), data_ms, "cpu"))

    ctx.dataset_ref = dataset
    lanes = produce_lanes(ctx, dataset)
    lanes = apply_filters(ctx, dataset, lanes)
    m = cfg.metrics
    qrels = Qrels.from_mapping(eligible_gold(dataset))
    scored: list[Scored] = []
    for lane in lanes:
        with telemetry.watch("metrics"):
            t0 = time.perf_counter()
            s = score_lane(lane, dataset, qrels, list(m.names),
                           relevance_level=m.relevance_level,
                           category_weights=dict(m.category_weights),
                           resamples=m.bootstrap_resamples, confidence=m.confidence,
                           seed=cfg.seed)
            ms = (time.perf_counter() - t0) * 1000.0
        log.info("stage %-10s %s %s: %d queries scored in %.0f ms", "metrics", lane.config_id,
                 lane.label, len(s.query_ids), ms)
        scored.append(replace(s, lane=replace(lane, timings=(
            *lane.timings, StageTiming("metrics", "total", len(s.query_ids), ms, "cpu")))))
    comparisons = compare(scored, [*m.names, *(k for k in (scored[0].values if scored else {})
                                               if k not in m.names)],
                          resamples=m.bootstrap_resamples, confidence=m.confidence,
                          seed=cfg.seed)
    decisions = filter_decisions(ctx, scored)
    return write_results(ctx, dataset, run_dir, scored, comparisons, decisions, t_start)


def produce_lanes(ctx: _Ctx, dataset: Dataset) -> list[Lane]:
    comps, store, device, tel = ctx.comps, ctx.store, ctx.device, ctx.telemetry
    with tel.watch("chunk"):
        chunks, n_chunk = stages.chunk_node(store, dataset, comps.chunker, comps.embedder, device)
    with tel.watch("chunk_stats"):
        ctx.chunk_report, n_cs = stages.chunk_stats_node(store, dataset, chunks, n_chunk.key)
    with tel.watch("embed_docs"):
        doc_vecs, doc_stats, n_emb = stages.embed_node(
            store, "embed_docs", chunks.text, "document", comps.embedder, n_chunk.key, device)
    with tel.watch("embed_queries"):
        q_vecs, _, n_qemb = stages.embed_node(
            store, "embed_queries", [q.text for q in dataset.queries], "query", comps.embedder,
            dataset.fingerprint, device)
    with tel.watch("index"):
        built, info, n_idx = stages.index_node(store, comps.index, doc_vecs, n_emb.key, device)
    ctx.nodes.update({"chunk": n_chunk, "chunk_stats": n_cs, "embed_docs": n_emb,
                      "embed_queries": n_qemb, "index": n_idx})
    ctx.embedding_stats, ctx.n_chunks, ctx.build_info = doc_stats, len(chunks), info
    shared = [t for n in ctx.nodes.values() for t in n.timings]
    id_key = order_key(dataset.doc_ids)
    exact: SearchResult | None = None
    if not comps.index.exact:
        with tel.watch("exact_topk"):
            exact, n_ex = stages.exact_node(store, doc_vecs, q_vecs,
                                            min(stages.ANN_COLUMNS, len(chunks)),
                                            [n_emb.key, n_qemb.key], device)
        ctx.nodes["exact_topk"] = n_ex
    lanes: list[Lane] = []
    for qp in comps.index.query_params():
        label = label_of("dense", qp)
        cid = config_id(ctx.pipeline, label)
        if comps.budget is not None:
            decision = probe(comps, built, info.index_bytes, q_vecs, qp, len(chunks), device)
            log.info("budget %s %s: %s — %s", cid, label,
                     "keep" if decision.keep else "PRUNED", decision.reason)
            if not decision.keep:
                ctx.pruned.append((cid, label, decision.reason, dict(qp)))
                continue
        with tel.watch("retrieve"):
            hits, chunk_res, n_ret = stages.retrieve_node(
                store, comps.retriever, built, qp, q_vecs, chunks, id_key,
                [n_idx.key, n_qemb.key, n_chunk.key], device)
        ctx.nodes[f"retrieve[{label}]"] = n_ret
        extra = {}
        if exact is not None:
            extra = ann_recall(chunk_res, exact, doc_vecs, q_vecs)
        ops = replace(ops_from(n_ret.timings, "retrieve"), build_s=info.build_s,
                      index_bytes=info.index_bytes)
        lanes.append(Lane(cid, label, "dense", dict(qp), hits,
                          (*ctx.base_timings, *shared, *n_ret.timings), ops, extra))
    if comps.lexical is not None:
        with tel.watch("lexical"):
            sparse, n_lb, n_ls = stages.lexical_nodes(
                store, comps.lexical, chunks, n_chunk.key, [q.text for q in dataset.queries],
                id_key, dataset.fingerprint)
        ctx.nodes.update({"lexical_index": n_lb, "lexical": n_ls})
        label = "bm25"
        lanes.append(Lane(config_id(ctx.pipeline, label), label, "lexical",
                          dict(comps.lexical.cache_params()), sparse,
                          (*ctx.base_timings, n_chunk.timings[0], *n_lb.timings, *n_ls.timings),
                          ops_from(n_ls.timings, "lexical")))
        if comps.fusion is not None:
            lanes += fused_lanes(ctx, lanes, sparse, id_key)
    if not lanes:
        log.warning("every config was pruned by the budget")
    return lanes


def fused_lanes(ctx: _Ctx, lanes: list[Lane], sparse: Hits, id_key: np.ndarray) -> list[Lane]:
    assert ctx.comps.fusion is not None
    dense = next((lane for lane in lanes if lane.kind == "dense"), None)
    if dense is None:
        return []
    out = []
    for variant in ctx.comps.fusion.variants():
        log_ = TimingLog("fusion")
        with log_.measure("total", dense.hits.n_queries):
            fused = ctx.comps.fusion.fuse(dense.hits, sparse, variant, id_key=id_key,
                                          k=ctx.comps.retriever.k)
        label = variant.name
        log.info("stage %-10s %s in %.0f ms", "fusion", label, log_.samples[0].wall_ms)
        out.append(Lane(config_id(ctx.pipeline, label), label, "fused", dict(variant.params),
                        fused, (*dense.timings, *log_.samples), Ops()))
    return out


def ann_recall(chunk_res: SearchResult, exact: SearchResult, doc_vecs: np.ndarray,
               q_vecs: np.ndarray) -> dict[str, np.ndarray]:
    """Tie-tolerant ANN recall@k per query, on EXACT scores of the returned chunks (ANN
    scores of quantised indexes are approximate)."""
    from bench.index.exact import ann_recall_at_k

    ids = chunk_res.ids
    safe = np.where(ids >= 0, ids, 0)
    vecs = np.asarray(doc_vecs)
    exact_scores = np.einsum("qd,qkd->qk", np.asarray(q_vecs), vecs[safe]).astype(np.float32)
    exact_scores[ids < 0] = -np.inf
    ann = SearchResult(ids=ids, scores=exact_scores)
    out = {}
    for k in ANN_RECALL_K:
        if k <= min(ids.shape[1], exact.ids.shape[1]):
            out[f"ann_recall@{k}"] = ann_recall_at_k(ann, exact, k)
    return out


def apply_filters(ctx: _Ctx, dataset: Dataset, lanes: list[Lane]) -> list[Lane]:
    """Apply the configured filter(s) to every lane. A ``HardVsSoft`` set turns each lane into
    one config per mode (``<lane>|hard``, ``<lane>|soft``)."""
    f = ctx.comps.filters
    if f is None:
        return lanes
    members = f.members() if isinstance(f, HardVsSoft) else [("", f)]
    id_key = order_key(dataset.doc_ids)
    out = []
    for lane in lanes:
        for name, flt in members:
            t0 = time.perf_counter()
            outcome = flt.apply(lane.hits, dataset, id_key=id_key,
                                relevance_level=ctx.cfg.metrics.relevance_level)
            ms = (time.perf_counter() - t0) * 1000.0
            label = f"{lane.label}|{name}" if name else lane.label
            cid = config_id(ctx.pipeline, label)
            ctx.filter_outcomes[cid] = outcome
            if name:
                ctx.filter_pairs.setdefault(lane.label, {})[name] = cid
            log.info("stage %-10s %s: removed %d candidates, unauthorized hits %d (%.0f ms)",
                     "filters", label, outcome.removed, outcome.unauthorized_hits, ms)
            out.append(replace(lane, config_id=cid, label=label, hits=outcome.hits, timings=(
                *lane.timings, StageTiming("filters", "total", lane.hits.n_queries, ms, "cpu"))))
    return out


def filter_decisions(ctx: _Ctx, scored: list[Scored]) -> list[dict[str, Any]]:
    """The pre-registered hard-vs-soft rule for every lane run both ways."""
    f = ctx.comps.filters
    if not isinstance(f, HardVsSoft):
        return []
    by_id = {s.lane.config_id: s for s in scored}
    out: list[dict[str, Any]] = []
    assert ctx.dataset_ref is not None
    quality = f.hard.predicate_quality(ctx.dataset_ref,
                                       relevance_level=ctx.cfg.metrics.relevance_level)
    log.info("filters predicate precision %s recall %s (%d extracted, %d labelled)",
             quality.precision, quality.recall, quality.n_extracted, quality.n_labelled)
    for base, pair in ctx.filter_pairs.items():
        hard, soft = by_id.get(pair.get("hard", "")), by_id.get(pair.get("soft", ""))
        if hard is None or soft is None:
            continue
        pm, rm = f.precision_metric, f.recall_metric
        if pm not in hard.values or rm not in hard.values:
            raise ConfigError("filters.precision_metric",
                              f"{pm} and {rm} must be in metrics.names")
        try:
            rate = ctx.filter_outcomes[hard.lane.config_id].exclusion_rates().query_rate
        except BenchError as exc:
            out.append({"lane": base, "error": exc.one_line()})
            continue
        d = f.hard.decide(hard.values[pm], soft.values[pm], exclusion_rate=rate,
                          recall_hard=float(np.mean(hard.values[rm])),
                          recall_soft=float(np.mean(soft.values[rm])), seed=ctx.cfg.seed,
                          resamples=ctx.cfg.metrics.bootstrap_resamples)
        out.append({"lane": base, **d.__dict__, "predicate_precision": quality.precision,
                    "predicate_recall": quality.recall,
                    "predicates_extracted": quality.n_extracted,
                    "predicates_labelled": quality.n_labelled})
        log.info("filters decision for %s: %s %s", base, d.choice.upper(),
                 "; ".join(d.reasons) or "(every condition met)")
    return out


def probe(comps: Components, built: BuiltIndex, index_bytes: int, q_vecs: np.ndarray,
          qp: dict[str, Any], n_chunks: int, device: str) -> BudgetDecision:
    """Time single queries on a deterministic sample; ask the budget whether to go on."""
    assert comps.budget is not None
    n = min(comps.budget.probe_queries, len(q_vecs))
    sample = np.linspace(0, len(q_vecs) - 1, n).astype(int)
    log_ = TimingLog("probe", device=device)
    depth = comps.retriever.depth(n_chunks)
    for i in sample:
        with log_.measure("query", 1, sync_cuda=device == "cuda"):
            built.search(np.asarray(q_vecs[i : i + 1]), depth, qp)
    return comps.budget.check(ProbeMeasurement(
        stage="retrieve", n_queries=n, query_latency_ms=tuple(s.wall_ms for s in log_.samples),
        index_bytes=index_bytes, peak_rss_bytes=peak_rss_bytes(), peak_vram_bytes=None))


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


def write_results(ctx: _Ctx, dataset: Dataset, run_dir: Path, scored: list[Scored],
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
