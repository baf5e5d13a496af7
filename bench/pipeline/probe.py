"""Budget probes of whole chains before the full run, and the work pruning saved.

``probe_configs`` runs each config's query-time chain (``bench.pipeline.request``) on one
seeded query sample (after one untimed warm-up query), in plan order, so a base config is
probed before the reranked configs built on it. A config whose chain contains an already
pruned node is not probed: it is pruned by that prefix. The budget decides per config
(``bench.budget.chain.ChainBudget``: bootstrap lower bounds, not point estimates); what a
breach prunes is a node KEY: the node of the stage that broke a stage ceiling (the query
search: every config below it goes too), or the config's own leaf for end-to-end, cost and
VRAM ceilings. ``execute_config`` skips any config whose chain holds a pruned key.

``work_saved`` counts the plan nodes the run never resolved and estimates their seconds
from the probe's per-query means of the stages each node's op spends per query
(``work_stages``), x the queries it would have processed (``work_queries``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.budget.base import Budget
from bench.budget.chain import BudgetCheck
from bench.data.base import Dataset
from bench.pipeline.executor import Executor
from bench.pipeline.node import Node
from bench.pipeline.plan import ConfigSpec, Plan, prune_node
from bench.pipeline.request import QueryChain
from bench.rerank.stage import LATENCY_QUERIES
from bench.telemetry.base import Telemetry, peak_vram, stage_records

if TYPE_CHECKING:
    from bench.pipeline.components import Components
    from bench.pipeline.latency import Request

log = logging.getLogger("bench")


@dataclass(frozen=True)
class ConfigProbe:
    config_id: str
    label: str
    #: per-query milliseconds per probe stage, in sample order
    stage_ms: Mapping[str, tuple[float, ...]]
    e2e_ms: tuple[float, ...]
    peak_vram_bytes: int | None
    #: which figure peak_vram_bytes is: torch_peak_allocated | nvml_used | None (no GPU read)
    vram_measure: str | None
    checks: tuple[BudgetCheck, ...] = ()
    #: why the config is pruned (None: kept)
    pruned_reason: str | None = None
    #: the check that pruned it (None when kept or pruned by a prefix)
    pruned_check: BudgetCheck | None = None
    #: True when a pruned prefix made probing this config unnecessary
    by_prefix: bool = False
    #: the node key this config's own breach pruned (None when kept or by prefix)
    pruned_key: str | None = None

    def stage_mean_ms(self, stage: str) -> float | None:
        v = self.stage_ms.get(stage)
        return float(np.mean(v)) if v else None

    @property
    def e2e_mean_ms(self) -> float | None:
        return float(np.mean(self.e2e_ms)) if self.e2e_ms else None


@dataclass(frozen=True)
class ProbeOutcome:
    """Pruned node keys (-> reason) and each config's probe."""

    pruned: dict[str, str]
    configs: dict[str, ConfigProbe] = field(default_factory=dict)
    sample_query_ids: tuple[str, ...] = ()
    wall_s: float = 0.0
    budget: Any = None
    #: the stage probes run before the corpus work (``bench.pipeline.probe_stages``)
    stages: Any = None


def probe_sample(n_queries: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_queries, size=min(k, n_queries), replace=False))


def _vram(telemetry: Telemetry, stage: str) -> tuple[int | None, str | None]:
    """Peak VRAM of the probe's last watch of ``stage`` (None without a GPU reading)."""
    rec = next((r for r in reversed(stage_records(telemetry)) if r.stage == stage), None)
    peak = None if rec is None else peak_vram([rec])
    return (None, None) if peak is None else peak


def measure_chain(chain: QueryChain, sample: np.ndarray, telemetry: Telemetry,
                  watch_as: str) -> tuple[dict[str, list[float]], list[float], int | None,
                                          str | None]:
    chain(int(sample[0]))  # warm-up: first-call costs (model load, knob set) are not latency
    per: dict[str, list[float]] = {}
    e2e: list[float] = []
    with telemetry.watch(watch_as):
        for q in sample:
            times, _ = chain(int(q))
            for s, ms in times.items():
                per.setdefault(s, []).append(ms)
            e2e.append(sum(times.values()))
    vram, measure = _vram(telemetry, watch_as)
    return per, e2e, vram, measure


