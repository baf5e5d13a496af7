"""Score configs against the gold the caller may see, summarise, and compare them pairwise.

Every (config, query, metric) gets a status (``bench.pipeline.stages.query_statuses``). Means, CIs
and comparisons use only the queries whose status carries a value, metric by metric: a metric
absent for one query never drops that query from the other metrics, and a metric only some
configs have is compared only where both configs have it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench.data.base import Dataset
from bench.metrics.engine import Evaluation, Qrels, Run, evaluate
from bench.metrics.pairing import paired
from bench.metrics.power import mde
from bench.metrics.stats import PairedComparison, holm, paired_compare
from bench.pipeline.stages import valued_statuses
from bench.pipeline.statuses import unvalued
from bench.pipeline.summarize import summarize
from bench.results.records import Comparison, SummaryRow
from bench.results.scores import ConfigScores
from bench.retrieval.base import Hits


@dataclass(frozen=True)
class SummarySettings:
    category_weights: Mapping[str, float]
    resamples: int
    confidence: float
    seed: int


def run_of(dataset: Dataset, hits: Hits) -> Run:
    ids = np.asarray(dataset.doc_ids, dtype=object)
    return Run(
        query_ids=tuple(q.query_id for q in dataset.queries),
        offsets=hits.offsets,
        doc_ids=ids[hits.doc_idx],
        scores=hits.scores,
    )


def summarize_values(config_id: str, categories: Sequence[str],
                     values: Mapping[str, np.ndarray], statuses: Mapping[str, Sequence[str]],
                     s: SummarySettings, expected: Mapping[str, np.ndarray] | None = None
                     ) -> tuple[SummaryRow, ...]:
    rows: list[SummaryRow] = []
    cats = np.asarray(categories, dtype=object)
    valued = valued_statuses()
    for metric, vals in values.items():
        mask = np.asarray([x in valued for x in statuses[metric]], dtype=bool)
        if expected and metric in expected:
            mask &= expected[metric]
        rows += summarize(config_id, tuple(cats[mask]), {metric: np.asarray(vals)[mask]},
                          category_weights=s.category_weights, resamples=s.resamples,
                          confidence=s.confidence, seed=s.seed)
    return tuple(rows)


def score_hits(config_id: str, hits: Hits, extra: Mapping[str, np.ndarray], dataset: Dataset,
               qrels: Qrels, metrics: Sequence[str], *, relevance_level: int,
               settings: SummarySettings, pool_status: Mapping[str, str] | None = None
               ) -> ConfigScores:
    """Retrieval metrics of one pool; ``extra`` adds per-query metrics over ALL queries in
    dataset order (e.g. ann_recall@10); ``pool_status`` (``Pool.status``, by query id): a
    valued status other than ``scored`` (an iterative loop's ``budget_exhausted``) keeps the
    value, one without a value (a ranking that never came: ``failed`` / ``timeout`` /
    ``invalid``) carries that status and no value, never a 0; an empty ranking is
    ``missing_run`` unless its query carries a status without a value."""
    ev: Evaluation = evaluate(qrels, run_of(dataset, hits), list(metrics),
                              relevance_level=relevance_level)
    values = {m: np.asarray(v, dtype=np.float64) for m, v in ev.values.items()}
    if extra:
        pos = {q.query_id: i for i, q in enumerate(dataset.queries)}
        rows = np.asarray([pos[qid] for qid in ev.query_ids], dtype=np.int64)
        for name, per_query in extra.items():
            values[name] = np.asarray(per_query, dtype=np.float64)[rows]
    missing = set(ev.missing_runs)
    own = dict(pool_status or {})
    lost = unvalued(own)
    status = tuple(lost.get(q, "missing_run" if q in missing else own.get(q, "scored"))
                   for q in ev.query_ids)
    if lost:
        gone = np.asarray([q in lost for q in ev.query_ids], dtype=bool)
        for v in values.values():
            v[gone] = np.nan
    statuses = {m: status for m in values}
    cat_of = {q.query_id: q.category for q in dataset.queries}
    cats = tuple(cat_of[qid] for qid in ev.query_ids)
    return ConfigScores(config_id, tuple(ev.query_ids), cats, values, statuses,
                        summarize_values(config_id, cats, values, statuses, settings))


def expected_queries(dataset: Dataset, gold: Mapping[str, Mapping[str, int]],
                     relevance_level: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(query ids, categories) of the queries retrieval metrics average over: those with a
    relevant (eligible) document, in dataset order."""
    qs = [q for q in dataset.queries
          if any(g >= relevance_level for g in gold.get(q.query_id, {}).values())]
    return tuple(q.query_id for q in qs), tuple(q.category for q in qs)


def unscored(config_id: str, status: str, query_ids: tuple[str, ...],
             categories: tuple[str, ...], metrics: Sequence[str],
             settings: SummarySettings) -> ConfigScores:
    """A config that produced no values (pruned, failed): every query carries ``status``."""
    values = {m: np.full(len(query_ids), np.nan) for m in metrics}
    statuses = {m: tuple(status for _ in query_ids) for m in metrics}
    return ConfigScores(config_id, query_ids, categories, values, statuses,
                        summarize_values(config_id, categories, values, statuses, settings))


def compare(scored: Sequence[ConfigScores], metrics: Sequence[str], *, resamples: int,
            confidence: float, seed: int, power: float = 0.8) -> list[Comparison]:
    """Each config vs the first (the baseline), paired on the queries where both have a value,
    overall and per category; Holm-adjusted across configs per (metric, scope).

    Each row's ``mde`` is the paired effect the comparison detects with probability ``power``
    (bench.metrics.power: normal approximation from the SD of its deltas, at the Bonferroni
    level ``(1 - confidence) / m`` over the m configs of its Holm family — the conservative
    bound for Holm)."""
    if len(scored) < 2:
        return []
    base = scored[0]
    rows: list[Comparison] = []
    for metric in metrics:
        if metric not in base.values:
            continue
        scopes: dict[str, list[tuple[ConfigScores, PairedComparison, float]]] = {}
        for other in scored[1:]:
            a, b, cats = paired(base, other, metric)  # the one pairing rule
            if not len(a):
                continue
            for scope, mask in [("all", np.ones(len(a), bool))] + [
                (f"category:{c}", cats == c) for c in sorted(set(base.categories))
            ]:
                if mask.sum() == 0:
                    continue
                cmp = paired_compare(a[mask], b[mask], resamples=resamples, seed=seed,
                                     confidence=confidence)
                d = b[mask] - a[mask]
                sd = float(np.std(d, ddof=1)) if d.size > 1 else 0.0
                scopes.setdefault(scope, []).append((other, cmp, sd))
        for scope, items in scopes.items():
            adjusted = holm([c.p_value for _, c, _ in items])
            for (other, c, sd), p_adj in zip(items, adjusted, strict=True):
                rows.append(Comparison(base.config_id, other.config_id, scope, metric, c.n,
                                       c.mean_a, c.mean_b, c.delta, c.ci_low, c.ci_high,
                                       c.p_value, p_adj,
                                       mde=mde(sd, c.n, alpha=1.0 - confidence, power=power,
                                               comparisons=len(items))))
    return rows
