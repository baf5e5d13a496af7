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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from bench.budget.stages import StageBudget
from bench.cache.store import ArtifactStore
from bench.config.build import build
from bench.config.toplevel import check_gate_categories
from bench.context.base import JudgedContextBuilder
from bench.data.base import Dataset, Query
from bench.data.splits import Contamination, contamination, with_splits
from bench.data.subset import QuerySelection, select_queries
from bench.embedding.stage import Embeddings
from bench.errors import BenchError, ConfigError, ServiceError
from bench.filters.base import eligible_gold
from bench.filters.entitlement import check_tenants
from bench.filters.hard_vs_soft import HardVsSoft
from bench.gates.regression import check_critical
from bench.gates.release import check_run_gates
from bench.generation.base import Generation, Generator, SamplingParams
from bench.generation.memo import MemoCounts, MemoGenerator, sum_counts
from bench.generation.stage import (
    GenerationSettings,
    context_variants,
    judged_scope,
    query_subset,
)
from bench.index.base import SearchResult
from bench.judge.gating import check_calibrated_gates, gated_metrics
from bench.judge.repeats import repeat_summary
from bench.judge.stage import judge_generator, judge_metrics, judge_repeats
from bench.metrics.decisions import DecisionRecord, evaluate_decisions
from bench.metrics.engine import Qrels
from bench.pipeline import latency
from bench.pipeline.answers import (
    answer_values,
    answered,
    generation_summary,
    gold_probe_summary,
    merge_answer_scores,
    with_pairwise,
)
from bench.pipeline.components import Components, build_components
from bench.pipeline.device import resolve_device
from bench.pipeline.executor import Executor
from bench.pipeline.latency import LatencyRun
from bench.pipeline.outcome import ConfigRun, Executed, RunResult
from bench.pipeline.plan import ConfigKind, ConfigSpec, Plan, plan
from bench.pipeline.probe import ProbeOutcome, probe_configs
from bench.pipeline.probe_stages import check_stage_budget, probe_stages
from bench.pipeline.probe_stages import report as probe_report
from bench.pipeline.record import write_plan, write_results
from bench.pipeline.request import QueryChain
from bench.pipeline.scoring import (
    ConfigScores,
    compare,
    expected_queries,
    score_hits,
    unscored,
)
from bench.pipeline.settings import RunSettings, run_settings
from bench.pipeline.validate import validate_top_level
from bench.results.records import (
    Comparison,
    FilterDecisionRecord,
    GenerationSummary,
    GoldProbeSummary,
    JudgeNoise,
)
from bench.retrieval.base import Hits, Pool
from bench.telemetry.base import RecordingTelemetry, StageTiming, Telemetry
from bench.telemetry.basic import BasicTelemetry

log = logging.getLogger("bench")

#: exit code of a run whose configs completed except some a served backend failed
EXIT_CONFIGS_FAILED = 5
#: ANN recall is reported at these cutoffs (chunk level, vs the exact flat search)
ANN_RECALL_K = (10, 100)


