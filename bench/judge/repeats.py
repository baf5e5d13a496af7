"""How much of a judge score is the judge's own noise: each item judged ``judge.repeats`` times.

``RepeatedJudge(judge, repeats)`` asks the same judge (a pointwise judge or a suite) about
every item ``repeats`` times, repeat ``r`` with sampling seed ``seed + 1000 r`` (the temperature is
the judge's own, from config; at temperature 0 with a deterministic backend every repeat gives
the same verdict and the split below is all query variation — a plumbing check). Each verdict
carries its ``repeat``. The per-query value of a judge metric is the mean over the repeats that
scored it (:func:`mean_over_repeats`), so ``repeats=1`` is the single verdict as before.

:func:`noise` splits the variance of single judgments of one metric into **query variation**
(the variance of the per-query means across queries) and **judge noise** (the mean
between-repeat variance within a query, ``ddof=1``), with the judge-noise share and the mean
coefficient of variation per query. :func:`two_level_ci` is the metric's mean with a
two-level bootstrap CI — resample the queries, then each drawn query's repeats — so the CI
includes the judge's noise, not only the sampling of queries.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from bench.config.build import OptionError
from bench.judge.base import Judge, JudgeItem, Verdict
from bench.metrics.base import SCORED, QueryValue
from bench.results.records import JudgeNoise
from bench.results.scores import ConfigScores

if TYPE_CHECKING:
    from bench.pipeline.scoring import SummarySettings


#: repeat r samples with the judge's seed + r * this: apart from the seeds the structured
#: caller's retries take (seed + attempt)
REPEAT_SEED_STRIDE = 1000


class RepeatedJudge:
    """``judge`` asked ``repeats`` (>= 2) times per item, repeat r with seed
    ``seed + r * REPEAT_SEED_STRIDE``."""

    def __init__(self, judge: Judge, repeats: int) -> None:
        if repeats < 2:
            raise OptionError("repeats", f"a repeated judge needs repeats >= 2, got {repeats}")
        self.inner = judge
        self.repeats = repeats
        self.name = judge.name
        self.metrics = judge.metrics

    def cache_params(self) -> dict[str, object]:
        return {**self.inner.cache_params(), "repeats": self.repeats}

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out: list[Verdict] = []
        for r in range(self.repeats):
            judge = self.inner if r == 0 else reseeded(self.inner, r * REPEAT_SEED_STRIDE)
            out += [replace(v, repeat=r) for v in judge.judge(items)]
        return out


def reseeded(judge: Judge, offset: int) -> Judge:
    """A shallow copy of ``judge`` whose sampling seed (every member's, for a suite) is its
    own plus ``offset``."""
    from bench.judge.llm import LLMJudge
    from bench.judge.suite import JudgeSuite
    from bench.judge.verifiers import Verifier

    if isinstance(judge, JudgeSuite):
        out = copy.copy(judge)
        out.judges = [reseeded(j, offset) for j in judge.judges]  # type: ignore[misc]
        return out
    if isinstance(judge, Verifier):
        return judge  # asks no model: every repeat gives the same verdict
    if isinstance(judge, LLMJudge):
        out_j = copy.copy(judge)
        out_j.sampling = replace(judge.sampling, seed=judge.sampling.seed + offset)
        return out_j
    raise TypeError(f"judge {judge.name!r} has no sampling seed to vary")


def mean_over_repeats(rows: Sequence[tuple[int, QueryValue]]) -> list[QueryValue]:
    """One row per (query, metric): the mean of the repeats' scored values; where no repeat
    scored it, the first repeat's row (its status says why). Order: first appearance."""
    groups: dict[tuple[str, str], list[tuple[int, QueryValue]]] = {}
    for r, v in rows:
        groups.setdefault((v.query_id, v.metric), []).append((r, v))
    out = []
    for items in groups.values():
        scored = [v for _, v in items if v.status == SCORED]
        if not scored:
            out.append(min(items, key=lambda x: x[0])[1])
        elif len(items) == 1:
            out.append(scored[0])
        else:
            out.append(replace(scored[0], value=float(np.mean([v.value for v in scored]))))
    return out


def per_query_repeats(rows: Sequence[tuple[int, QueryValue]], metric: str
                      ) -> dict[str, list[float]]:
    """query id -> the scored values of ``metric`` over its repeats."""
    out: dict[str, list[float]] = {}
    for _, v in rows:
        if v.metric == metric and v.status == SCORED:
            out.setdefault(v.query_id, []).append(float(v.value))
    return out


def two_level_ci(groups: Sequence[Sequence[float]], *, resamples: int, seed: int,
                 confidence: float) -> tuple[float, float]:
    """Percentile CI of the mean of per-query means, resampling queries and then each drawn
    query's repeats (with replacement at both levels)."""
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(g, dtype=np.float64) for g in groups]
    n = len(arrays)
    means = np.empty(resamples)
    for b in range(resamples):
        picked = rng.integers(0, n, size=n)
        means[b] = np.mean([arrays[i][rng.integers(0, arrays[i].size, arrays[i].size)].mean()
                            for i in picked])
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def noise(rows: Sequence[tuple[int, QueryValue]], metric: str, repeats: int, *,
          resamples: int, seed: int, confidence: float) -> JudgeNoise:
    groups = {q: v for q, v in per_query_repeats(rows, metric).items() if len(v) >= 2}
    if len(groups) < 2:
        return JudgeNoise(metric, repeats, len(groups), None, None, None, None, None, None,
                          None)
    vals = list(groups.values())
    q_means = np.asarray([np.mean(v) for v in vals])
    within = float(np.mean([np.var(v, ddof=1) for v in vals]))
    between = float(np.var(q_means, ddof=1))
    total = within + between
    cvs = [float(np.std(v, ddof=1) / np.mean(v)) for v in vals if np.mean(v) > 0]
    rng = np.random.default_rng(seed)
    boot = [q_means[rng.integers(0, q_means.size, q_means.size)].mean()
            for _ in range(resamples)]
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(boot, [tail, 1.0 - tail]))
    return JudgeNoise(metric, repeats, len(groups), float(q_means.mean()), between, within,
                      within / total if total > 0 else 0.0,
                      float(np.mean(cvs)) if cvs else None, (lo, hi),
                      two_level_ci(vals, resamples=resamples, seed=seed,
                                   confidence=confidence))


