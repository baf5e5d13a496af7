"""What drift costs: the golden set's per-slice metric re-weighted to a traffic window's slice
mix, and the labelled metrics of replayed candidates on reviewed traffic.

**Slice re-weighting.** A slice is what the traces carry (route, category or tenant). The
golden set gives a per-slice mean of a metric (the run's own per-query values); a window gives
each slice's share of the traffic. The expected metric under the window's mix is
sum_s share_s * mean_s over the slices the golden set can score; the estimate's change
against the golden set's own mix (its plain mean over the same slices) is the expected
quality loss. Slices of the window that the golden set cannot score (none of its queries, or
no value: e.g. retrieval metrics on unanswerable questions) are listed with their traffic
share, not guessed. The CI is a percentile bootstrap (``scipy.stats.bootstrap``) that
resamples the window's requests and, independently, each slice's golden queries.

**Labelled metrics on reviewed traffic.** Reviewed rows (``bench.traces.review`` merged golden
rows) carry relevant documents: production's traced list and each candidate's replayed list
are scored with the usual metrics (``bench.metrics.engine.evaluate``) and paired per query
(``paired_compare``: candidate - production).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.data.base import Query


@dataclass(frozen=True)
class SliceRow:
    slice: str
    golden_n: int
    golden_mean: float | None  # None: no golden value in this slice
    golden_share: float
    traffic_share: float


@dataclass(frozen=True)
class Reweighted:
    """A window's expected metric from the golden set's slices, and its change against the
    golden mix (``delta`` = expected - golden, with a bootstrap CI)."""

    window: str
    metric: str
    requests: int
    golden: float
    expected: float
    delta: float
    ci_low: float
    ci_high: float
    covered_share: float  # of the window's requests, in slices the golden set scores
    slices: tuple[SliceRow, ...]


def reweight(values: Sequence[float], slices: Sequence[str], traffic: Sequence[str], *,
             window: str, metric: str, resamples: int = 1000, seed: int = 0,
             confidence: float = 0.95) -> Reweighted:
    """``values`` / ``slices``: the golden set's per-query values and slices (NaN: no value);
    ``traffic``: the slice of every request of the window."""
    from scipy.stats import bootstrap

    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(slices, dtype=object)
    if v.shape != s.shape:
        raise ValueError("values and slices differ in length")
    ok = np.isfinite(v)
    covered = list(dict.fromkeys(str(x) for x in s[ok]))
    if not covered:
        raise ValueError("no golden query has a value")
    groups = [v[ok & (s == c)] for c in covered]
    code = {c: i for i, c in enumerate(covered)}
    t = np.array([code.get(x, -1) for x in traffic], dtype=np.int64)
    t_cov = t[t >= 0]
    if t_cov.size == 0:
        raise ValueError(f"no request of window {window!r} is in a slice the golden set scores")
    g_w = np.array([len(g) for g in groups], dtype=np.float64)
    g_w /= g_w.sum()

    def stat(tc: np.ndarray, *gs: np.ndarray) -> float:
        means = np.array([g.mean() for g in gs])
        w = np.bincount(tc.astype(np.int64), minlength=len(gs)) / tc.size
        return float(w @ means - g_w @ means)

    def estimate(tc: np.ndarray) -> float:
        return float((np.bincount(tc, minlength=len(groups)) / tc.size)
                     @ np.array([g.mean() for g in groups]))

    delta = stat(t_cov, *groups)
    res = bootstrap((t_cov, *groups), stat, vectorized=False, paired=False,
                    n_resamples=resamples, confidence_level=confidence, method="percentile",
                    random_state=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not np.isfinite(lo):  # every resample equal (one value per slice): no spread
        lo = hi = delta
    n_all = Counter(str(x) for x in s)
    t_all = Counter(str(x) for x in traffic)
    rows = []
    for c in dict.fromkeys([*covered, *n_all, *t_all]):
        vals = v[ok & (s == c)]
        rows.append(SliceRow(c, int(n_all.get(c, 0)), float(vals.mean()) if vals.size else None,
                             n_all.get(c, 0) / len(s), t_all.get(c, 0) / len(traffic)))
    gold = float(g_w @ np.array([g.mean() for g in groups]))
    return Reweighted(window, metric, len(traffic), gold, estimate(t_cov), delta, lo, hi,
                      t_cov.size / len(traffic), tuple(rows))


def reweight_table(rows: Sequence[Reweighted]) -> str:
    head = ("| window | metric | requests | golden mix | window's mix | expected change [95 % CI] "
            "| traffic the golden set scores | not scored (share) |\n"
            "|---|---|---:|---:|---:|---|---:|---|\n")
    out = []
    for r in rows:
        miss = ", ".join(f"{x.slice} {x.traffic_share:.2f}" for x in r.slices
                         if x.golden_mean is None and x.traffic_share > 0) or "none"
        out.append(f"| {r.window} | {r.metric} | {r.requests} | {r.golden:.3f} | "
                   f"{r.expected:.3f} | {r.delta:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] | "
                   f"{r.covered_share:.2f} | {miss} |\n")
    return head + "".join(out)


# -- labelled metrics on reviewed rows ----------------------------------------------------------
LABELLED = ("ndcg@10", "recall@10", "hit_rate@10")


@dataclass(frozen=True)
class LabelledPair:
    candidate: str
    metric: str
    n: int
    comparison: Any  # PairedComparison (candidate - production)


def labelled(reviewed: Sequence[Query], lists: Mapping[str, Mapping[str, Sequence[str]]], *,
             production: str = "production", metrics: Sequence[str] = LABELLED,
             seed: int = 0, resamples: int = 1000) -> list[LabelledPair]:
    """``reviewed``: golden rows with relevant documents (query id ``trace-<trace id>``);
    ``lists``: side -> trace id -> its ranked document ids. Each candidate is paired with
    production over the reviewed queries both have a list for (a must-abstain row has no
    relevant document and no ranking metric)."""
    from bench.metrics.base import Qrels, Run
    from bench.metrics.engine import evaluate
    from bench.metrics.stats import paired_compare

    def tid(q: Query) -> str:
        return q.query_id.removeprefix("trace-")

    judged = [q for q in reviewed if any(g > 0 for _, g in q.qrels)]
    out = []
    for cand, ranked in lists.items():
        if cand == production:
            continue
        both = [q for q in judged if tid(q) in ranked and tid(q) in lists[production]]
        if not both:
            out += [LabelledPair(cand, m, 0, None) for m in metrics]
            continue
        qrels = Qrels.from_mapping({q.query_id: dict(q.qrels) for q in both})

        def run_of(side: str, qs: Sequence[Query] = both) -> Any:
            return Run.from_mapping({q.query_id: {d: float(-i) for i, d in enumerate(
                dict.fromkeys(lists[side][tid(q)]))} for q in qs})

        ev_p = evaluate(qrels, run_of(production), metrics)
        ev_c = evaluate(qrels, run_of(cand), metrics)
        for m in metrics:
            out.append(LabelledPair(cand, m, len(both), paired_compare(
                ev_p.values[m], ev_c.values[m], seed=seed, resamples=resamples)))
    return out


def labelled_table(rows: Sequence[LabelledPair]) -> str:
    head = ("| candidate | metric | reviewed queries | production | candidate | delta "
            "(candidate - production) [95 % CI] | p |\n|---|---|---:|---:|---:|---|---:|\n")
    out = []
    for r in rows:
        c = r.comparison
        if c is None:
            out.append(f"| {r.candidate} | {r.metric} | 0 | - | - | - | - |\n")
            continue
        out.append(f"| {r.candidate} | {r.metric} | {r.n} | {c.mean_a:.3f} | {c.mean_b:.3f} | "
                   f"{c.delta:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}] | {c.p_value:.3f} |\n")
    return head + "".join(out)