def run(cfg: DictConfig, run_dir: Path) -> RunResult:
    """The whole pipeline: prepare (validate, build, load, plan) -> execute -> score ->
    compare -> write. Only ``prepare`` reads the ``DictConfig``; the steps after it read
    typed settings (``bench.pipeline.settings``)."""
    t_start = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    p = prepare(cfg)
    if p.settings.robustness:  # the study's cases exist on this dataset: before any work
        from bench.robustness.study import check_dataset

        check_dataset(p.settings.robustness, p.dataset)
    if p.settings.plan_only:
        from bench.pipeline.probe_stages import planned_probes
        from bench.scaling.preview import cached_chunk_count, scale_preview

        scale = scale_preview(p.settings.scale_plan, p.dataset, p.plan, p.executor.store)
        probes = planned_probes(p.comps, p.plan, p.executor, len(p.dataset.queries),
                                cached_chunk_count(p.executor.store, p.plan.chunk.stage,
                                                   p.plan.chunk.key))
        text = write_plan(p.plan, p.executor, run_dir, p.comps.budget, scale, probes)
        return RunResult(run_dir, p.run_id, 0, (), plan_text=text)
    check_served_embedder(p.comps, p.plan, p.executor)  # before any work, not in a plan
    log.info("plan: %d configs over %d nodes", len(p.plan.configs), len(p.plan.nodes()))
    configs, probe, memo = execute(p)
    done = score(p, configs, probe, memo)
    comparisons = compare_configs(done)
    decisions = filter_decisions(done)
    registered = preregistered_decisions(done)
    latency = measure_latency(done)
    probe_report(probe, p.plan, p.executor, run_dir, latency.requests)  # budget_probes.json
    from bench.rewrite.decide import rewrite_report

    rewrite = rewrite_report(done, latency)  # adopt / reject per rewriter and slice
    capacity = None
    cap = p.settings.capacity
    # before the report, which shows its answer; target=http loads endpoints, not a config
    if cap.config or (cap.load == "open" and cap.target == "http"):
        from bench.capacity.run import run_capacity

        capacity = run_capacity(done, run_dir)
    if cap.freshness:  # inserts while queries run (bench.capacity.freshness)
        from bench.capacity.run.freshness import with_freshness

        capacity = with_freshness(capacity, cap.freshness, run_dir)
    result = write_results(done, run_dir, comparisons, decisions, t_start, capacity,
                           registered, latency, rewrite)
    if p.settings.robustness:  # the robustness study (bench.robustness.study), after the run
        from bench.robustness.study import run_configured

        run_configured(p.settings.robustness, p.dataset, p.comps.embedder, run_dir)
    failed = failure_lines(done.configs)
    if failed:  # the other configs completed and are written; the run did not
        result = replace(result, exit_code=result.exit_code or EXIT_CONFIGS_FAILED,
                         failed_configs=failed)
    if isinstance(p.telemetry, RecordingTelemetry):  # the sampler thread (run.json has it)
        p.telemetry.close()
    return result


@dataclass(frozen=True)
class Prepared:
    """A validated run before any work: settings, components, the dataset and the plan."""

    settings: RunSettings
    run_id: str
    device: str
    comps: Components
    telemetry: Telemetry
    dataset: Dataset
    data_timing: StageTiming
    generation: GenerationSettings | None
    plan: Plan
    executor: Executor
    #: the queries evaluated (split, subset) and the contamination check of the splits
    selection: QuerySelection | None = None
    contamination: Contamination | None = None


def prepare(cfg: DictConfig) -> Prepared:
    """Validate the config, build the components, load the dataset and plan the run; every
    config error is raised here, before any stage computes anything."""
    validate_top_level(cfg)
    settings = run_settings(cfg)
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
    dataset, selection, found, held_out = select_split(settings, dataset)
    check_gate_categories(settings.gates, {q.category for q in dataset.queries})
    # eligibility (scoring's gold, unauthorized_hits) reads tenants with or without a filter
    check_tenants(dataset)
    if comps.filters is not None:
        comps.filters.check(dataset)  # what the filter would refuse after retrieval: now
        check_filter_metrics(comps.filters, settings)
    gen = generation_settings(settings, comps, dataset)
    the_plan = plan(comps, dataset, device=device,
                    relevance_level=settings.metrics.relevance_level, generation=gen,
                    held_out=held_out)
    check_budget_stages(comps, the_plan, len(dataset.queries))
    check_run_gates(settings.gates, the_plan.configs, comps)
    for u in check_calibrated_gates(gated_metrics(settings), comps.judge,
                                    OmegaConf.select(cfg, "judge.calibration"),
                                    dataset=dataset.name,
                                    evaluated={q.split for q in dataset.queries}):
        log.warning("UNCALIBRATED judge gate %s %s: %s", u.key, u.metric, u.reason)
    check_decision_configs(settings, the_plan)
    check_capacity_config(settings, the_plan)
    return Prepared(settings, run_id, device, comps, telemetry, dataset, data_timing, gen,
                    the_plan, Executor(store, telemetry, device), selection, found)


def check_served_embedder(comps: Components, the_plan: Plan, executor: Executor) -> None:
    """A remote embedder the run will ask (its corpus or query vectors are not cached)
    answers one probe before any work: an unreachable server or a wrong dimension is one
    line and exit 2 now. Once work began, its failures are statuses or failed configs."""
    from bench.http.client import Preflight

    emb = comps.embedder
    if isinstance(emb, Preflight) and not all(
            executor.is_cached(n) for n in (the_plan.embed_docs, the_plan.embed_queries)):
        emb.preflight()


