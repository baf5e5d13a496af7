"""Apply the filter stage to every lane; the hard-vs-soft decision when both modes ran.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import numpy as np

from bench.data.base import Dataset
from bench.errors import BenchError, ConfigError
from bench.filters.hard_vs_soft import HardVsSoft
from bench.pipeline.context import RunContext
from bench.pipeline.lanes import Lane, config_id
from bench.pipeline.scoring import Scored
from bench.retrieval.base import order_key
from bench.telemetry.base import StageTiming

log = logging.getLogger("bench")



def apply_filters(ctx: RunContext, dataset: Dataset, lanes: list[Lane]) -> list[Lane]:
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


def filter_decisions(ctx: RunContext, scored: list[Scored]) -> list[dict[str, Any]]:
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


