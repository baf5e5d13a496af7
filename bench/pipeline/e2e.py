"""A config's end-to-end latency along its chain, from the timing samples of its ops: which
samples count (a generated config's whole requests stand for its retrieval chain), how a
stage timed only as a whole is shared out, and which queries have every stage sampled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from bench.pipeline.request import REQUEST
from bench.telemetry.base import StageTiming


def end_to_end_ms(timings: tuple[StageTiming, ...], stages: tuple[str, ...]) -> list[float]:
    """Per-query latency summed along the chain: each query-time latency stage's (``stages``:
    ``Plan.query_time_stages``) single-query sample of that query, plus an even share of
    those measured only as a whole (fusion, filters). Index-time stages never count. Queries
    missing a single-query sample of some stage are left out."""
    qids, per_stage = stage_ms_by_query(timings, stages)
    if not qids:
        return []
    return [float(x) for x in np.sum(list(per_stage.values()), axis=0)]


#: latency_source of e2e figures summed from the ops' own single-query samples
STAGE_SUM_SOURCE = "sum of stage samples"


#: latency_source of a generated config's e2e: its request samples (the retrieval chain run
#: alone per answered query) plus context assembly and generation
WHOLE_REQUEST_SOURCE = "whole request: chain + context + generation"


def e2e_timings(timings: Sequence[StageTiming], query_stages: tuple[str, ...]
                ) -> tuple[StageTiming, ...]:
    """The samples a config's end-to-end latency adds up. A generated config's whole
    requests: its ``request`` samples (the query-time chain run alone per answered query)
    stand for the query-time stages, plus its request stages' own samples (context,
    generation); any other config's samples as they are."""
    if not any(t.sample_kind == REQUEST for t in timings):
        return tuple(timings)
    return tuple(replace(t, sample_kind="query") if t.sample_kind == REQUEST else t
                 for t in timings
                 if t.sample_kind == REQUEST or t.stage not in query_stages)


def stage_ms_by_query(timings: Sequence[StageTiming], stages: tuple[str, ...]
                      ) -> tuple[list[str], dict[str, np.ndarray]]:
    """The queries ``end_to_end_ms`` sums over (sorted) and, per stage, each one's ms: its
    own single-query samples plus an even share of the stage's whole-stage samples."""
    per_stage: dict[str, dict[str, float]] = {}
    shared: dict[str, float] = {}
    for t in timings:
        if t.stage not in stages:
            continue
        if t.sample_kind == "query" and t.query_id is not None:
            # a chain may run a stage twice for one query (a second search after a query
            # rewrite): its samples add up
            mine = per_stage.setdefault(t.stage, {})
            mine[t.query_id] = mine.get(t.query_id, 0.0) + t.wall_ms
        elif t.sample_kind == "total" and t.n_items:
            shared[t.stage] = shared.get(t.stage, 0.0) + t.wall_ms / t.n_items
    if not per_stage:
        return [], {}
    common = sorted(set.intersection(*(set(v) for v in per_stage.values())))
    out = {st: np.asarray([v[q] for q in common], dtype=np.float64)
           for st, v in per_stage.items()}
    for st, ms in shared.items():
        out[st] = out.get(st, np.zeros(len(common))) + ms
    return common, out
