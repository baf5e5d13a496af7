"""The load generator's own ceiling: the highest rate it drives against a NULL target with
less than ``limit_ms`` added p99 latency.

A null target answers at once (the synthetic server with no service time, over HTTP; a
no-op function, in-process), so whatever latency a level shows is the generator's own (event
loop, client, sockets, the null server's loop) — on the same machine, under its current
load. Added p99 = p99 of E2EL (from the intended send) at the rate minus its p99 at
``base_rps``. The rate is doubled from ``start_rps`` until the added p99 reaches the limit,
then bisected ``refine`` times. A level asked beyond the ceiling is refused by the callers
(:func:`refuse`), naming the limit: its latency would be the generator's, not the target's.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from bench.capacity.driver import LevelRun, Target, run_open
from bench.capacity.schedule import Schedule, poisson_arrivals


@dataclass(frozen=True)
class CeilingProbe:
    rate_rps: float
    n: int
    p99_ms: float
    added_p99_ms: float
    send_lag_p99_ms: float
    failed: int


@dataclass(frozen=True)
class Ceiling:
    """``rate_rps``: the highest probed rate within the limit (0 when none was)."""

    rate_rps: float
    limit_ms: float
    base_p99_ms: float
    target: str
    probes: tuple[CeilingProbe, ...]

    @property
    def text(self) -> str:
        return (f"generator ceiling {self.rate_rps:.0f} req/s against {self.target} (p99 added "
                f"< {self.limit_ms:g} ms over {self.base_p99_ms:.2f} ms at a low rate)")


def refuse(rate_rps: float, ceiling: Ceiling | None) -> str | None:
    """Why a level at ``rate_rps`` is not reported, or None when it may be."""
    if ceiling is None or rate_rps <= ceiling.rate_rps:
        return None
    return (f"{rate_rps:g} req/s is beyond the generator's ceiling ({ceiling.text}): its "
            "latency would be the generator's own; not reported")


async def measure_ceiling(target: Target, *, limit_ms: float = 1.0, base_rps: float = 20.0,
                          start_rps: float = 50.0, seconds: float = 2.0, min_requests: int = 200,
                          max_rps: float = 20000.0, refine: int = 2,
                          timeout_s: float = 5.0,
                          runner: Callable[[Schedule, float], Awaitable[LevelRun]] | None = None
                          ) -> Ceiling:
    """``runner(schedule, timeout_s)``: how a level is sent when not by one event loop
    (:class:`bench.capacity.workers.ProcessPool`'s ``run_open``); ``target`` then names it."""

    async def level(rate: float, seed: int) -> LevelRun:
        n = max(min_requests, int(rate * seconds))
        sched = poisson_arrivals(rate_rps=rate, n=n, n_queries=1, seed=seed)
        if runner is not None:
            return await runner(sched, timeout_s)
        return await run_open(sched, target, timeout_s=timeout_s)

    def p99(run: LevelRun) -> tuple[float, float, int]:
        ok = [r for r in run.records if r.status == "ok"]
        e = np.asarray([r.e2el_ms for r in ok]) if ok else np.asarray([math.inf])
        lag = np.asarray([r.send_lag_ms for r in run.records])
        return float(np.percentile(e, 99)), float(np.percentile(lag, 99)), len(run.records) - len(
            ok)

    await level(base_rps, 99)  # warm-up: connections, first-call costs
    base, _, _ = p99(await level(base_rps, 0))
    probes: list[CeilingProbe] = []

    async def probe(rate: float) -> bool:
        run = await level(rate, len(probes) + 1)
        e99, lag99, failed = p99(run)
        probes.append(CeilingProbe(rate, len(run.records), e99, e99 - base, lag99, failed))
        return e99 - base < limit_ms and failed == 0

    good, bad = 0.0, math.nan
    rate = start_rps
    while rate <= max_rps:
        if await probe(rate):
            good = rate
            rate *= 2
        else:
            bad = rate
            break
    for _ in range(0 if math.isnan(bad) else refine):
        mid = (good + bad) / 2 if good else bad / 2
        if await probe(mid):
            good = mid
        else:
            bad = mid
    return Ceiling(good, limit_ms, base, target.name, tuple(probes))
