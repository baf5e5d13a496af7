"""Per-level metrics under ``vllm bench serve``'s names and definitions, goodput, and
quality-goodput; a result JSON a ``--save-result`` user reads side by side, and an importer
for vLLM's own result JSON.

Definitions (vLLM ``benchmarks/serve.py``): over successful requests, TTFT = first content
chunk - send; TPOT = (E2EL - TTFT) / (output tokens - 1) for requests of >= 2 tokens; ITL =
every gap between consecutive chunks, pooled over requests; E2EL = end - send; each as mean,
median, std (population, ``np.std``) and percentiles (``np.percentile``, linear). One
deliberate difference, named in the JSON (``latency_origin: "intended"``): our TTFT and
E2EL count from the request's INTENDED send time, so queueing in front of the target (a slot
wait, a late send) is latency — vLLM counts from the actual send. For a closed loop the two
coincide. ``request_throughput`` = completed / duration; ``duration`` = start of the level
to the last request's end.

Goodput (DistServe's, vLLM's ``--goodput``): requests per second that completed AND met
every configured SLO (``ttft``, ``tpot``, ``e2el`` in ms; a request of < 2 tokens has TPOT 0
for goodput, as in vLLM). ``goodput_fraction`` = those / ALL scheduled requests (failed,
timed-out and rate-limited ones count against it). Quality-goodput: the same, AND the answer
is correct by the configured answer metric (``score(query, answer) >= threshold``,
:mod:`bench.capacity.quality`). Quality under load: the metric's mean over ALL scheduled
requests (no answer scores 0: delivered quality) and its mean per query, for pairing
against the unloaded run; the quality-goodput share's Wilson 95 % interval.

Honest streams (:class:`bench.capacity.schedule.QueryStream`): ``repeats`` counts requests
whose query this target was asked before (in the study or earlier in the level), and
E2EL is reported apart for first-seen and repeated queries (``e2el_fresh`` /
``e2el_repeat``): a server cache shows as the gap. ``tail``: E2EL p99 and p99.9 with a
distribution-free 95 % interval (order statistics, the normal approximation of the binomial
ranks); a percentile is given only where the level has a sample beyond it
(n >= 1 / (1 - q)), and its interval's high end is None where the rank falls past the
largest sample.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.capacity.driver import STATUSES, LevelRun, RequestRecord
from bench.errors import InputError

PERCENTILES = (50.0, 90.0, 95.0, 99.0)
SLO_KEYS = ("ttft", "tpot", "e2el")
Scorer = Callable[[int, str | None], float]


@dataclass(frozen=True)
class Dist:
    """mean / median / std / percentiles (ms) of one latency over ``n`` values."""

    n: int
    mean: float | None
    median: float | None
    std: float | None
    percentiles: dict[str, float | None]

    @staticmethod
    def of(values: Sequence[float]) -> Dist:
        if not values:
            return Dist(0, None, None, None, {f"p{p:g}": None for p in PERCENTILES})
        v = np.asarray(values, dtype=np.float64)
        return Dist(int(v.size), float(v.mean()), float(np.median(v)), float(v.std()),
                    {f"p{p:g}": float(np.percentile(v, p)) for p in PERCENTILES})


@dataclass(frozen=True)
class LevelMetrics:
    """What one level measured. ``offered_rps``: the schedule's rate (scheduled requests /
    last intended send); ``achieved_rps``: completed requests / duration."""

    label: str
    mode: str
    offered_rps: float
    achieved_rps: float
    burstiness: float | None
    max_concurrency: int | None
    n_requests: int
    completed: int
    statuses: dict[str, int]
    duration_s: float
    ttft: Dist
    tpot: Dist
    itl: Dist
    e2el: Dist
    #: how late requests left against the schedule (a slot wait, retries, generator lag)
    send_lag: Dist
    slo_ms: dict[str, float]
    good: int
    goodput_rps: float
    goodput_fraction: float
    #: None when no answer metric is configured
    correct: int | None = None
    quality_good: int | None = None
    quality_goodput_rps: float | None = None
    quality_goodput_fraction: float | None = None
    retries: int = 0
    #: the answer metric's mean over all scheduled requests (no answer: 0), and per query
    quality_mean: float | None = None
    quality_by_query: dict[int, float] = field(default_factory=dict)
    #: imported from another tool's JSON (vLLM): what it was
    source: str = "bench"
    extra: dict[str, Any] = field(default_factory=dict)
    #: requests whose query the target was asked before, and E2EL apart for each kind
    repeats: int = 0
    e2el_fresh: Dist = field(default_factory=lambda: Dist.of([]))
    e2el_repeat: Dist = field(default_factory=lambda: Dist.of([]))
    #: E2EL p99 / p99.9 with their 95 % interval (see the module docstring)
    tail: dict[str, dict[str, float | None]] = field(default_factory=dict)
    #: Wilson 95 % interval of the quality-goodput share (None without a metric)
    quality_goodput_ci: tuple[float, float] | None = None

    def rate(self, status: str) -> float:
        return self.statuses.get(status, 0) / self.n_requests if self.n_requests else 0.0

    def to_vllm(self) -> dict[str, Any]:
        """The level as a ``vllm bench serve --save-result`` JSON, plus our own fields."""
        out: dict[str, Any] = {
            "backend": "bench", "label": self.label,
            "request_rate": self.offered_rps if math.isfinite(self.offered_rps) else "inf",
            "burstiness": self.burstiness, "max_concurrency": self.max_concurrency,
            "num_prompts": self.n_requests, "duration": self.duration_s,
            "completed": self.completed, "failed": self.n_requests - self.completed,
            "total_output_tokens": int(self.extra.get("total_output_tokens", 0)),
            "request_throughput": self.achieved_rps,
            "request_goodput": self.goodput_rps if self.slo_ms else None,
        }
        for name in ("ttft", "tpot", "itl", "e2el"):
            d: Dist = getattr(self, name)
            out[f"mean_{name}_ms"] = d.mean
            out[f"median_{name}_ms"] = d.median
            out[f"std_{name}_ms"] = d.std
            for p, v in d.percentiles.items():
                out[f"{p}_{name}_ms"] = v
        out["bench"] = {"mode": self.mode, "latency_origin": "intended" if self.mode == "open"
                        else "send", "offered_rps": self.offered_rps,
                        "achieved_rps": self.achieved_rps, "statuses": self.statuses,
                        "slo_ms": self.slo_ms, "goodput_fraction": self.goodput_fraction,
                        "correct": self.correct, "quality_good": self.quality_good,
                        "quality_goodput_rps": self.quality_goodput_rps,
                        "quality_goodput_fraction": self.quality_goodput_fraction,
                        "retries": self.retries, "quality_mean": self.quality_mean,
                        "send_lag_ms": asdict(self.send_lag),
                        "source": self.source}
        return out


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a share k / n (95 % by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def tail_ci(values: Sequence[float], q: float, z: float = 1.959964
            ) -> dict[str, float | None] | None:
    """The q-quantile of ``values`` and a distribution-free 95 % interval: the order
    statistics at ranks n q -/+ z sqrt(n q (1 - q)) (normal approximation of the binomial).
    None when the level has no sample beyond the quantile (n < 1 / (1 - q)); the high end
    None when its rank is past the largest sample."""
    n = len(values)
    if n == 0 or n * (1 - q) < 1:
        return None
    v = np.sort(np.asarray(values, dtype=np.float64))
    half = z * math.sqrt(n * q * (1 - q))
    lo_rank = math.floor(n * q - half)  # 1-based ranks
    hi_rank = math.ceil(n * q + half) + 1
    return {"value": float(np.percentile(v, 100 * q)), "n": float(n),
            "ci_low": float(v[lo_rank - 1]) if lo_rank >= 1 else None,
            "ci_high": float(v[hi_rank - 1]) if hi_rank <= n else None}


def is_good(r: RequestRecord, slo_ms: Mapping[str, float]) -> bool:
    """Completed and within every SLO (vLLM: a request of < 2 tokens has TPOT 0)."""
    if r.status != "ok":
        return False
    values = {"ttft": r.ttft_ms if r.ttft_ms is not None else r.e2el_ms,
              "tpot": r.tpot_ms if r.tpot_ms is not None else 0.0, "e2el": r.e2el_ms}
    return all(values[k] <= v for k, v in slo_ms.items())


def check_slo(slo_ms: Mapping[str, float], key: str = "capacity.slo_ms") -> dict[str, float]:
    from bench.errors import ConfigError

    out = {}
    for k, v in slo_ms.items():
        if k not in SLO_KEYS:
            raise ConfigError(f"{key}.{k}", f"unknown SLO; use {', '.join(SLO_KEYS)} (ms)")
        if not float(v) > 0:
            raise ConfigError(f"{key}.{k}", f"must be > 0 ms, got {v}")
        out[k] = float(v)
    return out


def summarize(run: LevelRun, *, slo_ms: Mapping[str, float], label: str = "",
              score: Scorer | None = None, threshold: float = 0.5) -> LevelMetrics:
    recs = run.records
    ok = [r for r in recs if r.status == "ok"]
    n = len(recs)
    dur = run.duration_s if run.duration_s > 0 else float("nan")
    good = [r for r in recs if is_good(r, slo_ms)]
    statuses: dict[str, int] = {s: sum(r.status == s for r in recs) for s in STATUSES}
    q_correct = q_good = q_mean = None
    by_query: dict[int, float] = {}
    if score is not None:
        values = [score(r.query, r.answer) if r.status == "ok" else 0.0 for r in recs]
        right = [v >= threshold for v in values]
        good_idx = {r.index for r in good}
        q_correct = sum(right)
        q_good = sum(1 for r, c in zip(recs, right, strict=True) if c and r.index in good_idx)
        q_mean = float(np.mean(values)) if values else None
        per: dict[int, list[float]] = {}
        for r, v in zip(recs, values, strict=True):
            per.setdefault(r.query, []).append(v)
        by_query = {q: float(np.mean(v)) for q, v in per.items()}
    sched = run.schedule
    offered = n / sched.span_s if sched.span_s > 0 else float("inf")
    seen = (sched.seen if sched.seen is not None and len(sched.seen) == n
            else np.zeros(n, dtype=bool))
    e2el_ok = [r.e2el_ms for r in ok]
    tail = {name: ci for name, q in (("p99", 0.99), ("p99.9", 0.999))
            if (ci := tail_ci(e2el_ok, q)) is not None}
    return LevelMetrics(
        label=label or sched.description, mode=run.mode, offered_rps=offered,
        achieved_rps=len(ok) / dur, burstiness=sched.burstiness,
        max_concurrency=run.max_concurrency, n_requests=n, completed=len(ok),
        statuses=statuses, duration_s=run.duration_s,
        ttft=Dist.of([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        tpot=Dist.of([tp for r in ok if (tp := r.tpot_ms) is not None]),
        itl=Dist.of([g for r in ok for g in r.itl_ms]),
        e2el=Dist.of([r.e2el_ms for r in ok]),
        send_lag=Dist.of([r.send_lag_ms for r in recs]),
        slo_ms=dict(slo_ms), good=len(good), goodput_rps=len(good) / dur,
        goodput_fraction=len(good) / n if n else 0.0, correct=q_correct, quality_good=q_good,
        quality_goodput_rps=None if q_good is None else q_good / dur,
        quality_goodput_fraction=None if q_good is None else (q_good / n if n else 0.0),
        retries=sum(r.attempts - 1 for r in recs), quality_mean=q_mean,
        quality_by_query=by_query, extra={"total_output_tokens": sum(r.output_tokens for r in ok)},
        repeats=int(seen.sum()),
        e2el_fresh=Dist.of([r.e2el_ms for r in ok if not seen[r.index]]),
        e2el_repeat=Dist.of([r.e2el_ms for r in ok if seen[r.index]]), tail=tail,
        quality_goodput_ci=None if q_good is None else wilson(q_good, n))


def import_vllm(path: Path) -> LevelMetrics:
    """A ``vllm bench serve --save-result`` JSON as a level (its numbers as vLLM computed
    them: latency from the actual send; goodput only when vLLM was given ``--goodput``, its
    SLOs unknown here). Raises InputError naming the file when it is not one."""
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(str(path), 0, f"not a JSON file: {exc}") from None
    need = ("completed", "duration", "request_throughput")
    if not isinstance(d, dict) or any(k not in d for k in need):
        raise InputError(str(path), 0, f"not a vLLM bench serve result (needs {', '.join(need)})")

    def dist(name: str) -> Dist:
        if f"mean_{name}_ms" not in d:
            return Dist.of([])
        return Dist(int(d["completed"]), d.get(f"mean_{name}_ms"), d.get(f"median_{name}_ms"),
                    d.get(f"std_{name}_ms"),
                    {f"p{p:g}": d.get(f"p{p:g}_{name}_ms") for p in PERCENTILES})

    completed, failed = int(d["completed"]), int(d.get("failed", 0))
    n = int(d.get("num_prompts") or completed + failed)
    rate = d.get("request_rate", "inf")
    offered = float("inf") if rate == "inf" else float(rate)
    dur = float(d["duration"])
    gp = d.get("request_goodput")
    return LevelMetrics(
        label=str(d.get("label") or d.get("model_id") or path.stem), mode="open",
        offered_rps=offered, achieved_rps=float(d["request_throughput"]),
        burstiness=d.get("burstiness"), max_concurrency=d.get("max_concurrency"),
        n_requests=n, completed=completed,
        statuses={"ok": completed, "failed": failed, "timeout": 0, "rate_limited": 0},
        duration_s=dur, ttft=dist("ttft"), tpot=dist("tpot"), itl=dist("itl"),
        e2el=dist("e2el"), send_lag=Dist.of([]), slo_ms={},
        good=0 if gp is None else round(float(gp) * dur), goodput_rps=float(gp or 0.0),
        goodput_fraction=0.0 if gp is None or not n else float(gp) * dur / n,
        source=f"vllm ({path.name})",
        extra={"total_output_tokens": int(d.get("total_output_tokens", 0))})


def table(levels: Sequence[LevelMetrics]) -> list[str]:
    """One markdown row per level: bench's levels and imported vLLM ones side by side."""
    def f(v: float | None, fmt: str = ".1f") -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    lines = ["| level | source | offered / achieved req/s | ok / timeout / failed / 429 | "
             "TTFT p50 / p99 ms | TPOT mean ms | ITL p99 ms | E2EL mean / p50 / p95 / p99 ms | "
             "goodput req/s (share) | quality-goodput req/s (share) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        st = lv.statuses
        qg = ("-" if lv.quality_goodput_rps is None else
              f"{lv.quality_goodput_rps:.2f} ({lv.quality_goodput_fraction:.0%})")
        lines.append(
            f"| {lv.label} | {lv.source} | {f(lv.offered_rps, '.2f')} / "
            f"{f(lv.achieved_rps, '.2f')} | {st.get('ok', 0)} / {st.get('timeout', 0)} / "
            f"{st.get('failed', 0)} / {st.get('rate_limited', 0)} | "
            f"{f(lv.ttft.percentiles['p50'])} / {f(lv.ttft.percentiles['p99'])} | "
            f"{f(lv.tpot.mean)} | {f(lv.itl.percentiles['p99'])} | {f(lv.e2el.mean)} / "
            f"{f(lv.e2el.percentiles['p50'])} / {f(lv.e2el.percentiles['p95'])} / "
            f"{f(lv.e2el.percentiles['p99'])} | {lv.goodput_rps:.2f} ({lv.goodput_fraction:.0%})"
            f" | {qg} |")
    return lines