def repeat_rows(verdicts: Sequence[Verdict], metrics: Mapping[str, Sequence[str]]
                ) -> list[tuple[int, QueryValue]]:
    """(repeat, per-query row) of every verdict."""
    return [(v.repeat, row) for v in verdicts for row in v.values(metrics[v.judge])]



def repeat_summary(scores: ConfigScores, verdicts: Sequence[Verdict],
                   metrics: Mapping[str, tuple[str, ...]], repeats: int,
                   settings: SummarySettings
                   ) -> tuple[ConfigScores, tuple[JudgeNoise, ...]]:
    """With ``repeats`` >= 2: each judge metric's variance split, and ``scores`` whose summary
    CIs of that metric (scope ``all`` and each category) are the two-level bootstrap's, so
    they include the judge's noise. Unchanged with one repeat. ``metrics``: the metric
    names per judge name (``bench.judge.stage.judge_metrics``)."""
    if repeats < 2:
        return scores, ()
    rows = repeat_rows(verdicts, metrics)
    names = [m for ms in metrics.values() for m in ms]
    split = tuple(noise(rows, m, repeats, resamples=settings.resamples, seed=settings.seed,
                        confidence=settings.confidence) for m in names)
    cat_of = dict(zip(scores.query_ids, scores.categories, strict=True))
    summary = []
    for r in scores.summary:
        if r.metric not in names or not (r.scope == "all" or r.scope.startswith("category:")):
            summary.append(r)
            continue
        groups = [v for q, v in per_query_repeats(rows, r.metric).items()
                  if r.scope == "all" or f"category:{cat_of.get(q)}" == r.scope]
        if len(groups) < 2:
            summary.append(r)
            continue
        lo, hi = two_level_ci(groups, resamples=settings.resamples, seed=settings.seed,
                              confidence=settings.confidence)
        summary.append(replace(r, ci_low=lo, ci_high=hi))
    return replace(scores, summary=tuple(summary)), split