def select_split(settings: RunSettings, dataset: Dataset
                 ) -> tuple[Dataset, QuerySelection, Contamination, tuple[Query, ...]]:
    """The queries this run evaluates (``subset.*``: a split, a seeded stratified sample),
    after the contamination check over every split of the loaded dataset, and the loaded
    queries it does not evaluate (what a stage may learn from: ``PlanState.held_out``)."""
    sub, reg = settings.subset, settings.regression
    dataset = with_splits(dataset, sub.splits)
    loaded = dataset
    found = contamination(dataset.queries, settings.resolved)
    for line in found.warnings():
        log.warning("contamination: %s", line)
    check_critical(settings.critical_ids, () if reg is None else reg.critical_categories,
                   [q.query_id for q in dataset.queries], [q.category for q in dataset.queries])
    dataset, selection = select_queries(dataset, split=sub.split, max_queries=sub.max_queries,
                                        seed=sub.seed, allocation=sub.allocation,
                                        always=set(settings.critical_ids))
    log.info("stage %-10s evaluates %s", "data", selection.line())
    evaluated = {q.query_id for q in dataset.queries}
    return dataset, selection, found, tuple(q for q in loaded.queries
                                            if q.query_id not in evaluated)


def execute(p: Prepared) -> tuple[list[ConfigRun], ProbeOutcome, dict[str, MemoCounts]]:
    """Probe the budget, then resolve every kept config's chain (each node once); what the
    prompt memo answered per generated config. A managed server or a GPU engine is released
    even when a stage fails."""
    comps, the_plan, executor = p.comps, p.plan, p.executor
    executor.resolved(the_plan.chunk_stats)
    early = probe_stages(comps, the_plan, executor, p.dataset, p.device)  # before corpus work
    if isinstance(comps.budget, StageBudget) and not comps.budget.chain_probe_needed:
        probe = ProbeOutcome(dict(early.pruned), wall_s=early.wall_s, budget=comps.budget,
                             stages=early)  # no ceiling needs the whole chain probed
    else:
        probe = replace(probe_configs(comps, the_plan, executor, p.dataset, p.device,
                                      p.telemetry, early.pruned), stages=early)
    pruned = {} if early.validate else probe.pruned  # validate: pruned configs run too
    memo = memo_generators(comps)
    memo_by_config: dict[str, MemoCounts] = {}
    try:
        configs = []
        for spec in the_plan.configs:
            before = [g.counts.snapshot() for g in memo]
            configs.append(execute_config(spec, the_plan, executor, pruned,
                                          p.data_timing, p.dataset, p.device))
            if memo and spec.kind is ConfigKind.GENERATED:
                memo_by_config[spec.config_id] = sum_counts(
                    [g.counts.since(b) for g, b in zip(memo, before, strict=True)])
        for g in memo:
            g.log_summary("this run")
    finally:
        if comps.generator is not None:
            comps.generator.close()
        judge_gen = None if comps.judge is None else judge_generator(comps.judge)
        if judge_gen is not None and judge_gen is not comps.generator:
            judge_gen.close()
        cross = cross_judge_generator(comps)
        if cross is not None and cross is not comps.generator and cross is not judge_gen:
            cross.close()
    if all(c.pool is None for c in configs):
        log.warning("every config was pruned by the budget")
    return configs, probe, memo_by_config


def cross_judge_generator(comps: Components) -> Generator | None:
    """The pairwise judge's second model (``judge.cross_generator``), None without one."""
    from bench.judge.pairwise import PairwisePreferenceJudge

    judge = comps.judge
    return judge.cross_generator if isinstance(judge, PairwisePreferenceJudge) else None


