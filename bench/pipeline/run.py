"""Run one experiment config: plan, execute, score, compare, record, gate.

``run(cfg, run_dir) -> RunResult`` is the whole pipeline; ``bench/__main__.py`` only wires
Hydra to it. ``bench.pipeline.plan`` expands the config into a graph of content-keyed nodes
whose leaves are the run's configs; ``bench.pipeline.executor`` resolves each node once
(loading cached artifacts); every config is then scored on the same queries and compared per
query with the first one. ``plan_only=true`` prints the plan and stops before any work.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from bench.cache.store import ArtifactStore
from bench.config.build import build
from bench.config.toplevel import check_gate_categories
from bench.context.base import JudgedContextBuilder
from bench.data.base import Dataset
from bench.embedding.stage import Embeddings
from bench.errors import BenchError, ConfigError
from bench.filters.base import FilterOutcome, eligible_gold
from bench.filters.entitlement import check_tenants
from bench.filters.hard_vs_soft import HardVsSoft
from bench.filters.stage import FilteredPool
from bench.generation.base import SamplingParams
from bench.generation.memo import MemoCounts, MemoGenerator, sum_counts
from bench.generation.stage import (
    GenerationSettings,
    context_variants,
    judged_scope,
    query_subset,
)
from bench.index.base import SearchResult
from bench.metrics.engine import Qrels
from bench.pipeline.answers import (
    answer_values,
    answered,
    generation_summary,
    gold_probe_summary,
    merge_answer_scores,
)
from bench.pipeline.components import Components, build_components, validate_top_level
from bench.pipeline.device import resolve_device
from bench.pipeline.executor import Executor, Resolved
from bench.pipeline.plan import ConfigSpec, Plan, plan
from bench.pipeline.probe import ProbeOutcome, probe_configs
from bench.pipeline.scoring import (
    ConfigScores,
    SummarySettings,
    compare,
    expected_queries,
    score_hits,
    unscored,
)
from bench.results.records import (
    FilterDecisionRecord,
    GenerationSummary,
    GoldProbeSummary,
    SummaryRow,
)
from bench.retrieval.base import Pool
from bench.telemetry.base import StageTiming, Telemetry
from bench.telemetry.basic import BasicTelemetry

log = logging.getLogger("bench")

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
class ConfigRun:
    """One config after execution: its spec, pool (None when pruned), what its chain did."""

    spec: ConfigSpec
    pool: Pool | None
    chain: tuple[Resolved, ...]
    timings: tuple[StageTiming, ...]
    pruned_reason: str | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def node(self, stage: str) -> Resolved | None:
        return next((r for r in self.chain if r.node.stage == stage), None)

    @property
    def filter_outcome(self) -> FilterOutcome | None:
        r = self.node("filters")
        return r.value.outcome if r is not None and isinstance(r.value, FilteredPool) else None


@dataclass(frozen=True)
class Executed:
    """Everything a run computed, handed to the writers (bench.pipeline.record)."""

    run_id: str
    cfg: DictConfig
    device: str
    dataset: Dataset
    plan: Plan
    executor: Executor
    configs: tuple[ConfigRun, ...]
    scores: tuple[ConfigScores, ...]
    data_timing: StageTiming
    telemetry: Telemetry
    comps: Components
    #: generated configs' answer figures by config id (latency, abstention, judge validity)
    generation: dict[str, GenerationSummary] = field(default_factory=dict)
    #: the budget probe (None: no budget)
    probe: ProbeOutcome | None = None
    #: lost-in-the-middle configs' placement figures by config id (context=gold_position)
    gold_probes: dict[str, GoldProbeSummary] = field(default_factory=dict)


def run(cfg: DictConfig, run_dir: Path) -> RunResult:
    t_start = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    validate_top_level(cfg)
    device = resolve_device(cfg.device)
    comps = build_components(cfg, device)
    telemetry: Telemetry = build(cfg.telemetry, "telemetry") or BasicTelemetry()
    store = ArtifactStore(Path(cfg.cache_dir).expanduser())
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    log.info("run %s on device=%s, cache %s", run_id, device, store.root)

    with telemetry.watch("data"):
        t0 = time.perf_counter()
        dataset = comps.source.load()
        data_ms = (time.perf_counter() - t0) * 1000.0
    log.info("stage %-10s loaded %s: %d documents, %d queries in %.2fs (fingerprint %s)",
             "data", dataset.name, len(dataset.documents), len(dataset.queries),
             data_ms / 1000, dataset.fingerprint[:12])
    data_timing = StageTiming("data", "total", len(dataset.documents), data_ms, "cpu")
    check_gate_categories(cfg.gates, {q.category for q in dataset.queries})
    if comps.filters is not None and comps.filters.entitlement:
        check_tenants(dataset)  # the filter would refuse them after retrieval: say it now

    m = cfg.metrics
    gen_settings = generation_settings(cfg, comps, dataset)
    the_plan = plan(comps, dataset, device=device, relevance_level=m.relevance_level,
                    generation=gen_settings)
    executor = Executor(store, telemetry, device)
    if cfg.plan_only:
        from bench.pipeline.record import write_plan

        text = write_plan(the_plan, executor, run_dir)
        print(text)
        return RunResult(run_dir, run_id, 0, ())
    log.info("plan: %d configs over %d nodes", len(the_plan.configs), len(the_plan.nodes()))

    executor.resolved(the_plan.chunk_stats)
    probe = probe_budget(comps, the_plan, executor, dataset, device, telemetry)
    memo = memo_generators(comps)
    memo_by_config: dict[str, MemoCounts] = {}
    try:
        configs = []
        for spec in the_plan.configs:
            before = [g.counts.snapshot() for g in memo]
            configs.append(execute_config(spec, the_plan, executor, probe.pruned, data_timing))
            if memo and spec.kind == "generated":
                memo_by_config[spec.config_id] = sum_counts(
                    [g.counts.since(b) for g, b in zip(memo, before, strict=True)])
        for g in memo:
            g.log_summary("this run")
    finally:  # a managed server or a GPU engine is released even when a stage fails
        if comps.generator is not None:
            comps.generator.close()
        judge_gen = getattr(comps.judge, "generator", None) or getattr(
            next(iter(getattr(comps.judge, "judges", [])), None), "generator", None)
        if judge_gen is not None and judge_gen is not comps.generator:
            judge_gen.close()
    if all(c.pool is None for c in configs):
        log.warning("every config was pruned by the budget")

    gold = eligible_gold(dataset)
    qrels = Qrels.from_mapping(gold)
    settings = SummarySettings(dict(m.category_weights), m.bootstrap_resamples, m.confidence,
                               cfg.seed)
    exp_ids, exp_cats = expected_queries(dataset, gold, m.relevance_level)
    scores: list[ConfigScores] = []
    gen_summaries: dict[str, GenerationSummary] = {}
    gold_probes: dict[str, GoldProbeSummary] = {}
    for i, c in enumerate(configs):
        if c.pool is None:
            scores.append(unscored(c.spec.config_id, "pruned", exp_ids, exp_cats,
                                   list(m.names), settings))
            continue
        with telemetry.watch("metrics"):
            t0 = time.perf_counter()
            s = score_hits(c.spec.config_id, c.pool.hits, c.extra, dataset, qrels,
                           list(m.names), relevance_level=m.relevance_level, settings=settings)
            if c.spec.kind == "generated":
                got = answered(c.spec, executor)
                rows, abstention = answer_values(comps, dataset, got)
                s = merge_answer_scores(s, dataset, rows, got.generations, settings)
                gen_summaries[c.spec.config_id] = generation_summary(
                    c.spec, comps, got, abstention, memo_by_config.get(c.spec.config_id))
                gp = gold_probe_summary(c.spec, executor,
                                        None if gen_settings is None else gen_settings.scope)
                if gp is not None:
                    gold_probes[c.spec.config_id] = gp
            ms = (time.perf_counter() - t0) * 1000.0
        log.info("stage %-10s %s %s: %d queries scored in %.0f ms", "metrics",
                 c.spec.config_id, c.spec.label, len(s.query_ids), ms)
        scores.append(s)
        configs[i] = replace(c, timings=(
            *c.timings, StageTiming("metrics", "total", len(s.query_ids), ms, "cpu")))
    done = Executed(run_id, cfg, device, dataset, the_plan, executor, tuple(configs),
                    tuple(scores), data_timing, telemetry, comps, gen_summaries, probe,
                    gold_probes)
    # generated configs repeat their pool's retrieval values: they are compared with each
    # other on answer metrics only (below), never counted again in the retrieval comparisons
    kept = [s for c, s in zip(configs, scores, strict=True)
            if c.pool is not None and c.spec.kind != "generated"]
    extra_metrics = [k for k in (kept[0].values if kept else {}) if k not in m.names]
    names = [*m.names, *extra_metrics]
    comparisons = compare(kept, names, resamples=m.bootstrap_resamples,
                          confidence=m.confidence, seed=cfg.seed)
    # a reranked config is also paired with its own pool when that is not the baseline
    by_id = {s.config_id: s for s in kept}
    children: dict[str, list[ConfigScores]] = {}
    for c in configs:
        parent = c.spec.parent_id
        if (parent is not None and c.pool is not None and kept and parent != kept[0].config_id
                and parent in by_id and c.spec.kind != "generated"):
            children.setdefault(parent, []).append(by_id[c.spec.config_id])
    for parent, kids in children.items():
        comparisons += compare([by_id[parent], *kids], names, resamples=m.bootstrap_resamples,
                               confidence=m.confidence, seed=cfg.seed)
    generated = [s for c, s in zip(configs, scores, strict=True)
                 if c.pool is not None and c.spec.kind == "generated"]
    answer_metrics = [k for k in (generated[0].values if generated else {}) if k not in names]
    by_gen = {s.config_id: s for s in generated}
    comparisons += compare(generated, answer_metrics, resamples=m.bootstrap_resamples,
                           confidence=m.confidence, seed=cfg.seed)
    # the positions of a gold-position probe are also paired with their own first position
    # when that is not the baseline above (several pools probed in one run)
    for group in probe_groups(configs, gold_probes).values():
        gscores = [by_gen[cid] for cid in group if cid in by_gen]
        if len(gscores) > 1 and generated and gscores[0].config_id != generated[0].config_id:
            comparisons += compare(gscores, answer_metrics, resamples=m.bootstrap_resamples,
                                   confidence=m.confidence, seed=cfg.seed)
    decisions = filter_decisions(done)
    from bench.pipeline.record import write_results

    result = write_results(done, run_dir, comparisons, decisions, t_start)
    if cfg.capacity.config:
        from bench.pipeline.capacity import run_capacity

        run_capacity(done, run_dir)
    close = getattr(telemetry, "close", None)
    if callable(close):  # the sampler thread (its records are in run.json already)
        close()
    return result


def execute_config(spec: ConfigSpec, the_plan: Plan, executor: Executor,
                   pruned: dict[str, str], data_timing: StageTiming) -> ConfigRun:
    chain = spec.chain
    reason = next((pruned[n.key] for n in chain if n.key in pruned), None)
    if reason is not None:
        return ConfigRun(spec, None, (), (data_timing,), reason)
    resolved = tuple(executor.resolved(n) for n in (*chain, *the_plan.measured_with(chain)))
    pool = executor.value(spec.pool_node)
    assert isinstance(pool, Pool), f"config leaf {spec.label} is not a candidate pool"
    extra: dict[str, np.ndarray] = {}
    if pool.chunk_result is not None and the_plan.exact is not None:
        extra = ann_recall(pool.chunk_result, executor.value(the_plan.exact),
                           executor.value(the_plan.embed_docs),
                           executor.value(the_plan.embed_queries))
    timings = (data_timing, *(t for r in resolved for t in r.timings))
    return ConfigRun(spec, pool, resolved, timings, None, extra)


def memo_generators(comps: Components) -> list[MemoGenerator]:
    """The prompt memos of the run (``generation.memo``): the generator's, and the judge's
    when the judge asks another model."""
    from bench.judge.stage import judge_generator

    out: list[MemoGenerator] = []
    for g in (comps.generator, None if comps.judge is None else judge_generator(comps.judge)):
        if isinstance(g, MemoGenerator) and all(g is not m for m in out):
            out.append(g)
    return out


def generation_settings(cfg: DictConfig, comps: Components, dataset: Dataset
                        ) -> GenerationSettings | None:
    """What the plan needs to add answers to each pool config (None: no generator).

    A context option that reads the judgments draws the subset from the queries it can build
    a context for; the others are counted per reason (``GenerationSettings.scope``)."""
    if comps.generator is None or comps.context is None:
        return None
    g = cfg.generation
    level = cfg.metrics.relevance_level
    judged = [v.builder for v in context_variants(comps.context)
              if isinstance(v.builder, JudgedContextBuilder)]
    scope = judged_scope(judged[0], dataset, level) if judged else None
    subset = query_subset(dataset, g.max_queries, g.seed,
                          None if scope is None else set(scope.eligible),
                          answerable_only=g.answerable_only)
    if not subset:  # never a generated config answering nothing, reported as complete
        if scope is not None:
            why = ", ".join(f"{n} {r}" for r, n in scope.excluded) or "no query"
            raise ConfigError("context", f"no query of the dataset can be probed ({why})")
        raise ConfigError("generation.answerable_only" if g.answerable_only else "dataset",
                          "no query to answer: every query is must-abstain"
                          if g.answerable_only else "the dataset has no queries")
    sampling = SamplingParams(max_tokens=g.max_tokens, temperature=g.temperature,
                              top_p=g.top_p, seed=g.seed)
    log.info("generation: %d of %d queries answered per config (seed %d)", len(subset),
             len(dataset.queries), g.seed)
    if scope is not None:
        log.info("context: %d of %d queries can be probed (%s); the subset is drawn from them",
                 len(scope.eligible), scope.n_queries,
                 ", ".join(f"{n} {r}" for r, n in scope.excluded) or "none excluded")
    return GenerationSettings(comps.generator, comps.context, sampling, subset, comps.judge,
                              tuple(g.kinds), level, scope, g.exact_reference)


def probe_groups(configs: list[ConfigRun], probes: dict[str, GoldProbeSummary]
                 ) -> dict[str, list[str]]:
    """Config ids of the gold-position configs per parent pool, in plan order."""
    groups: dict[str, list[str]] = {}
    for c in configs:
        if c.spec.config_id in probes and c.spec.parent_id is not None:
            groups.setdefault(c.spec.parent_id, []).append(c.spec.config_id)
    return groups


def ann_recall(chunk_res: SearchResult, exact: SearchResult, docs: Embeddings,
               queries: Embeddings) -> dict[str, np.ndarray]:
    """Tie-tolerant ANN recall@k per query, on EXACT scores of the returned chunks (ANN
    scores of quantised indexes are approximate)."""
    from bench.index.exact import ann_recall_at_k

    ids = chunk_res.ids
    safe = np.where(ids >= 0, ids, 0)
    vecs = np.asarray(docs.vectors)
    exact_scores = np.einsum("qd,qkd->qk", np.asarray(queries.vectors),
                             vecs[safe]).astype(np.float32)
    exact_scores[ids < 0] = -np.inf
    ann = SearchResult(ids=ids, scores=exact_scores)
    out = {}
    for k in ANN_RECALL_K:
        if k <= min(ids.shape[1], exact.ids.shape[1]):
            out[f"ann_recall@{k}"] = ann_recall_at_k(ann, exact, k)
    return out


def probe_budget(comps: Components, the_plan: Plan, executor: Executor, dataset: Dataset,
                 device: str, telemetry: Telemetry) -> ProbeOutcome:
    """Probe every config's whole chain on a seeded query sample before running it; a node
    the budget rejects (with confidence) prunes every config below it
    (``bench.pipeline.probe``). ``.pruned`` maps node key -> reason."""
    return probe_configs(comps, the_plan, executor, dataset, device, telemetry)


def filter_decisions(done: Executed) -> list[FilterDecisionRecord]:
    """The pre-registered hard-vs-soft rule for every lane run both ways."""
    f = done.comps.filters
    if not isinstance(f, HardVsSoft):
        return []
    cfg = done.cfg
    by_pair: dict[str, dict[str, tuple[ConfigRun, ConfigScores]]] = {}
    for c, s in zip(done.configs, done.scores, strict=True):
        if (c.spec.filter_pair is not None and c.spec.kind not in ("reranked", "generated")
                and c.pool is not None):
            lane, mode = c.spec.filter_pair
            by_pair.setdefault(lane, {})[mode] = (c, s)
    quality = f.hard.predicate_quality(done.dataset, relevance_level=cfg.metrics.relevance_level)
    log.info("filters predicate precision %s recall %s (%d extracted, %d labelled)",
             quality.precision, quality.recall, quality.n_extracted, quality.n_labelled)
    out: list[FilterDecisionRecord] = []
    pm, rm = f.precision_metric, f.recall_metric
    for lane, pair in by_pair.items():
        if "hard" not in pair or "soft" not in pair:
            continue
        (hard_run, hard), (_, soft) = pair["hard"], pair["soft"]
        if pm not in hard.values or rm not in hard.values:
            raise ConfigError("filters.precision_metric", f"{pm} and {rm} must be in metrics.names")
        outcome = hard_run.filter_outcome
        assert outcome is not None
        try:
            rate = outcome.exclusion_rates().query_rate
        except BenchError as exc:
            out.append(FilterDecisionRecord(lane=lane, choice=None, error=exc.one_line()))
            continue
        d = f.hard.decide(hard.values[pm], soft.values[pm], exclusion_rate=rate,
                          recall_hard=float(np.mean(hard.values[rm])),
                          recall_soft=float(np.mean(soft.values[rm])), seed=cfg.seed,
                          resamples=cfg.metrics.bootstrap_resamples)
        fields: dict[str, Any] = dict(d.__dict__)
        for k in ("gain_ok", "exclusion_ok", "recall_ok"):
            fields.pop(k)
        out.append(FilterDecisionRecord(
            lane=lane, **fields, predicate_precision=quality.precision,
            predicate_recall=quality.recall, predicates_extracted=quality.n_extracted,
            predicates_labelled=quality.n_labelled))
        log.info("filters decision for %s: %s %s", lane, d.choice.upper(),
                 "; ".join(d.reasons) or "(every condition met)")
    return out
