"""Closed-loop load generator, SLO finder and the sizing answer.

``run_levels`` drives ``request(i)`` with ``U`` user threads for each ``U`` in
``concurrency`` (each user sends a request, waits for it, sends the next); a level stops after
``max_requests`` requests or ``max_seconds``, whichever comes first, and a later level is not
run once a level has broken ``stop_after_breaking`` (saturation found: more users only queue).

``find_slo`` (default in the style of serving benchmarks): the most concurrent users for which
90 % of requests get their TTFT (e2e when no TTFT) under the budget.

``plan``: ``N = ceil(T / X)`` workers, where X is the highest throughput measured at a level
whose e2e p95 <= S. Assumption, stated in every answer: scale-out is linear — N identical
replicas (GPUs or CPU workers) behind a balancer each serve X requests/s at the latency measured
on one, with no shared bottleneck (network, a shared index server, the balancer).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.capacity.base import CapacityAnswer, LevelResult, RequestTiming, Slo

Request = Callable[[int], RequestTiming]

ASSUMPTION = ("linear scale-out: each of the N replicas serves the measured throughput at the "
              "measured latency, with no shared bottleneck (network, shared index, balancer)")


def run_level(request: Request, concurrency: int, *, max_requests: int, max_seconds: float,
              slo: Slo, start_index: int = 0) -> LevelResult:
    if concurrency < 1 or max_requests < 1 or max_seconds <= 0:
        raise ValueError("concurrency and max_requests must be >= 1, max_seconds > 0")
    lock = threading.Lock()
    issued = [0]
    results: list[RequestTiming] = []
    deadline = time.perf_counter() + max_seconds
    timed_out = [False]

    def user() -> None:
        while True:
            with lock:
                if issued[0] >= max_requests:
                    return
                if time.perf_counter() >= deadline:
                    timed_out[0] = True
                    return
                i = start_index + issued[0]
                issued[0] += 1
            try:
                r = request(i)
            except Exception:  # a failed request is a measurement, not a crash
                r = RequestTiming(float("nan"), None, ok=False)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=user, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r.ok]
    e2e = np.asarray([r.e2e_ms for r in ok]) if ok else np.asarray([np.nan])
    ttfts = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    ttft = np.asarray(ttfts) if ttfts and len(ttfts) == len(ok) else None
    slo_lat = ttft if ttft is not None else e2e
    within = float(np.mean(slo_lat <= slo.budget_ms)) if ok else 0.0
    e50, e95, e99 = (float(v) for v in np.percentile(e2e, [50, 95, 99]))
    t50 = t95 = t99 = None
    if ttft is not None:
        t50, t95, t99 = (float(v) for v in np.percentile(ttft, [50, 95, 99]))
    return LevelResult(concurrency, len(results), len(results) - len(ok), wall,
                       len(ok) / wall if wall > 0 else 0.0, e50, e95, e99, t50, t95, t99,
                       within, "time" if timed_out[0] else "count")


def meets(level: LevelResult, slo: Slo) -> bool:
    failed = level.n_failed / level.n_requests if level.n_requests else 1.0
    return level.within_budget >= slo.attainment and failed <= slo.max_failed


def run_levels(request: Request, concurrency: Sequence[int], slo: Slo, *,
               max_requests: int = 200, max_seconds: float = 10.0,
               stop_after_breaking: int = 1) -> list[LevelResult]:
    """Levels in increasing order; stops after ``stop_after_breaking`` levels break the SLO
    (0 = run every level)."""
    out: list[LevelResult] = []
    broken, start = 0, 0
    for u in sorted(set(concurrency)):
        lvl = run_level(request, u, max_requests=max_requests, max_seconds=max_seconds,
                        slo=slo, start_index=start)
        start += lvl.n_requests
        out.append(lvl)
        if not meets(lvl, slo):
            broken += 1
            if stop_after_breaking and broken >= stop_after_breaking:
                break
    return out


def find_slo(levels: Sequence[LevelResult], slo: Slo) -> LevelResult | None:
    """The most concurrent users up to which EVERY measured level meets the SLO (None if the
    lowest does not): a level that meets it above one that broke it does not count."""
    best = None
    for lv in sorted(levels, key=lambda lv: lv.concurrency):
        if not meets(lv, slo):
            break
        best = lv
    return best


def not_monotone(levels: Sequence[LevelResult], slo: Slo) -> list[int]:
    """Concurrencies that met the SLO above a level that broke it: load from elsewhere on
    the machine, or a server that warms up — the curve should be measured again."""
    out, broken = [], False
    for lv in sorted(levels, key=lambda lv: lv.concurrency):
        if not meets(lv, slo):
            broken = True
        elif broken:
            out.append(lv.concurrency)
    return out


def plan(levels: Sequence[LevelResult], *, target_rps: float, p95_budget_ms: float,
         slo: Slo, worker_kind: str = "GPU") -> CapacityAnswer:
    if target_rps <= 0 or p95_budget_ms <= 0:
        raise ValueError("target_rps and p95_budget_ms must be > 0")
    slo_level = find_slo(levels, slo)
    fit = [lv for lv in levels if lv.e2e_p95_ms <= p95_budget_ms and lv.throughput_rps > 0
           and lv.n_failed == 0]
    best = max(fit, key=lambda lv: lv.throughput_rps) if fit else None
    slo_txt = (f"SLO ({slo.attainment:.0%} of requests with "
               f"{'TTFT' if levels and levels[0].ttft_p50_ms is not None else 'e2e'} "
               f"<= {slo.budget_ms:g} ms) met up to {slo_level.concurrency} concurrent users"
               if slo_level else "no measured level met the SLO from the lowest up")
    odd = not_monotone(levels, slo)
    if odd:
        slo_txt += (f" (also met at {', '.join(map(str, odd))} users, above a level that broke "
                    "it: the curve is not monotone, measure again on a quiet machine)")
    if best is None:
        text = (f"No measured level had p95 <= {p95_budget_ms:g} ms: no worker count reaches "
                f"{target_rps:g} queries/s at that latency. {slo_txt}.")
        return CapacityAnswer(None, target_rps, p95_budget_ms, None,
                              slo_level.concurrency if slo_level else None, worker_kind,
                              ASSUMPTION, text)
    n = math.ceil(target_rps / best.throughput_rps - 1e-9)
    text = (f"{n} {worker_kind}{'s' if n != 1 else ''} for {target_rps:g} queries/s at p95 <= "
            f"{p95_budget_ms:g} ms: one {worker_kind} sustained {best.throughput_rps:.1f} "
            f"queries/s at {best.concurrency} concurrent users with e2e p95 "
            f"{best.e2e_p95_ms:.1f} ms ({best.n_requests} requests over {best.wall_s:.1f} s). "
            f"{slo_txt}. Assumes {ASSUMPTION}.")
    return CapacityAnswer(n, target_rps, p95_budget_ms, best,
                          slo_level.concurrency if slo_level else None, worker_kind,
                          ASSUMPTION, text)


def plot(levels: Sequence[LevelResult], slo: Slo, path: Path,
         answer: CapacityAnswer | None = None) -> Path:
    """Throughput and e2e/TTFT percentiles against concurrency, with the SLO budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u = [lv.concurrency for lv in levels]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    a1.plot(u, [lv.throughput_rps for lv in levels], "o-")
    a1.set_xlabel("concurrent users (closed loop)")
    a1.set_ylabel("throughput (requests/s)")
    a1.set_xscale("log", base=2)
    a1.grid(alpha=0.3)
    for name, key in (("e2e p50", "e2e_p50_ms"), ("e2e p95", "e2e_p95_ms"),
                      ("e2e p99", "e2e_p99_ms"), ("TTFT p95", "ttft_p95_ms")):
        ys = [getattr(lv, key) for lv in levels]
        if all(y is not None for y in ys):
            a2.plot(u, ys, "o-", label=name)
    a2.axhline(slo.budget_ms, color="k", ls="--", lw=0.8, label=f"budget {slo.budget_ms:g} ms")
    if answer is not None:
        a2.axhline(answer.p95_budget_ms, color="C3", ls=":", lw=0.8,
                   label=f"p95 target {answer.p95_budget_ms:g} ms")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("concurrent users (closed loop)")
    a2.set_ylabel("latency (ms)")
    a2.grid(alpha=0.3)
    a2.legend(fontsize="small")
    if answer is not None:
        fig.suptitle(answer.text.split(":")[0], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def capacity_lines(levels: Sequence[LevelResult], slo: Slo, answer: CapacityAnswer
                   ) -> list[str]:
    """The sizing answer and one table row per level (capacity.md and the run's report)."""
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [f"**{answer.text}**", "",
             "| users | requests | failed | throughput req/s | e2e p50 / p95 / p99 ms | "
             "TTFT p50 / p95 / p99 ms | within budget | meets SLO | stopped by |",
             "|---:|---:|---:|---:|---|---|---:|---|---|"]
    for lv in levels:
        lines.append(
            f"| {lv.concurrency} | {lv.n_requests} | {lv.n_failed} | {lv.throughput_rps:.1f} | "
            f"{f(lv.e2e_p50_ms)} / {f(lv.e2e_p95_ms)} / {f(lv.e2e_p99_ms)} | "
            f"{f(lv.ttft_p50_ms)} / {f(lv.ttft_p95_ms)} / {f(lv.ttft_p99_ms)} | "
            f"{lv.within_budget:.1%} | {'yes' if meets(lv, slo) else 'no'} | {lv.stopped_by} |")
    return [*lines, ""]


def write_capacity(levels: Sequence[LevelResult], slo: Slo, answer: CapacityAnswer,
                   out_dir: Path) -> list[Path]:
    """capacity.json (every level, the SLO, the answer), capacity.md and capacity.png."""
    import json
    from dataclasses import asdict

    from bench.results.write import atomic_write_bytes

    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / "capacity.json"
    atomic_write_bytes(js, json.dumps({"slo": asdict(slo), "levels": [asdict(lv) for lv in levels],
                                       "answer": asdict(answer)}, indent=2).encode())
    png = plot(levels, slo, out_dir / "capacity.png", answer)
    lines = ["# Capacity", "", *capacity_lines(levels, slo, answer),
             f"![capacity]({png.name})", ""]
    md = out_dir / "capacity.md"
    atomic_write_bytes(md, "\n".join(lines).encode())
    return [js, md, png]