def score(p: Prepared, configs: list[ConfigRun], probe: ProbeOutcome,
          memo: dict[str, MemoCounts]) -> Executed:
    """Every config's per-query values against the gold its callers may see (a pruned
    config: every query ``pruned``), answer and judge metrics for generated configs."""
    m, dataset, settings = p.settings.metrics, p.dataset, p.settings.summary
    gold = eligible_gold(dataset)
    qrels = Qrels.from_mapping(gold)
    exp_ids, exp_cats = expected_queries(dataset, gold, m.relevance_level)
    scores: list[ConfigScores] = []
    gen_summaries: dict[str, GenerationSummary] = {}
    gold_probes: dict[str, GoldProbeSummary] = {}
    for i, c in enumerate(configs):
        if c.pool is None or c.failed_reason is not None:
            scores.append(unscored(c.spec.config_id, "pruned" if c.pool is None else "failed",
                                   exp_ids, exp_cats, list(m.names), settings))
            continue
        with p.telemetry.watch("metrics"):
            t0 = time.perf_counter()
            s = score_hits(c.spec.config_id, c.pool.hits, c.extra, dataset, qrels,
                           list(m.names), relevance_level=m.relevance_level, settings=settings,
                           pool_status=c.pool.status)
            if c.spec.kind is ConfigKind.GENERATED:
                got = answered(c.spec, p.executor)
                rows, abstention = answer_values(p.comps, dataset, got,
                                                 relevance_level=m.relevance_level)
                s = merge_answer_scores(s, dataset, rows, got.generations, settings)
                n_rep = 1 if p.comps.judge is None else judge_repeats(p.comps.judge)
                split: tuple[JudgeNoise, ...] = ()
                if p.comps.judge is not None:
                    s, split = repeat_summary(s, got.verdicts, judge_metrics(p.comps.judge),
                                             n_rep, settings)
                gen_summaries[c.spec.config_id] = replace(with_pairwise(generation_summary(
                    c.spec, p.comps, got, abstention, memo.get(c.spec.config_id), rows,
                    dataset), got, p.comps, p.plan.configs, settings),
                    judge_repeats=n_rep, judge_noise=split)
                gp = gold_probe_summary(c.spec, p.executor,
                                        None if p.generation is None else p.generation.scope)
                if gp is not None:
                    gold_probes[c.spec.config_id] = gp
            ms = (time.perf_counter() - t0) * 1000.0
        log.info("stage %-10s %s %s: %d queries scored in %.0f ms", "metrics",
                 c.spec.config_id, c.spec.label, len(s.query_ids), ms)
        scores.append(s)
        configs[i] = replace(c, timings=(
            *c.timings, StageTiming("metrics", "total", len(s.query_ids), ms, "cpu")))
    return Executed(p.run_id, p.settings, p.device, dataset, p.plan, p.executor,
                    tuple(configs), tuple(scores), p.data_timing, p.telemetry, p.comps,
                    gen_summaries, probe, gold_probes, selection=p.selection,
                    contamination=p.contamination)


def compare_configs(done: Executed) -> list[Comparison]:
    """Each retrieval config paired per query with the first (and a reranked config with its
    own pool); generated configs with each other on answer metrics only (they repeat their
    pool's retrieval values); gold-position probes with their own first position."""
    m, seed = done.settings.metrics, done.settings.seed
    configs, scores = done.configs, done.scores

    def paired(group: list[ConfigScores], metrics: list[str]) -> list[Comparison]:
        return compare(group, metrics, resamples=m.bootstrap_resamples,
                       confidence=m.confidence, seed=seed)

    kept = [s for c, s in zip(configs, scores, strict=True)
            if c.pool is not None and c.spec.kind is not ConfigKind.GENERATED]
    extra_metrics = [k for k in (kept[0].values if kept else {}) if k not in m.names]
    names = [*m.names, *extra_metrics]
    comparisons = paired(kept, names)
    by_id = {s.config_id: s for s in kept}
    children: dict[str, list[ConfigScores]] = {}
    for c in configs:
        parent = c.spec.parent_id
        if (parent is not None and c.pool is not None and kept and parent != kept[0].config_id
                and parent in by_id and c.spec.kind is not ConfigKind.GENERATED):
            children.setdefault(parent, []).append(by_id[c.spec.config_id])
    for parent, kids in children.items():
        comparisons += paired([by_id[parent], *kids], names)
    generated = [s for c, s in zip(configs, scores, strict=True)
                 if c.pool is not None and c.spec.kind is ConfigKind.GENERATED]
    answer_metrics = [k for k in (generated[0].values if generated else {}) if k not in names]
    by_gen = {s.config_id: s for s in generated}
    comparisons += paired(generated, answer_metrics)
    for group in probe_groups(list(configs), done.gold_probes).values():
        gscores = [by_gen[cid] for cid in group if cid in by_gen]
        if len(gscores) > 1 and generated and gscores[0].config_id != generated[0].config_id:
            comparisons += paired(gscores, answer_metrics)
    return comparisons


