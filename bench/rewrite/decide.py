"""Adopt, reject or "inconclusive" per rewriter and slice, against the pre-registered gain.

Each rewritten config is paired per query with its raw config (``parent_id``: the same lane
searched with the query as given), by the run's one pairing rule
(``bench.metrics.pairing.paired``) and the paired bootstrap CI of the delta
(``bench.metrics.stats.paired_compare``, the run's resamples, confidence and seed: the CIs of
comparisons.parquet). With ``rewriter.min_gain`` (metric, scope, delta), written in the
experiment before the run, at every slice:

- ADOPT when the CI's lower bound of the gain (in the metric's better direction) >= delta;
- REJECT when its upper bound < delta;
- INCONCLUSIVE otherwise.

The rewriter's verdict is the one at ``min_gain.scope``. Slices: ``all``; ``category:<c>``
for each category; ``low_confidence`` / ``high_confidence``: queries whose raw config's top-1
score is at or below / above the ``low_confidence_quantile`` of that config's top-1 scores
(a query with an empty pool counts as low); ``in_domain`` / ``out_of_domain`` from the
``in_domain`` categories or the ``domain_map`` file. The other metrics of the table
(Recall@10/@100, nDCG@10) get their delta and CI, not a verdict: one metric is
pre-registered.

Cost: the rewritten config's end-to-end p50 minus its raw config's (both from the run's
interleaved latency pass, so the first search, the rewrite and the second search are all in
it), and the generated tokens per query (prompt + output, summed over the samples). The
front: rewriters (and the raw query, at 0 added ms) not dominated on (min_gain's metric
mean, added p50).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data.jsonl import iter_jsonl, json_str
from bench.metrics.pairing import PerQueryScores, paired
from bench.metrics.registry import find_metric
from bench.metrics.stats import paired_compare
from bench.rewrite.suite import MinGain, RewriterSuite

if TYPE_CHECKING:
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.view import RunView

#: the metrics of the rewrite table (each with its paired delta and CI)
TABLE_METRICS = ("recall@10", "recall@100", "ndcg@10")
_SLACK = 1e-12


@dataclass(frozen=True)
class SliceCheck:
    """One (rewriter config, slice, metric): the paired gain over the raw query."""

    slice: str
    metric: str
    n: int
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    #: only for min_gain's metric: adopt | reject | inconclusive (None: fewer than 2 queries)
    verdict: str | None = None


@dataclass(frozen=True)
class RewriteOutcome:
    """One rewritten config against its raw config."""

    rewriter: str
    label: str
    config_id: str
    baseline_label: str
    baseline_config_id: str
    #: the verdict at min_gain's scope (None without a min_gain)
    verdict: str | None
    checks: tuple[SliceCheck, ...]
    mean: float | None  # min_gain's metric (or nDCG@10), over all paired queries
    baseline_mean: float | None
    added_p50_ms: float | None
    e2e_p50_ms: float | None
    prompt_tokens_per_query: float | None = None
    output_tokens_per_query: float | None = None
    failed_generations: int = 0
    on_front: bool = False


@dataclass(frozen=True)
class RewriteReport:
    min_gain: MinGain | None
    low_confidence_quantile: float
    confidence: float
    outcomes: tuple[RewriteOutcome, ...]
    #: the slices' sizes by raw config label (queries of the baseline in each slice)
    slice_sizes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"min_gain": None if self.min_gain is None else asdict(self.min_gain),
                "low_confidence_quantile": self.low_confidence_quantile,
                "confidence": self.confidence,
                "slice_sizes": {k: dict(v) for k, v in self.slice_sizes.items()},
                "outcomes": [asdict(o) for o in self.outcomes]}


def read_domain_map(path: str, known: set[str]) -> dict[str, bool]:
    """query_id -> in-domain from JSONL rows ``{"query_id": ..., "domain": "in" | "out"}``."""
    out: dict[str, bool] = {}
    for where, obj in iter_jsonl(path):
        for key in ("query_id", "domain"):
            if key not in obj:
                raise where.error(f"missing required field {key!r}")
        qid = json_str(obj["query_id"], "query_id", where)
        dom = json_str(obj["domain"], "domain", where)
        if dom not in ("in", "out"):
            raise where.error(f"domain must be 'in' or 'out', got {dom!r}")
        if qid in out:
            raise where.error(f"query_id {qid!r} is mapped twice")
        if qid not in known:
            raise where.error(f"query_id {qid!r} is not a query of this dataset")
        out[qid] = dom == "in"
    return out


def slice_masks(query_ids: Sequence[str], categories: np.ndarray, top1: Mapping[str, float],
                suite: RewriterSuite, domain: Mapping[str, bool] | None) -> dict[str, np.ndarray]:
    """bool masks over the paired queries, by slice name."""
    n = len(query_ids)
    masks: dict[str, np.ndarray] = {"all": np.ones(n, bool)}
    for c in sorted(set(categories.tolist())):
        masks[f"category:{c}"] = categories == c
    scores = np.asarray([top1.get(q, -math.inf) for q in query_ids], dtype=np.float64)
    finite = scores[np.isfinite(scores)]
    if finite.size:
        cut = float(np.quantile(finite, suite.low_confidence_quantile))
        low = ~np.isfinite(scores) | (scores <= cut)
        masks["low_confidence"], masks["high_confidence"] = low, ~low
    if domain is not None:
        inside = np.asarray([domain.get(q, False) for q in query_ids], bool)
        masks["in_domain"], masks["out_of_domain"] = inside, ~inside
    elif suite.in_domain is not None:
        inside = np.isin(categories, list(suite.in_domain))
        masks["in_domain"], masks["out_of_domain"] = inside, ~inside
    return masks


def _verdict(lo: float, hi: float, delta: float) -> str:
    if lo >= delta - _SLACK:
        return "adopt"
    if hi < delta - _SLACK:
        return "reject"
    return "inconclusive"


def check(a: PerQueryScores, b: PerQueryScores, metric: str, masks_of: Any,
          min_gain: MinGain | None, *, resamples: int, confidence: float, seed: int
          ) -> list[SliceCheck]:
    """Every slice of one metric for (raw ``a``, rewritten ``b``)."""
    va, vb, cats = paired(a, b, metric)
    if not len(va):
        return []
    # the queries ``paired`` kept, in its order (a's, where both carry a value)
    ok_a, ok_b = a.valued(metric), b.valued(metric)
    in_b = {q for j, q in enumerate(b.query_ids) if ok_b[j]}
    qids = [q for i, q in enumerate(a.query_ids) if ok_a[i] and q in in_b]
    masks = masks_of(qids, cats)
    spec = find_metric(metric)
    sign = -1.0 if spec is not None and not spec.higher_is_better else 1.0
    out = []
    for name, mask in masks.items():
        n = int(mask.sum())
        if n < 2:
            out.append(SliceCheck(name, metric, n, None, None, None))
            continue
        c = paired_compare(va[mask], vb[mask], resamples=resamples, seed=seed,
                           confidence=confidence)
        lo, hi = sorted((sign * c.ci_low, sign * c.ci_high))
        verdict = (_verdict(lo, hi, min_gain.delta)
                   if min_gain is not None and metric == min_gain.metric else None)
        out.append(SliceCheck(name, metric, n, sign * c.delta, lo, hi, verdict))
    return out


def pareto(points: Sequence[tuple[str, float, float]]) -> set[str]:
    """Names not dominated on (quality up, added ms down)."""
    front = set()
    for name, q, ms in points:
        if not any((q2 >= q and m2 <= ms) and (q2 > q or m2 < ms) for _, q2, m2 in points):
            front.add(name)
    return front


def report_of(suite: RewriterSuite, pairs: Sequence[tuple[str, str, str, PerQueryScores,
                                                          str, PerQueryScores]],
              top1: Mapping[str, Mapping[str, float]], categories: Mapping[str, str],
              e2e_p50: Mapping[str, float], tokens: Mapping[str, tuple[float, float, int]],
              *, resamples: int, confidence: float, seed: int,
              metrics: Sequence[str] = TABLE_METRICS) -> RewriteReport:
    """``pairs``: (rewriter name, rewritten label, raw label, raw scores, ..., rewritten
    scores) — see ``bench.rewrite.stage.rewrite_report`` for how a run fills them."""
    domain = None
    if suite.domain_map is not None:
        domain = read_domain_map(suite.domain_map, set(categories))
    mg = suite.min_gain
    main = mg.metric if mg is not None else "ndcg@10"
    table = list(dict.fromkeys([*(m for m in metrics), main]))
    outcomes: list[RewriteOutcome] = []
    sizes: dict[str, dict[str, int]] = {}
    for name, label, raw_label, a, _, b in pairs:
        t1 = top1.get(a.config_id, {})

        def masks_of(qids: Sequence[str], cats: np.ndarray, t1: Mapping[str, float] = t1
                     ) -> dict[str, np.ndarray]:
            return slice_masks(qids, cats, t1, suite, domain)

        checks = [c for m in table if m in a.values and m in b.values
                  for c in check(a, b, m, masks_of, mg, resamples=resamples,
                                 confidence=confidence, seed=seed)]
        sizes[raw_label] = {c.slice: c.n for c in checks if c.metric == main}
        verdict = None
        if mg is not None:
            at = next((c for c in checks if c.metric == mg.metric and c.slice == mg.scope),
                      None)
            verdict = at.verdict if at is not None and at.verdict else "inconclusive"
        va, vb, _ = paired(a, b, main)
        p50, base = e2e_p50.get(b.config_id), e2e_p50.get(a.config_id)
        pt, ot, failed = tokens.get(b.config_id, (None, None, 0))
        outcomes.append(RewriteOutcome(
            name, label, b.config_id, raw_label, a.config_id, verdict, tuple(checks),
            float(vb.mean()) if len(vb) else None, float(va.mean()) if len(va) else None,
            None if p50 is None or base is None else p50 - base, p50, pt, ot, failed))
    points = [(o.config_id, o.mean, o.added_p50_ms) for o in outcomes
              if o.mean is not None and o.added_p50_ms is not None]
    raws = {(o.baseline_config_id, o.baseline_mean) for o in outcomes
            if o.baseline_mean is not None}
    front = pareto([*points, *((cid, m, 0.0) for cid, m in raws)])
    outcomes = [o if o.config_id not in front else _on_front(o) for o in outcomes]
    return RewriteReport(mg, suite.low_confidence_quantile, confidence, tuple(outcomes), sizes)


def _on_front(o: RewriteOutcome) -> RewriteOutcome:
    from dataclasses import replace

    return replace(o, on_front=True)


def rewrite_report(done: RunView, latency: LatencyRun) -> RewriteReport | None:
    """The run's rewrite decisions (None when no rewriter ran)."""
    from bench.rewrite.stage import GenerateRewritesOp, Rewrites

    suite = done.component("rewriter")
    if not isinstance(suite, RewriterSuite):
        return None
    by_id = {c.spec.config_id: (c, s) for c, s in zip(done.configs, done.scores, strict=True)}
    pairs = []
    top1: dict[str, dict[str, float]] = {}
    tokens: dict[str, tuple[float, float, int]] = {}
    qids = [q.query_id for q in done.dataset.queries]
    for c, s in by_id.values():
        name = c.spec.params.get("rewriter")
        parent = c.spec.parent_id
        if not isinstance(name, str) or parent is None or parent not in by_id:
            continue
        raw, raw_scores = by_id[parent]
        if c.pool is None or raw.pool is None:
            continue
        pairs.append((name, c.spec.label, raw.spec.label, raw_scores, c.spec.label, s))
        hits = raw.pool.hits
        top1[parent] = {q: (float(hits.scores[hits.offsets[i]])
                            if hits.offsets[i + 1] > hits.offsets[i] else -math.inf)
                        for i, q in enumerate(qids)}
        gen = next((r.value for r in c.chain if isinstance(r.node.op, GenerateRewritesOp)),
                   None)
        if isinstance(gen, Rewrites) and len(gen.prompt_tokens):
            tokens[c.spec.config_id] = (float(gen.prompt_tokens.mean()),
                                        float(gen.output_tokens.mean()), int(gen.failed.sum()))
    if not pairs:
        return None
    e2e = {cid: e.p50.value for cid, e in latency.estimates.items()}
    m = done.settings.metrics
    return report_of(suite, pairs, top1, {q.query_id: q.category for q in done.dataset.queries},
                     e2e, tokens, resamples=m.bootstrap_resamples, confidence=m.confidence,
                     seed=done.settings.seed)
