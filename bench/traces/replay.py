"""Shadow replay: production's queries sent to candidate configs served offline by
``bench.serve`` (never to users), compared with what production retrieved.

Without gold labels the comparison is agreement with production's ranking: overlap@k
(|top-k of both| / k, k = how many documents production retrieved) and rank-biased overlap
(RBO, Webber, Moffat & Zobel 2010, the extrapolated form for two lists of the same depth,
persistence p = 0.9; written by hand: the ``rbo`` package on PyPI is a 2023 single-author
release of the same few lines). Each candidate's latency under replay is the server-side
``total`` of its answers. The table pairs every candidate with production per query: mean
agreement with a bootstrap CI (``bench.metrics.stats``), p50 / p95 latency with bootstrap CIs.
Requests that fail are counted by reason, never scored.

``generate=True`` sends each query to ``/v1/answer`` instead (the candidate served with the
run's generator config): the row keeps the candidate's answer and the documents of its
prompt, for the judge metrics of ``bench.traces.judged``; its latency is then the answer's.
Every ok row keeps the candidate's ranked ids (``doc_ids``), for the labelled metrics of
reviewed rows (``bench.traces.quality``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.traces.record import TraceRecord


def overlap_at_k(a: Sequence[str], b: Sequence[str], k: int) -> float:
    return len(set(a[:k]) & set(b[:k])) / k if k else 0.0


def rbo(a: Sequence[str], b: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated RBO of two rankings cut to the same depth (the shorter one's)."""
    k = min(len(a), len(b))
    if k == 0:
        return 0.0
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    x = 0
    total = 0.0
    for d in range(1, k + 1):
        ia, ib = a[d - 1], b[d - 1]
        if ia == ib:
            x += 1
        else:
            x += (ia in seen_b) + (ib in seen_a)
        seen_a.add(ia)
        seen_b.add(ib)
        total += (x / d) * p ** d
    return float((x / k) * p ** k + (1 - p) / p * total)


@dataclass(frozen=True)
class ReplayRow:
    trace_id: str
    candidate: str
    status: str  # ok | error reason
    overlap: float | None = None
    rbo: float | None = None
    latency_ms: float | None = None
    doc_ids: tuple[str, ...] = ()
    #: with ``generate``: the candidate's answer and the documents its prompt held
    answer: str | None = None
    context_ids: tuple[str, ...] = ()


def replay(records: Sequence[TraceRecord], candidate: str, url: str, *,
           timeout_s: float = 120.0, generate: bool = False) -> list[ReplayRow]:
    """Every record's query sent to ``url``'s ``/v1/retrieve`` (k = production's depth), or
    with ``generate`` to its ``/v1/answer`` (not streamed)."""
    import httpx

    out = []
    with httpx.Client(base_url=url, timeout=timeout_s) as client:
        for r in records:
            prod = [d.doc_id for d in r.documents]
            if not prod:
                out.append(ReplayRow(r.trace_id, candidate, "no_production_documents"))
                continue
            body: dict[str, Any] = {"query": r.query, "k": len(prod)}
            if r.tenant:
                body["tenant"] = r.tenant
            if generate:
                body["stream"] = False
            try:
                resp = client.post("/v1/answer" if generate else "/v1/retrieve", json=body)
            except httpx.HTTPError as exc:
                out.append(ReplayRow(r.trace_id, candidate, f"http_error: {type(exc).__name__}"))
                continue
            if resp.status_code != 200:
                out.append(ReplayRow(r.trace_id, candidate, f"status_{resp.status_code}"))
                continue
            js = resp.json()
            cand = [h["doc_id"] for h in js["hits"]]
            out.append(ReplayRow(
                r.trace_id, candidate, "ok", overlap_at_k(prod, cand, len(prod)),
                rbo(prod, cand), float(js["timings_ms"]["total"]), tuple(cand),
                js.get("answer") if generate and js["generation"]["status"] == "ok" else None,
                tuple(dict.fromkeys(p["doc_id"] for p in js.get("context", ())))))
    return out


@dataclass(frozen=True)
class ReplaySummary:
    candidate: str
    n: int
    failed: dict[str, int]
    overlap: Any  # MeanCI
    rbo: Any  # MeanCI
    p50_ms: Any  # PercentileCI
    p95_ms: Any


def summarize(rows: Sequence[ReplayRow], *, seed: int = 0) -> list[ReplaySummary]:
    from bench.metrics.stats import bootstrap_ci, percentile_ci

    out = []
    for cand in dict.fromkeys(r.candidate for r in rows):
        mine = [r for r in rows if r.candidate == cand]
        ok = [r for r in mine if r.status == "ok"]
        failed = Counter(r.status for r in mine if r.status != "ok")
        if not ok:
            out.append(ReplaySummary(cand, 0, dict(failed), None, None, None, None))
            continue
        lat = np.array([r.latency_ms for r in ok], dtype=np.float64)
        out.append(ReplaySummary(
            cand, len(ok), dict(failed),
            bootstrap_ci(np.array([r.overlap for r in ok]), seed=seed),
            bootstrap_ci(np.array([r.rbo for r in ok]), seed=seed),
            percentile_ci(lat, 50, seed=seed), percentile_ci(lat, 95, seed=seed)))
    return out


def table(summaries: Sequence[ReplaySummary]) -> str:
    def ci(m: Any) -> str:
        return "-" if m is None else f"{m.mean:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}]"

    def pc(m: Any) -> str:
        return "-" if m is None else f"{m.value:.1f} [{m.ci_low:.1f}, {m.ci_high:.1f}]"

    head = ("| candidate | n | failed | overlap@k vs production | RBO (p=0.9) | p50 ms | "
            "p95 ms |\n|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {s.candidate} | {s.n} | {sum(s.failed.values())} | {ci(s.overlap)} | "
        f"{ci(s.rbo)} | {pc(s.p50_ms)} | {pc(s.p95_ms)} |\n" for s in summaries)