def failure_lines(configs: Sequence[ConfigRun]) -> tuple[str, ...]:
    """One line per distinct reason configs failed, naming how many and the endpoint."""
    by: dict[str, list[str]] = {}
    for c in configs:
        if c.failed_reason is not None:
            by.setdefault(c.failed_reason, []).append(c.spec.label)
    return tuple(f"{len(labels)} config{'s' if len(labels) != 1 else ''} failed "
                 f"({', '.join(labels[:3])}{', ...' if len(labels) > 3 else ''}): {why}"
                 for why, labels in by.items())


def measure_latency(done: Executed) -> LatencyRun:
    """The interleaved latency pass (bench.pipeline.latency) over the kept configs with
    query-time work; empty when ``latency.interleave`` is off. Configs with queries a served
    backend did not answer are left out (latency over a failing server is not the config's),
    and a backend that fails during the pass ends it with a warning: no latency figures."""
    settings = done.settings.latency
    if not settings.interleave:
        return LatencyRun({}, [])
    timed = [c for c in latency.timed_configs(done.configs)
             if c.pool is not None and not c.pool.incomplete]
    chains = [(c.spec.config_id, QueryChain(c.spec.chain, done.executor, done.dataset,
                                            done.device)) for c in timed]
    try:
        estimates, requests = latency.measure(timed, chains,
                                              [q.query_id for q in done.dataset.queries],
                                              settings)
    except ServiceError as exc:
        log.warning("latency pass stopped, no e2e figures: %s", exc.one_line())
        return LatencyRun({}, [])
    return LatencyRun(estimates, requests)


def _by_name(configs: Sequence[ConfigSpec]) -> dict[str, str]:
    """Config id by every name a rule may use: its id, and its label where unique."""
    labels = [c.label for c in configs]
    out = {c.config_id: c.config_id for c in configs}
    out.update({c.label: c.config_id for c in configs if labels.count(c.label) == 1})
    return out


def check_filter_metrics(flt: object, settings: RunSettings) -> None:
    """The hard-vs-soft rule reads precision@k and recall@k: both must be computed."""
    if not isinstance(flt, HardVsSoft):
        return
    missing = [m for m in (flt.precision_metric, flt.recall_metric)
               if m not in settings.metrics.names]
    if missing:
        raise ConfigError("filters.k", f"the hard-vs-soft rule reads {flt.precision_metric} "
                          f"and {flt.recall_metric}; add {', '.join(missing)} to metrics.names")


def check_decision_configs(settings: RunSettings, the_plan: Plan) -> None:
    """A pre-registered rule must name configs of this run (by id or unique label)."""
    names = _by_name(the_plan.configs)
    for i, rule in enumerate(settings.decisions):
        for side, name in (("baseline", rule.baseline), ("candidate", rule.candidate)):
            if name not in names:
                raise ConfigError(f"decisions[{i}].{side}",
                                  f"{name!r} is not a config of this run; its configs: "
                                  f"{', '.join(c.label for c in the_plan.configs)}")


def check_capacity_config(settings: RunSettings, the_plan: Plan) -> None:
    """``capacity.config`` must name a config of this run (or ``best_under_budget``), checked
    with the plan (``plan_only`` too), not after every config was computed."""
    from bench.capacity.run.in_process import BEST

    wanted = settings.capacity.config
    if not wanted or str(wanted) == BEST:
        return
    if all(c.config_id != str(wanted) for c in the_plan.configs):
        ids = ", ".join(f"{c.config_id} ({c.label})" for c in the_plan.configs)
        raise ConfigError("capacity.config", f"no config {str(wanted)!r} in this run; "
                                             f"configs: {ids}, or {BEST}")


