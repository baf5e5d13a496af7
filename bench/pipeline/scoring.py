"""Score lanes against the gold the caller may see, summarise, and compare them pairwise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.data.base import Dataset
from bench.metrics.engine import Evaluation, Qrels, Run, evaluate
from bench.metrics.stats import CompletionAccounting, holm, paired_compare
from bench.pipeline.lanes import Lane
from bench.pipeline.summarize import SummaryRow, summarize
from bench.retrieval.base import Hits


@dataclass(frozen=True)
class Scored:
    """A lane's per-query values over the expected queries, with accounting and summary."""

    lane: Lane
    query_ids: tuple[str, ...]
    categories: tuple[str, ...]
    values: Mapping[str, np.ndarray]
    missing: tuple[str, ...]
    accounting: CompletionAccounting
    summary: tuple[SummaryRow, ...]


def run_of(dataset: Dataset, hits: Hits) -> Run:
    ids = np.asarray(dataset.doc_ids, dtype=object)
    return Run(
        query_ids=tuple(q.query_id for q in dataset.queries),
        offsets=hits.offsets,
        doc_ids=ids[hits.doc_idx],
        scores=hits.scores,
    )


def score_lane(
    lane: Lane,
    dataset: Dataset,
    qrels: Qrels,
    metrics: Sequence[str],
    *,
    relevance_level: int,
    category_weights: Mapping[str, float],
    resamples: int,
    confidence: float,
    seed: int,
) -> Scored:
    ev: Evaluation = evaluate(qrels, run_of(dataset, lane.hits), list(metrics),
                              relevance_level=relevance_level)
    values = dict(ev.values)
    if lane.extra:
        pos = {q.query_id: i for i, q in enumerate(dataset.queries)}
        rows = np.asarray([pos[qid] for qid in ev.query_ids], dtype=np.int64)
        for name, per_query in lane.extra.items():
            values[name] = np.asarray(per_query, dtype=np.float64)[rows]
    cat_of = {q.query_id: q.category for q in dataset.queries}
    cats = tuple(cat_of[qid] for qid in ev.query_ids)
    acc = CompletionAccounting(expected=len(ev.query_ids), scored=len(ev.query_ids),
                               missing=len(ev.missing_runs), timeout=0, invalid=0,
                               no_claims=0, pruned=0)
    summary = summarize(lane.config_id, cats, values, category_weights=category_weights,
                        resamples=resamples, confidence=confidence, seed=seed)
    return Scored(lane, tuple(ev.query_ids), cats, values, tuple(ev.missing_runs), acc,
                  tuple(summary))


def compare(scored: Sequence[Scored], metrics: Sequence[str], *, resamples: int,
            confidence: float, seed: int) -> list[dict[str, Any]]:
    """Each lane vs the first (the baseline) on the same queries, overall and per category;
    Holm-adjusted across lanes per (metric, scope)."""
    if len(scored) < 2:
        return []
    base = scored[0]
    rows: list[dict[str, Any]] = []
    for metric in metrics:
        scopes: dict[str, list[tuple[Scored, Any]]] = {}
        for other in scored[1:]:
            if other.query_ids != base.query_ids or metric not in other.values:
                continue
            a, b = base.values[metric], other.values[metric]
            cats = np.asarray(base.categories, dtype=object)
            for scope, mask in [("all", np.ones(len(a), bool))] + [
                (f"category:{c}", cats == c) for c in sorted(set(base.categories))
            ]:
                if mask.sum() == 0:
                    continue
                cmp = paired_compare(a[mask], b[mask], resamples=resamples, seed=seed,
                                     confidence=confidence)
                scopes.setdefault(scope, []).append((other, cmp))
        for scope, items in scopes.items():
            adjusted = holm([c.p_value for _, c in items])
            for (other, c), p_adj in zip(items, adjusted, strict=True):
                rows.append({
                    "baseline_config_id": base.lane.config_id,
                    "config_id": other.lane.config_id, "scope": scope, "metric": metric,
                    "n": c.n, "mean_baseline": c.mean_a, "mean_config": c.mean_b,
                    "delta": c.delta, "ci_low": c.ci_low, "ci_high": c.ci_high,
                    "p_value": c.p_value, "p_holm": p_adj,
                })
    return rows
