"""Per-document metric rows to means with bootstrap CIs, overall and per slice (document type,
layout, source): the aggregation the issue asks for "where it is a mean".

A row is a mapping with the slice keys (``type``, ``layout``...) and metric values; a metric a
row lacks (a document without tables has no TEDS) is left out of that metric's mean, never
counted as 0 or 1. The CI is ``bench.metrics.stats.bootstrap_ci`` (percentile bootstrap).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SliceMean:
    metric: str
    slice_key: str  # "" for all documents
    slice_value: str
    mean: float
    ci_low: float
    ci_high: float
    n: int


def summarise(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], *,
              by: Sequence[str] = ("type", "layout"), resamples: int = 1000,
              seed: int = 0) -> list[SliceMean]:
    """Mean and 95 % bootstrap CI of each metric over all rows and over each value of each
    ``by`` key; slices with no value for a metric are omitted."""
    from bench.metrics.stats import bootstrap_ci

    out: list[SliceMean] = []
    slices: list[tuple[str, str, list[Mapping[str, Any]]]] = [("", "", list(rows))]
    for key in by:
        for value in sorted({str(r[key]) for r in rows if key in r}):
            slices.append((key, value, [r for r in rows if str(r.get(key)) == value]))
    for metric in metrics:
        for key, value, members in slices:
            vals = np.array([float(r[metric]) for r in members
                             if r.get(metric) is not None], dtype=np.float64)
            if vals.size == 0:
                continue
            ci = bootstrap_ci(vals, resamples=resamples, seed=seed)
            out.append(SliceMean(metric, key, value, ci.mean, ci.ci_low, ci.ci_high, ci.n))
    return out