def preregistered_decisions(done: Executed) -> list[DecisionRecord]:
    """The ``decisions:`` rules evaluated on the per-query values (paired, CI-judged)."""
    s = done.settings
    if not s.decisions:
        return []
    by_id = {sc.config_id: sc for sc in done.scores}
    scores = {name: by_id[cid] for name, cid in _by_name(done.plan.configs).items()}
    out = evaluate_decisions(s.decisions, scores, resamples=s.metrics.bootstrap_resamples,
                             confidence=s.metrics.confidence, seed=s.seed)
    for r in out:
        log.info("decision %s: %s %s over %s; %s", r.name, r.verdict.upper(), r.candidate,
                 r.baseline, "; ".join(r.reasons))
    return out


def check_budget_stages(comps: Components, the_plan: Plan, n_queries: int) -> None:
    """A stage ceiling must name a latency stage of this run's chains, and the probe sample
    must fit in the queries evaluated (before any work)."""
    from bench.budget.chain import ChainBudget
    from bench.config.build import OptionError

    if comps.budget is not None and comps.budget.probe_queries > n_queries:
        raise ConfigError("budget.probe_queries",
                          f"{comps.budget.probe_queries} probe queries, but this run evaluates "
                          f"{n_queries} queries: set budget.probe_queries <= {n_queries}")
    check_stage_budget(comps.budget, the_plan)
    if isinstance(comps.budget, ChainBudget):
        try:
            comps.budget.check_stages(the_plan.query_time_stages())
        except OptionError as exc:
            raise ConfigError(f"budget.{exc.option}", exc.message) from None


def execute_config(spec: ConfigSpec, the_plan: Plan, executor: Executor,
                   pruned: dict[str, str], data_timing: StageTiming,
                   dataset: Dataset | None = None, device: str = "cpu") -> ConfigRun:
    chain = spec.chain
    reason = next((pruned[n.key] for n in chain if n.key in pruned), None)
    if reason is not None:
        return ConfigRun(spec, None, (), (data_timing,), reason)
    try:
        resolved = tuple(executor.resolved(n) for n in chain)
        pool = executor.value(spec.pool_node)
    except ServiceError as exc:  # a backend its chain needs failed: this config fails alone
        why = exc.one_line()
        log.error("config %s %s failed: %s", spec.config_id, spec.label, why)
        n_q = 0 if dataset is None else len(dataset.queries)
        empty = Hits(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int32),
                     np.zeros(0, np.float32))
        lost = {} if dataset is None else {q.query_id: "failed" for q in dataset.queries}
        return ConfigRun(spec, Pool(empty, status=lost), (), (data_timing,),
                         failed_reason=why)
    assert isinstance(pool, Pool), f"config leaf {spec.label} is not a candidate pool"
    for n in the_plan.measured_with(chain):  # a latency measurement: not worth a config
        try:
            resolved = (*resolved, executor.resolved(n))
        except ServiceError as exc:
            log.warning("stage %-10s %s: not measured: %s", n.stage, n.label, exc.one_line())
    extra: dict[str, np.ndarray] = {}
    if pool.chunk_result is not None and the_plan.exact is not None:
        extra = ann_recall(pool.chunk_result, executor.value(the_plan.exact),
                           executor.value(the_plan.embed_docs),
                           executor.value(the_plan.embed_queries))
    timings = (data_timing, *(t for r in resolved for t in r.timings))
    if spec.answers is not None and dataset is not None:
        try:
            timings = (*timings, *answered_requests(spec, executor, dataset, device))
        except ServiceError as exc:
            log.warning("stage %-10s %s: whole-request latency not measured: %s", "request",
                        spec.label, exc.one_line())
    return ConfigRun(spec, pool, resolved, timings, None, extra)