def _prune_key(spec: ConfigSpec, check: BudgetCheck) -> str:
    if check.stage is not None:
        return prune_node(spec, check.stage).key
    return spec.leaf.key


def probe_configs(comps: Components, the_plan: Plan, executor: Executor, dataset: Dataset,
                  device: str, telemetry: Telemetry,
                  pruned_before: Mapping[str, str] | None = None) -> ProbeOutcome:
    """``pruned_before``: node keys the stage probes pruned already (their configs are
    pruned by that prefix, not probed)."""
    budget: Budget | None = comps.budget
    if budget is None or not the_plan.configs:
        return ProbeOutcome(dict(pruned_before or {}))
    t0 = time.perf_counter()
    seed = budget.seed
    sample = probe_sample(len(dataset.queries), budget.probe_queries, seed)
    pruned: dict[str, str] = dict(pruned_before or {})
    probes: dict[str, ConfigProbe] = {}
    for spec in the_plan.configs:
        prefix = next((pruned[n.key] for n in spec.chain if n.key in pruned), None)
        key: str | None = None
        if prefix is not None:
            probes[spec.config_id] = ConfigProbe(spec.config_id, spec.label, {}, (), None, None,
                                                 (), f"pruned prefix: {prefix}", None, True)
            continue
        chain = QueryChain(spec.chain, executor, dataset, device)
        per, e2e, vram, measure = measure_chain(chain, sample, telemetry,
                                                f"probe {spec.config_id}")
        stage_ms = {s: tuple(v) for s, v in per.items()}
        checks = tuple(budget.judge({s: np.asarray(v) for s, v in per.items()},
                                    np.asarray(e2e), vram))
        over = next((c for c in checks if c.over), None)
        reason = None if over is None else over.describe()
        if over is not None:
            key = _prune_key(spec, over)
            pruned[key] = reason or ""
        probes[spec.config_id] = ConfigProbe(spec.config_id, spec.label, stage_ms, tuple(e2e),
                                             vram, measure, checks, reason, over, False,
                                             key if reason is not None else None)
        log.info("budget %s %s: %s — %s", spec.config_id, spec.label,
                 "keep" if reason is None else "PRUNED",
                 reason or "; ".join(c.describe() for c in checks) or "within budget")
    return ProbeOutcome(pruned, probes, tuple(dataset.queries[int(q)].query_id for q in sample),
                        time.perf_counter() - t0, budget)


def _node_seconds(node: Node, probes: list[ConfigProbe], n_queries: int) -> float | None:
    work = node.op.work_stages
    if not work:
        return None
    means = []
    for p in probes:
        ms = [p.stage_mean_ms(s) for s in work]
        if all(m is not None for m in ms):
            means.append(sum(m for m in ms if m is not None))
    if not means:
        return None
    return float(np.mean(means)) * node.op.work_queries(n_queries) / 1000.0


def work_saved(the_plan: Plan, executor: Executor, probe: ProbeOutcome,
               n_queries: int) -> dict[str, Any]:
    """Plan nodes never resolved (stage computations avoided) and their estimated seconds,
    against resolving every node of the plan."""
    done = {r.node.key for r in executor.resolutions}
    nodes = the_plan.nodes()
    users: dict[str, list[ConfigProbe]] = {}
    for spec in the_plan.configs:
        p = probe.configs.get(spec.config_id)
        for n in spec.chain:
            lst = users.setdefault(n.key, [])
            if p is not None and p.stage_ms:
                lst.append(p)
    skipped = [n for n in nodes if n.key not in done]
    by_stage: dict[str, int] = {}
    saved_s = 0.0
    total_s = 0.0
    unknown = 0
    for n in nodes:
        est = _node_seconds(n, users.get(n.key, []), n_queries)
        if est is not None:
            total_s += est
        if n.key not in done:
            by_stage[n.stage] = by_stage.get(n.stage, 0) + 1
            if est is None:
                unknown += 1
            else:
                saved_s += est
    pruned_configs = sum(1 for s in the_plan.configs
                         if any(n.key in probe.pruned for n in s.chain))
    return {
        "configs": len(the_plan.configs), "configs_pruned": pruned_configs,
        "nodes_total": len(nodes), "nodes_resolved": len(nodes) - len(skipped),
        "nodes_skipped": len(skipped), "skipped_by_stage": by_stage,
        "seconds_saved_estimate": saved_s, "seconds_all_query_time_estimate": total_s,
        "nodes_skipped_without_estimate": unknown, "probe_wall_s": probe.wall_s,
        "how": "skipped = plan nodes never resolved; seconds = the probe's mean per-query "
               "time of the node's stages x the queries the node processes (rerank latency "
               f"nodes: {LATENCY_QUERIES}); search counted once per query (the full run also "
               "times single queries after the batch pass, so this underestimates)",
    }


