"""Run one experiment config: build components, resolve cached nodes, record, report, gate.

``run(cfg, run_dir) -> RunResult`` is the whole pipeline; ``bench/__main__.py`` only wires
Hydra to it. Each query-time setting of the index (``index.query_params``) is one config of
this run (``config_id``), evaluated on the same queries so configs compare pairwise.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from bench.budget.base import Budget, ProbeMeasurement
from bench.cache.store import ArtifactStore, canonical_json
from bench.chunking.base import Chunker
from bench.config.build import build
from bench.data.base import Dataset, DatasetSource
from bench.embedding.base import Embedder
from bench.errors import ConfigError
from bench.index.base import BuiltIndex, VectorIndex
from bench.metrics.engine import Evaluation, Qrels, Run, evaluate
from bench.metrics.registry import parse_metric
from bench.metrics.stats import CompletionAccounting
from bench.pipeline import stages
from bench.pipeline.device import resolve_device
from bench.pipeline.summarize import SummaryRow, accounting_columns, summarize
from bench.report.base import ConfigReport, Reporter, RunReport
from bench.results import schema
from bench.results.write import git_sha, package_versions, write_json, write_table
from bench.retrieval.base import Hits, order_key
from bench.retrieval.dense import DenseRetriever
from bench.telemetry.base import StageTiming, Telemetry, TimingLog
from bench.telemetry.basic import BasicTelemetry, peak_rss_bytes

log = logging.getLogger("bench")

#: groups whose stages this pipeline runs; others must be disabled (`none`) for now
DISABLED_ONLY = ("reranker", "generator", "judge")


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
    retriever: DenseRetriever
    budget: Budget | None
    reporter: Reporter | None


def build_components(cfg: DictConfig, device: str) -> Components:
    for group in DISABLED_ONLY:
        if build(cfg[group], group) is not None:
            raise ConfigError(group, "this stage is not part of the pipeline yet; use `none`")
    source = build(cfg.dataset, "dataset")
    chunker = build(cfg.chunker, "chunker")
    embedder = build(cfg.embedder, "embedder", device=device)
    index = build(cfg.index, "index", device=device)
    retriever = build(cfg.retriever, "retriever", DenseRetriever)
    budget = build(cfg.budget, "budget")
    reporter = build(cfg.report, "report")
    for group, obj in (("dataset", source), ("chunker", chunker), ("embedder", embedder),
                       ("index", index), ("retriever", retriever)):
        if obj is None:
            raise ConfigError(group, "this stage is required; `_target_` must not be null")
    return Components(source, chunker, embedder, index, retriever, budget, reporter)  # type: ignore[arg-type]


def validate_top_level(cfg: DictConfig) -> None:
    m = cfg.metrics
    for i, name in enumerate(m.names):
        try:
            parse_metric(name)
        except ValueError as exc:
            raise ConfigError(f"metrics.names[{i}]", str(exc)) from None
    if not m.names:
        raise ConfigError("metrics.names", "must list at least one metric")
    if m.relevance_level < 1:
        raise ConfigError("metrics.relevance_level", f"must be >= 1, got {m.relevance_level}")
    if m.bootstrap_resamples < 100:
        raise ConfigError("metrics.bootstrap_resamples", "must be >= 100 (METRICS.md asks 1000)")
    if not 0.5 < m.confidence < 1.0:
        raise ConfigError("metrics.confidence", f"must be in (0.5, 1), got {m.confidence}")
    for i, gate in enumerate(cfg.gates):
        try:
            parse_metric(gate.metric)
        except ValueError as exc:
            raise ConfigError(f"gates[{i}].metric", str(exc)) from None
        if gate.min is None and gate.max is None:
            raise ConfigError(f"gates[{i}]", "needs min or max")


def config_id_for(cfg: DictConfig, query_params: dict[str, Any]) -> str:
    """Stable short id of the pipeline config (all stage groups + this query setting)."""
    groups = {g: OmegaConf.to_container(cfg[g], resolve=True) for g in
              ("dataset", "chunker", "embedder", "index", "retriever", "reranker",
               "generator", "judge")}
    groups["index"] = {**groups["index"], "query_params": query_params}  # type: ignore[dict-item]
    return hashlib.sha256(canonical_json(groups).encode()).hexdigest()[:10]


def qrels_of(dataset: Dataset) -> Qrels:
    return Qrels.from_mapping({q.query_id: dict(q.qrels) for q in dataset.queries})


def run_of(dataset: Dataset, hits: Hits) -> Run:
    ids = np.asarray(dataset.doc_ids, dtype=object)
    return Run(
        query_ids=tuple(q.query_id for q in dataset.queries),
        offsets=hits.offsets,
        doc_ids=ids[hits.doc_idx],
        scores=hits.scores,
    )


def run(cfg: DictConfig, run_dir: Path) -> RunResult:
    t_start = time.perf_counter()
    validate_top_level(cfg)
    device = resolve_device(cfg.device)
    comps = build_components(cfg, device)
    store = ArtifactStore(Path(cfg.cache_dir).expanduser())
    telemetry: Telemetry = build(cfg.telemetry, "telemetry") or BasicTelemetry()
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    log.info("run %s on device=%s, cache %s", run_id, device, store.root)

    with telemetry.watch("data"):
        t0 = time.perf_counter()
        dataset = comps.source.load()
        data_s = time.perf_counter() - t0
    log.info("stage %-10s loaded %s: %d documents, %d queries in %.2fs (fingerprint %s)",
             "data", dataset.name, len(dataset.documents), len(dataset.queries), data_s,
             dataset.fingerprint[:12])
    timings: list[StageTiming] = [StageTiming("data", "total", len(dataset.documents),
                                              data_s * 1000.0, "cpu")]

    with telemetry.watch("chunk"):
        chunks, n_chunk = stages.chunk_node(store, dataset, comps.chunker, comps.embedder, device)
    with telemetry.watch("embed_docs"):
        doc_vecs, doc_stats, n_emb = stages.embed_node(
            store, "embed_docs", chunks.text, "document", comps.embedder, n_chunk.key, device)
    with telemetry.watch("embed_queries"):
        q_vecs, _, n_qemb = stages.embed_node(
            store, "embed_queries", [q.text for q in dataset.queries], "query", comps.embedder,
            dataset.fingerprint, device)
    with telemetry.watch("index"):
        built, build_info, n_idx = stages.index_node(store, comps.index, doc_vecs, n_emb.key,
                                                      device)
    nodes = {"chunk": n_chunk, "embed_docs": n_emb, "embed_queries": n_qemb, "index": n_idx}
    id_key = order_key(dataset.doc_ids)
    qrels = qrels_of(dataset)
    m = cfg.metrics

    configs: list[ConfigReport] = []
    per_query_rows: list[dict[str, Any]] = []
    summary_rows: list[SummaryRow] = []
    timing_rows: list[dict[str, Any]] = []
    run_files: dict[str, str] = {}
    for qp in comps.index.query_params():
        cid = config_id_for(cfg, qp)
        cfg_timings = list(timings) + [t for n in nodes.values() for t in n.timings]
        decision = None
        if comps.budget is not None:
            decision = probe(comps, built, build_info.index_bytes, q_vecs, qp, len(chunks),
                             device)
            log.info("budget %s: %s — %s", cid, "keep" if decision.keep else "PRUNED",
                     decision.reason)
        n_expected = sum(1 for q in dataset.queries
                         if any(g >= m.relevance_level for _, g in q.qrels))
        if decision is not None and not decision.keep:
            acc = CompletionAccounting(expected=n_expected, scored=0, missing=0, timeout=0,
                                       invalid=0, no_claims=0, pruned=n_expected)
            configs.append(ConfigReport(cid, dict(qp), acc, (), tuple(cfg_timings),
                                        decision.reason))
            timing_rows += _timing_rows(run_id, cid, cfg_timings)
            continue
        with telemetry.watch("retrieve"):
            hits, n_ret = stages.retrieve_node(
                store, comps.retriever, built, qp, q_vecs, chunks, id_key,
                [n_idx.key, n_qemb.key, n_chunk.key], device)
        nodes[f"retrieve[{cid}]"] = n_ret
        cfg_timings += list(n_ret.timings)
        with telemetry.watch("metrics"):
            t0 = time.perf_counter()
            ev = evaluate(qrels, run_of(dataset, hits), list(m.names),
                          relevance_level=m.relevance_level)
            eval_ms = (time.perf_counter() - t0) * 1000.0
        log.info("stage %-10s %s: %d queries scored in %.0f ms", "metrics", cid,
                 len(ev.query_ids), eval_ms)
        cfg_timings.append(StageTiming("metrics", "total", len(ev.query_ids), eval_ms, "cpu"))
        acc = CompletionAccounting(expected=len(ev.query_ids), scored=len(ev.query_ids),
                                   missing=len(ev.missing_runs), timeout=0, invalid=0,
                                   no_claims=0, pruned=0)
        cat_of = {q.query_id: q.category for q in dataset.queries}
        cats = [cat_of[qid] for qid in ev.query_ids]
        rows = summarize(cid, cats, ev.values, category_weights=dict(m.category_weights),
                         resamples=m.bootstrap_resamples, confidence=m.confidence,
                         seed=cfg.seed)
        summary_rows += rows
        per_query_rows += _per_query_rows(run_id, cid, ev, cat_of)
        timing_rows += _timing_rows(run_id, cid, cfg_timings)
        run_path = run_dir / f"run.{cid}.trec"
        write_trec_run(run_path, dataset, hits, tag=cid)
        run_files[cid] = run_path.name
        configs.append(ConfigReport(cid, dict(qp), acc, tuple(rows), tuple(cfg_timings), None))

    failed = check_gates(cfg, summary_rows)
    write_table(per_query_rows, schema.PER_QUERY, run_dir / "per_query.parquet")
    write_table(timing_rows, schema.TIMINGS, run_dir / "timings.parquet")
    acc_by_cid = {c.config_id: accounting_columns(c.accounting) for c in configs}
    write_table(
        [{"run_id": run_id, **r.__dict__, **acc_by_cid[r.config_id]} for r in summary_rows],
        schema.SUMMARY, run_dir / "summary.parquet")
    cache_hits = {name: n.hit for name, n in nodes.items()}
    wall_s = time.perf_counter() - t_start
    manifest = {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": run_id,
        "experiment": cfg.experiment_name,
        "config": OmegaConf.to_container(cfg, resolve=True),
        "git_sha": git_sha(Path(__file__).resolve().parent),
        "packages": package_versions(),
        "device": device,
        "dataset": {"name": dataset.name, "fingerprint": dataset.fingerprint,
                    "documents": len(dataset.documents), "queries": len(dataset.queries),
                    "chunks": len(chunks)},
        "seeds": {"seed": cfg.seed, "bootstrap": cfg.seed},
        "cache": {"dir": str(store.root), "hits": cache_hits,
                  "events": [e.__dict__ for e in store.events]},
        "embedding": {"texts_per_s": doc_stats.texts_per_s,
                      "tokens_per_s": doc_stats.tokens_per_s,
                      "truncated_chunks": doc_stats.n_truncated},
        "index": build_info.__dict__,
        "configs": {c.config_id: {"query_params": c.query_params,
                                  "completion": c.accounting.__dict__,
                                  "pruned_reason": c.pruned_reason,
                                  "trec_run": run_files.get(c.config_id)} for c in configs},
        "resources": [s.__dict__ for s in telemetry.samples],
        "peak_rss_bytes": peak_rss_bytes(),
        "failed_gates": failed,
        "wall_s": wall_s,
    }
    write_json(run_dir / "run.json", manifest)
    if comps.reporter is not None:
        comps.reporter.write(RunReport(run_id=run_id, run_dir=run_dir,
                                       experiment=str(cfg.experiment_name), device=device,
                                       dataset_name=dataset.name,
                                       dataset_fingerprint=dataset.fingerprint,
                                       n_documents=len(dataset.documents),
                                       n_queries=len(dataset.queries), n_chunks=len(chunks),
                                       configs=tuple(configs), cache_hits=cache_hits,
                                       failed_gates=tuple(failed), wall_s=wall_s,
                                       resources=tuple(telemetry.samples)))
    exit_code = 3 if failed else 0
    log.info("run %s finished in %.1fs: %s", run_id, wall_s, run_dir)
    return RunResult(run_dir, run_id, exit_code, tuple(summary_rows), cache_hits, tuple(failed))


def probe(comps: Components, built: BuiltIndex, index_bytes: int, q_vecs: np.ndarray,
          qp: dict[str, Any], n_chunks: int, device: str) -> Any:
    """Time single queries on a deterministic sample; ask the budget whether to go on."""
    assert comps.budget is not None
    n = min(comps.budget.probe_queries, len(q_vecs))
    sample = np.linspace(0, len(q_vecs) - 1, n).astype(int)
    log_ = TimingLog("probe", device=device)
    depth = comps.retriever.depth(n_chunks)
    for i in sample:
        with log_.measure("query", 1, sync_cuda=device == "cuda"):
            built.search(np.asarray(q_vecs[i : i + 1]), depth, qp)
    measurement = ProbeMeasurement(
        stage="retrieve", n_queries=n,
        query_latency_ms=tuple(s.wall_ms for s in log_.samples), index_bytes=index_bytes,
        peak_rss_bytes=peak_rss_bytes(), peak_vram_bytes=None)
    return comps.budget.check(measurement)


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


def _per_query_rows(run_id: str, cid: str, ev: Evaluation,
                    cat_of: dict[str, str]) -> list[dict[str, Any]]:
    missing = set(ev.missing_runs)
    rows = []
    for metric, vals in ev.values.items():
        for qid, v in zip(ev.query_ids, vals, strict=True):
            rows.append({"run_id": run_id, "config_id": cid, "query_id": qid,
                         "category": cat_of[qid], "metric": metric, "value": float(v),
                         "status": "missing_run" if qid in missing else "scored"})
    return rows


def _timing_rows(run_id: str, cid: str, timings: list[StageTiming]) -> list[dict[str, Any]]:
    return [{"run_id": run_id, "config_id": cid, **t.__dict__} for t in timings]
