"""``+experiment=capacity``: how many workers the chosen config needs at a traffic level.

After the run, one config (``capacity.config``: a config_id, or ``best_under_budget`` — the
kept config with the best mean of the first metric over all queries) is driven by the
closed-loop load generator (``bench.capacity.loadgen.run_levels``): request i runs query
``i mod n``'s whole request (query embedding, search, fold, fusion, filters, rerank — the
per-query chain the budget probe times — and for a generated config its context and answer:
``bench.pipeline.request.QueryChain(whole_request=True)``, what ``/v1/answer`` runs). Per level it
records throughput and e2e p50/p95/p99 (and TTFT once a chain streams); the answer "N workers
for T queries/s at p95 <= S ms" states the measurements and the linear scale-out assumption.
Output: ``capacity/`` (capacity.json, capacity.md, capacity.png) in the run dir and a
``capacity`` entry in run.json.

``capacity.load=open`` runs the capacity study instead (``bench.capacity.study``): the
generator's ceiling, the closed loop against an open loop at the same load, the knee search,
a sweep with quality under load, the checked scale-out and faults, against the chain in a
worker pool (``capacity.target=in_process``) or against ``bench.serve`` processes of the
config over HTTP (``capacity.target=serve``: ``/v1/answer`` for a generated config, else
``/v1/retrieve``; 2 processes for the scale-out check; the restart fault kills one).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from bench.capacity.base import CapacityRun, Slo
from bench.capacity.loadgen import plan, run_levels, write_capacity
from bench.capacity.run.http import check_endpoints, run_http_capacity
from bench.capacity.run.in_process import (
    answer_scorer,
    choose_config,
    run_open_capacity,
    study_settings,
)
from bench.config.schema import CapacityConfig
from bench.errors import ConfigError
from bench.pipeline.outcome import Executed
from bench.pipeline.request import QueryChain

log = logging.getLogger("bench")


def check_capacity(node: Any) -> None:
    """The study's settings from the config node, checked before any work (a bad value is
    one line naming its key, exit 2)."""
    from omegaconf import OmegaConf

    obj = OmegaConf.to_object(node)
    cap = obj if isinstance(obj, CapacityConfig) else CapacityConfig(**obj)  # type: ignore[arg-type]
    if cap.load not in ("closed", "open"):
        raise ConfigError("capacity.load", f"{cap.load!r}: closed or open")
    if cap.load == "open":
        study_settings(cap)
        answer_scorer((), cap.quality_metric)  # the metric's name; its queries come later
        if cap.target == "http":
            check_endpoints(cap, probe=True)


def run_capacity(done: Executed, run_dir: Path) -> CapacityRun:
    cap = done.settings.capacity
    if cap.load not in ("closed", "open"):
        raise ConfigError("capacity.load", f"{cap.load!r}: closed or open")
    if cap.load == "open":
        if cap.target == "http":
            return run_http_capacity(done, run_dir, study_settings(cap))
        return run_open_capacity(done, run_dir)
    i = choose_config(done, str(cap.config))
    spec = done.configs[i].spec
    # a generated config's whole request: retrieval, context, generation
    chain = QueryChain(spec.chain, done.executor, done.dataset, done.device, whole_request=True)
    chain(0)  # warm-up: first-call costs are not load
    try:
        slo = Slo(budget_ms=float(cap.slo_budget_ms), attainment=float(cap.attainment))
    except ValueError as exc:
        raise ConfigError("capacity", str(exc)) from None
    if any(int(u) < 1 for u in cap.concurrency) or not cap.concurrency:
        raise ConfigError("capacity.concurrency", "must list concurrency levels >= 1")
    log.info("capacity: driving %s %s at concurrency %s", spec.config_id, spec.label,
             list(cap.concurrency))
    levels = run_levels(chain.request, [int(u) for u in cap.concurrency], slo,
                        max_requests=int(cap.max_requests), max_seconds=float(cap.max_seconds),
                        stop_after_breaking=int(cap.stop_after_breaking))
    for lv in levels:
        log.info("capacity: %d users: %.1f req/s, e2e p50/p95/p99 %.1f/%.1f/%.1f ms",
                 lv.concurrency, lv.throughput_rps, lv.e2e_p50_ms, lv.e2e_p95_ms,
                 lv.e2e_p99_ms)
    answer = plan(levels, target_rps=float(cap.target_rps),
                  p95_budget_ms=float(cap.p95_budget_ms), slo=slo,
                  worker_kind=str(cap.worker_kind))
    files = write_capacity(levels, slo, answer, run_dir / "capacity")
    log.info("capacity: %s", answer.text)
    return CapacityRun(spec.config_id, spec.label,
                       "one query's whole chain: " + " > ".join(n.stage for n in spec.chain),
                       slo, answer, tuple(levels),
                       tuple(str(f.relative_to(run_dir)) for f in files))