def answered_requests(spec: ConfigSpec, executor: Executor, dataset: Dataset, device: str
                      ) -> list[StageTiming]:
    """A generated config's whole requests, retrieval part: its pool's query-time chain run
    alone for each answered query (``request`` samples). The pool's own per-query samples
    may be drawn on other queries (rerank latency: a seeded sample), so they cannot be
    added to these answers' generation times."""
    from bench.pipeline.request import QueryChain

    assert spec.answers is not None
    gens: list[Generation] = executor.value(spec.answers)
    chain = QueryChain(spec.pool_node.ancestors(), executor, dataset, device)
    with_chain = [g.request_id for g in gens]
    log.info("stage %-10s %s: %d answered queries' retrieval chains timed one by one "
             "(whole-request latency)", "request", spec.label, len(with_chain))
    return chain.timed(with_chain)


def memo_generators(comps: Components) -> list[MemoGenerator]:
    """The prompt memos of the run (``generation.memo``): the generator's, and the judge's
    when the judge asks another model."""
    out: list[MemoGenerator] = []
    for g in (comps.generator, None if comps.judge is None else judge_generator(comps.judge)):
        if isinstance(g, MemoGenerator) and all(g is not m for m in out):
            out.append(g)
    return out


def generation_settings(settings: RunSettings, comps: Components, dataset: Dataset
                        ) -> GenerationSettings | None:
    """What the plan needs to add answers to each pool config (None: no generator).

    A context option that reads the judgments draws the subset from the queries it can build
    a context for; the others are counted per reason (``GenerationSettings.scope``)."""
    if comps.generator is None or comps.context is None:
        return None
    g = settings.generation
    level = settings.metrics.relevance_level
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
    sweep = comps.generator_sweep
    return GenerationSettings(comps.generator, comps.context, sampling, subset, comps.judge,
                              tuple(g.kinds), level, scope, g.exact_reference,
                              () if sweep is None else sweep.members)


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


def filter_decisions(done: Executed) -> list[FilterDecisionRecord]:
    """The pre-registered hard-vs-soft rule for every lane run both ways."""
    f = done.comps.filters
    if not isinstance(f, HardVsSoft):
        return []
    settings = done.settings
    by_pair: dict[str, dict[str, tuple[ConfigRun, ConfigScores]]] = {}
    for c, s in zip(done.configs, done.scores, strict=True):
        if (c.spec.filter_pair is not None and c.pool is not None
                and c.spec.kind not in (ConfigKind.RERANKED, ConfigKind.GENERATED)):
            lane, mode = c.spec.filter_pair
            by_pair.setdefault(lane, {})[mode] = (c, s)
    quality = f.hard.predicate_quality(done.dataset,
                                       relevance_level=settings.metrics.relevance_level)
    log.info("filters predicate precision %s recall %s (%d extracted, %d labelled; against %s)",
             quality.precision, quality.recall, quality.n_extracted, quality.n_labelled,
             f.hard.label_source)
    out: list[FilterDecisionRecord] = []
    pm, rm = f.precision_metric, f.recall_metric
    for lane, pair in by_pair.items():
        if "hard" not in pair or "soft" not in pair:
            continue
        (hard_run, hard), (_, soft) = pair["hard"], pair["soft"]
        outcome = hard_run.filter_outcome
        assert outcome is not None
        try:  # the seed's rate (eligible corpus); the pool's is recorded beside it
            rate = outcome.exclusion_rates().query_rate
            pool_rate = outcome.pool_exclusion_rates().query_rate
        except BenchError as exc:
            out.append(FilterDecisionRecord(lane=lane, choice=None, error=exc.one_line()))
            continue
        d = f.hard.decide(hard.values[pm], soft.values[pm], exclusion_rate=rate,
                          recall_hard=float(np.mean(hard.values[rm])),
                          recall_soft=float(np.mean(soft.values[rm])), seed=settings.seed,
                          resamples=settings.metrics.bootstrap_resamples)
        fields: dict[str, Any] = dict(d.__dict__)
        for k in ("gain_ok", "exclusion_ok", "recall_ok"):
            fields.pop(k)
        out.append(FilterDecisionRecord(
            lane=lane, **fields, predicate_precision=quality.precision,
            predicate_recall=quality.recall, predicates_extracted=quality.n_extracted,
            predicates_labelled=quality.n_labelled, pool_exclusion_rate=pool_rate, k=f.k,
            predicate_labels=f.hard.label_source))
        log.info("filters decision for %s: %s %s", lane, d.choice.upper(),
                 "; ".join(d.reasons) or "(every condition met)")
    return out