def full_run_figure(check: BudgetCheck, requests: Sequence[Request],
                    price_per_hour: float | None) -> float | None:
    """What the latency pass measured (its timed, not warm-up, requests of one config) for
    the figure ``check`` bounded on the probe sample; None when the pass does not measure it
    (peak VRAM) or timed no request of the config (a generated config: its whole request is
    the generation stage's)."""
    timed = [r for r in requests if not r.warmup]
    if check.stage is not None:
        ms = [v for r in timed for s, v in r.stage_ms if s == check.stage]
        return float(np.percentile(ms, 95)) if ms else None
    e2e = [r.e2e_ms for r in timed]
    if not e2e:
        return None
    if check.name == "e2e_p95_ms":
        return float(np.percentile(e2e, 95))
    if check.name == "cost_per_query" and price_per_hour is not None:
        return float(np.mean(e2e)) * price_per_hour / 3_600_000.0
    return None


def chain_validation_rows(probe: ProbeOutcome, requests: Sequence[Request]
                          ) -> list[dict[str, Any]]:
    """``budget.validate``: every ceiling the chain probe checked, config by config, against
    the full run's latency pass — the rows of ``budget_probes.json``'s ``validation`` with
    kind ``chain``. The probe's bound is one-sided (the bootstrap lower bound that pruning
    compares with the ceiling), so ``upper`` is None and ``within_bounds`` is whether that
    lower bound held; a config pruned although the full run measured it within the ceiling is
    a ``wrong_prune``."""
    by_config: dict[str, list[Request]] = {}
    for r in requests:
        by_config.setdefault(r.config_id, []).append(r)
    price = getattr(probe.budget, "price_per_hour", None)
    rows: list[dict[str, Any]] = []
    for p in probe.configs.values():
        for c in p.checks:
            m = full_run_figure(c, by_config.get(p.config_id, ()), price)
            held = None if m is None else bool(c.bound <= m)
            rows.append({
                "kind": "chain", "label": f"{p.config_id} {p.label}", "name": c.name,
                "predicted": c.measured, "lower": c.bound, "upper": None, "measured": m,
                "rel_error": None if m is None or m == 0 else (c.measured - m) / m,
                "within_bounds": held, "lower_bound_held": held,
                "ceiling": c.name, "limit": c.limit, "pruned": c.over,
                "wrong_prune": bool(c.over and m is not None and m <= c.limit)})
    return rows


def probe_json(probe: ProbeOutcome) -> list[dict[str, Any]]:
    out = []
    for p in probe.configs.values():
        e2e = np.asarray(p.e2e_ms)
        out.append({
            "config_id": p.config_id, "label": p.label, "pruned_reason": p.pruned_reason,
            "by_prefix": p.by_prefix, "n_queries": len(p.e2e_ms),
            "e2e_p50_ms": float(np.percentile(e2e, 50)) if e2e.size else None,
            "e2e_p95_ms": float(np.percentile(e2e, 95)) if e2e.size else None,
            "stage_p95_ms": {s: float(np.percentile(v, 95)) for s, v in p.stage_ms.items()},
            "peak_vram_bytes": p.peak_vram_bytes, "vram_measure": p.vram_measure,
            "checks": [{"name": c.name, "limit": c.limit, "measured": c.measured,
                        "bound": c.bound, "over": c.over} for c in p.checks]})
    return out
