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
from dataclasses import replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bench.cache.store import ArtifactStore
from bench.config.build import build
from bench.filters.base import eligible_gold
from bench.metrics.engine import Qrels
from bench.pipeline.context import (
    PIPELINE_GROUPS,
    RunContext,
    RunResult,
    build_components,
    validate_top_level,
)
from bench.pipeline.device import resolve_device
from bench.pipeline.filtering import apply_filters, filter_decisions
from bench.pipeline.produce import produce_lanes
from bench.pipeline.record import write_results
from bench.pipeline.scoring import Scored, compare, score_lane
from bench.telemetry.base import StageTiming, Telemetry
from bench.telemetry.basic import BasicTelemetry

log = logging.getLogger("bench")



def run(cfg: DictConfig, run_dir: Path) -> RunResult:
    t_start = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    validate_top_level(cfg)
    device = resolve_device(cfg.device)
    comps = build_components(cfg, device)
    telemetry: Telemetry = build(cfg.telemetry, "telemetry") or BasicTelemetry()
    ctx = RunContext(cfg, comps, ArtifactStore(Path(cfg.cache_dir).expanduser()), telemetry, device,
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


