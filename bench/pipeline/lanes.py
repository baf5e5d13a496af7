"""Candidate lanes: every way this run produces a ranked ``Hits`` pool for all queries.

A lane is one config of the run (one ``config_id``): a dense search at one query-time setting,
the lexical (BM25) search, or a fusion of the two. All lanes answer the same queries, so the
report compares them pairwise per query. Filters are applied to every lane alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.cache.store import canonical_json
from bench.retrieval.base import Hits
from bench.telemetry.base import StageTiming


@dataclass(frozen=True)
class Ops:
    """Operational figures of a lane (None where the lane has no such measurement)."""

    qps: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    n_latency_samples: int = 0
    build_s: float | None = None
    index_bytes: int | None = None


@dataclass(frozen=True)
class Lane:
    config_id: str
    label: str
    kind: str  # dense | lexical | fused
    params: Mapping[str, Any]
    hits: Hits
    timings: tuple[StageTiming, ...]
    ops: Ops
    #: extra per-query metrics over ALL queries in dataset order (e.g. ann_recall@10)
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)


def config_id(pipeline: Mapping[str, Any], label: str) -> str:
    """Stable short id: the resolved stage configs plus this lane's label."""
    payload = canonical_json({"pipeline": pipeline, "lane": label})
    return hashlib.sha256(payload.encode()).hexdigest()[:10]


def label_of(kind: str, params: Mapping[str, Any]) -> str:
    if not params:
        return kind
    inner = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{kind}({inner})"


def ops_from(timings: tuple[StageTiming, ...] | list[StageTiming], stage: str) -> Ops:
    """QPS from batch samples; p50/p95/p99 from single-query samples."""
    batch = [t for t in timings if t.stage == stage and t.sample_kind == "batch"]
    single = np.asarray([t.wall_ms for t in timings
                         if t.stage == stage and t.sample_kind == "query"])
    qps = None
    if batch:
        total_ms = sum(t.wall_ms for t in batch)
        qps = sum(t.n_items for t in batch) / (total_ms / 1000.0) if total_ms > 0 else None
    if single.size:
        p50, p95, p99 = (float(x) for x in np.percentile(single, [50, 95, 99]))
        return Ops(qps, p50, p95, p99, int(single.size))
    return Ops(qps)


def params_json(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, default=str)
