"""The iterative stage's results: iterations.parquet and the one-shot vs iterative table.

Per pair (one-shot config, its iterative twin) on the same corpus, queries and budgets:

- retrieval, paired per query (comparisons.parquet's rows for the pair): the run's first two
  ranking metrics, and **evidence coverage** — the share of a query's eligible gold among the
  documents it saw (one-shot: its pool; iterative: every turn's documents), paired here with
  the same bootstrap and sign-flip test;
- answers, where a generator runs on both pools: ``answer_correct`` and ``token_f1`` (and the
  citation judge's ``citation_precision`` / ``citation_recall`` when judged), paired on the
  queries both scored; a metric with fewer than 2 such queries shows each pool's own mean
  and n (citation precision is defined only for an answer that cites);
- cost: searches, query tokens and loop milliseconds per query, the interleaved latency
  pass's end-to-end p50 / p95 of both, and how many queries each stop ended (a budget's stop
  is ``budget_exhausted``);
- per category, the recall delta beside the answer delta and the searches spent: the extra
  searches help where the extra evidence changes the answer within the same limits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.filters.base import eligible_gold_idx
from bench.iterative.base import BUDGET_EXHAUSTED, BUDGET_STOPS
from bench.iterative.stage import LoopPool
from bench.metrics.pairing import paired
from bench.metrics.stats import PairedComparison, paired_compare
from bench.pipeline.lanes import ConfigKind
from bench.report.base import StageReport
from bench.report.fmt import num
from bench.results import schema
from bench.results.records import Comparison
from bench.results.scores import ConfigScores
from bench.results.write import write_records

if TYPE_CHECKING:
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.outcome import ConfigRun
    from bench.pipeline.view import RunView

ANSWER_METRICS = ("answer_correct", "token_f1", "citation_precision", "citation_recall")
TABLE = "iterations.parquet"


def _delta(c: PairedComparison | Comparison | None) -> str:
    if c is None:
        return "-"
    return f"{c.delta:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}] p={c.p_value:.3g} n={c.n}"


def coverage(evidence: Sequence[np.ndarray], gold: Sequence[np.ndarray]) -> np.ndarray:
    """Per query, |gold ∩ evidence| / |gold| (NaN without gold)."""
    out = np.full(len(gold), np.nan)
    for i, (ev, g) in enumerate(zip(evidence, gold, strict=True)):
        if len(g):
            out[i] = len(np.intersect1d(np.asarray(ev, np.int64), g)) / len(g)
    return out


def _own(scores: ConfigScores, metric: str) -> tuple[float | None, int]:
    """(mean, n) of ``metric`` over the queries ``scores`` valued it on (None, 0: none)."""
    if metric not in scores.values:
        return None, 0
    ok = scores.valued(metric)
    n = int(ok.sum())
    return (float(np.asarray(scores.values[metric], np.float64)[ok].mean()) if n else None), n


def _answers_of(done: RunView, leaf_key: str) -> ConfigScores | None:
    for c, s in zip(done.configs, done.scores, strict=True):
        if (c.spec.kind is ConfigKind.GENERATED and c.pool is not None
                and c.spec.pool is not None and c.spec.pool.key == leaf_key):
            return s
    return None


def write(done: RunView, run_dir: Path, comparisons: Sequence[Comparison],
          latency: LatencyRun) -> StageReport | None:
    by_id = {c.spec.config_id: (c, s) for c, s in zip(done.configs, done.scores, strict=True)}
    pairs: list[tuple[ConfigRun, ConfigRun]] = []
    for c in done.configs:
        if (isinstance(c.pool, LoopPool) and c.spec.kind is not ConfigKind.GENERATED
                and c.spec.parent_id in by_id):
            parent = by_id[c.spec.parent_id][0]
            if parent.pool is not None:
                pairs.append((parent, c))
    if not pairs:
        return None
    ds = done.dataset
    gold = eligible_gold_idx(ds, done.settings.metrics.relevance_level)
    rows: list[dict[str, Any]] = []
    lines = ["## Iterative retrieval vs one-shot", "",
             "Each iterative config against its one-shot parent on the same corpus, queries and "
             "index (turn 1 of the loop IS the one-shot search). Deltas are iterative minus "
             "one-shot, paired per query: mean [95 % bootstrap CI] and sign-flip p. Evidence "
             "coverage: share of a query's eligible gold among the documents it saw. "
             f"Per-turn records: `{TABLE}`. docs/routing-and-iterative.md.", ""]
    manifest: dict[str, Any] = {"pairs": []}
    m = done.settings.metrics
    ranking = [n for n in m.names][:2]
    for parent, it in pairs:
        pool = it.pool
        assert isinstance(pool, LoopPool)
        records = pool.records
        cats = [q.category for q in ds.queries]
        ph = parent.pool.hits if parent.pool is not None else None
        assert ph is not None
        cov_one = coverage([ph.for_query(q)[0] for q in range(len(ds.queries))], gold)
        cov_it = coverage([np.asarray(r.evidence, np.int64) for r in records], gold)
        for q, (query, r) in enumerate(zip(ds.queries, records, strict=True)):
            for t in r.turns:
                rows.append({"config_id": it.spec.config_id,
                             "parent_config_id": parent.spec.config_id,
                             "query_id": query.query_id, "category": query.category,
                             "turn": t.turn, "query_text": t.text, "turn_tokens": t.tokens,
                             "top_score": None if not np.isfinite(t.top_score) else t.top_score,
                             "new_docs": t.new_docs, "calls": r.calls, "tokens": r.tokens,
                             "loop_ms": r.wall_ms, "stop": r.stop, "status": r.status,
                             "evidence_docs": len(r.evidence),
                             "gold_coverage": None if np.isnan(cov_it[q]) else cov_it[q]})
        has = ~np.isnan(cov_one)
        cov_cmp = (paired_compare(cov_one[has], cov_it[has], resamples=m.bootstrap_resamples,
                                  seed=done.settings.seed, confidence=m.confidence)
                   if has.sum() > 1 else None)

        ids = (parent.spec.config_id, it.spec.config_id)

        def cmp(metric: str, scope: str = "all", ids: tuple[str, str] = ids
                ) -> Comparison | None:
            return next((c for c in comparisons if c.config_id == ids[1]
                         and c.baseline_config_id == ids[0]
                         and c.metric == metric and c.scope == scope), None)

        ans_one = _answers_of(done, parent.spec.leaf.key)
        ans_it = _answers_of(done, it.spec.leaf.key)
        answer: dict[str, PairedComparison | None] = {}
        # per answer metric the run scores: (mean, n) of each pool on its own scored
        # queries, and how many queries both scored (a judge's metric may apply to few:
        # citation precision only where an answer cites)
        answer_n: dict[str, tuple[float | None, int, float | None, int, int]] = {}
        if ans_one is not None and ans_it is not None:
            for metric in ANSWER_METRICS:
                if metric not in ans_one.values and metric not in ans_it.values:
                    continue
                a, b, _ = paired(ans_one, ans_it, metric)
                answer_n[metric] = (*_own(ans_one, metric), *_own(ans_it, metric), len(a))
                if len(a) > 1:
                    answer[metric] = paired_compare(a, b, resamples=m.bootstrap_resamples,
                                                    seed=done.settings.seed,
                                                    confidence=m.confidence)
        calls = np.asarray([r.calls for r in records], float)
        tokens = np.asarray([r.tokens for r in records], float)
        loop_ms = np.asarray([r.wall_ms for r in records], float)
        first_tokens = np.asarray([r.turns[0].tokens for r in records], float)
        stops = Counter(r.stop for r in records)
        n_exhausted = sum(r.status == BUDGET_EXHAUSTED for r in records)
        est = latency.estimates
        e_one, e_it = est.get(parent.spec.config_id), est.get(it.spec.config_id)
        loop = it.spec.params
        lines += [f"### `{it.spec.config_id}` {it.spec.label} vs `{parent.spec.config_id}` "
                  f"{parent.spec.label}", "",
                  f"Budgets per query: max_calls {loop.get('max_calls')}, max_tokens "
                  f"{loop.get('max_tokens')}, max_wall_ms {loop.get('max_wall_ms')}; "
                  f"{len(records)} queries, **{n_exhausted} budget_exhausted** (" +
                  ", ".join(f"{k}: {v}" for k, v in sorted(stops.items())) + ").", "",
                  "| measure | one-shot | iterative | delta (paired) |", "|---|---:|---:|---|"]
        for metric in ranking:
            rc = cmp(metric)
            lines.append(
                f"| {metric} | {num(None if rc is None else rc.mean_baseline, 3, finite=True)} | "
                f"{num(None if rc is None else rc.mean_config, 3, finite=True)} | {_delta(rc)} |")
        mean_one = float(np.nanmean(cov_one)) if has.any() else None
        mean_it = float(np.nanmean(cov_it)) if has.any() else None
        lines.append(f"| evidence coverage of gold | {num(mean_one, 3, finite=True)} | "
                     f"{num(mean_it, 3, finite=True)} | {_delta(cov_cmp)} |")
        for metric, (mean_a, n_a, mean_b, n_b, n_pair) in answer_n.items():
            pc = answer.get(metric)
            if pc is not None:
                lines.append(f"| {metric} (answers) | {num(pc.mean_a, 3, finite=True)} | "
                             f"{num(pc.mean_b, 3, finite=True)} | {_delta(pc)} |")
            else:  # too few queries scored on both for a paired CI: each pool's own mean
                lines.append(f"| {metric} (answers) | {num(mean_a, 3, finite=True)} (n={n_a}) | "
                             f"{num(mean_b, 3, finite=True)} (n={n_b}) | {n_pair} paired: no CI |")
        if not answer_n:
            lines.append("| answers | - | - | no generator on both pools (generation.kinds) |")
        lines += [f"| searches per query (mean) | 1 | {calls.mean():.2f} | |",
                  f"| query tokens per query (mean) | {first_tokens.mean():.1f} | "
                  f"{tokens.mean():.1f} | |",
                  f"| loop ms per query (mean, after turn 1) | 0 | {loop_ms.mean():.1f} | |",
                  f"| e2e p50 / p95 ms (interleaved pass) | "
                  f"{'-' if e_one is None else f'{e_one.p50.value:.1f} / {e_one.p95.value:.1f}'}"
                  f" | {'-' if e_it is None else f'{e_it.p50.value:.1f} / {e_it.p95.value:.1f}'}"
                  " | |",
                  f"| budget_exhausted queries | 0 | {n_exhausted} | |", ""]
        # per category: where the extra searches went and what they bought
        metric0 = ranking[1] if len(ranking) > 1 else ranking[0]
        recall = next((n for n in m.names if n.startswith("recall@")), metric0)
        lines += [f"Per category: {recall} and answer_correct deltas beside the searches spent.",
                  "", f"| category | n | searches (mean) | budget_exhausted | Δ {recall} | "
                  "Δ evidence coverage | Δ answer_correct |", "|---|---:|---:|---:|---|---|---|"]
        per_cat: dict[str, Any] = {}
        for cat in sorted(set(cats)):
            mask = np.asarray([c == cat for c in cats])
            cm = mask & has
            cc = (paired_compare(cov_one[cm], cov_it[cm], resamples=m.bootstrap_resamples,
                                 seed=done.settings.seed, confidence=m.confidence)
                  if cm.sum() > 1 else None)
            ac: PairedComparison | None = None
            if ans_one is not None and ans_it is not None:
                a, b, acats = paired(ans_one, ans_it, "answer_correct")
                sel = acats == cat
                if sel.sum() > 1:
                    ac = paired_compare(a[sel], b[sel], resamples=m.bootstrap_resamples,
                                        seed=done.settings.seed, confidence=m.confidence)
            ex = sum(1 for r, k in zip(records, mask, strict=True)
                     if k and r.stop in BUDGET_STOPS)
            lines.append(f"| {cat} | {int(mask.sum())} | {calls[mask].mean():.2f} | {ex} | "
                         f"{_delta(cmp(recall, f'category:{cat}'))} | {_delta(cc)} | "
                         f"{_delta(ac)} |")
            per_cat[cat] = {"n": int(mask.sum()), "searches_mean": float(calls[mask].mean()),
                            "budget_exhausted": ex}
        lines.append("")
        manifest["pairs"].append({
            "one_shot": parent.spec.config_id, "iterative": it.spec.config_id,
            "queries": len(records), "budget_exhausted": n_exhausted, "stops": dict(stops),
            "searches_mean": float(calls.mean()), "tokens_mean": float(tokens.mean()),
            "loop_ms_mean": float(loop_ms.mean()),
            "evidence_coverage": {"one_shot": mean_one, "iterative": mean_it},
            "answers": {k: None if v is None else v.__dict__ for k, v in answer.items()},
            "answers_scored": {k: {"one_shot": v[1], "iterative": v[3], "paired": v[4]}
                               for k, v in answer_n.items()},
            "categories": per_cat})
    write_records(rows, schema.ITERATIONS, run_dir / TABLE, done.run_id)
    return StageReport("iterative", (TABLE,), tuple(lines), manifest)
