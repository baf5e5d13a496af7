"""Faults during a load level, and what the run did with them.

A fault starts ``at_s`` into a level and lasts ``duration_s``: ``restart`` kills the target
process (SIGKILL) and starts it again on the same port; ``status_429`` / ``status_503``
answer every request with that status (and ``Retry-After``) through the fault proxy
(:func:`bench.capacity.servers.fault_proxy_app`); ``slow`` delays every streamed chunk by
``delay_ms``; ``close`` drops connections after ``after_chunks`` chunks. The level keeps
its schedule throughout; every request still ends with one status and counts in goodput
(:class:`FaultOutcome` checks that none was lost or counted twice).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, Protocol

from bench.capacity.driver import STATUSES, LevelRun, RetryPolicy, Target, run_open
from bench.capacity.metrics import LevelMetrics, summarize
from bench.capacity.schedule import Schedule


class Restartable(Protocol):
    """A target process the restart fault crashes and starts again."""

    restarts: int

    def restart(self) -> None: ...


FaultKind = Literal["restart", "status_429", "status_503", "slow", "close"]
FAULTS: tuple[FaultKind, ...] = ("restart", "status_429", "status_503", "slow", "close")


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    at_s: float = 0.5
    duration_s: float = 1.0
    delay_ms: float = 100.0
    after_chunks: int = 1

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"unknown fault {self.kind!r}: {', '.join(FAULTS)}")
        if self.at_s < 0 or self.duration_s <= 0:
            raise ValueError("fault at_s must be >= 0 and duration_s > 0")

    def proxy_spec(self) -> dict[str, object]:
        if self.kind.startswith("status_"):
            return {"kind": "status", "status": int(self.kind[7:]), "duration_s": self.duration_s,
                    "retry_after_s": 0.1}
        if self.kind == "slow":
            return {"kind": "slow", "delay_ms": self.delay_ms, "duration_s": self.duration_s}
        return {"kind": "close", "after_chunks": self.after_chunks,
                "duration_s": self.duration_s}


@dataclass(frozen=True)
class FaultOutcome:
    """One row of the fault table. ``lost``: scheduled requests without a record (must be
    0); ``double``: records sharing a request index (must be 0); ``answers_kept``: requests
    with an answer or a partial one (a stream cut mid-answer keeps what arrived)."""

    fault: str
    n_requests: int
    statuses: dict[str, int]
    retries: int
    answers_kept: int
    lost: int
    double: int
    goodput_fraction: float
    e2el_p99_ms: float | None
    restarts: int = 0
    #: the fault could not be injected as asked (a restarted target that never came back)
    error: str = ""

    @property
    def survived(self) -> bool:
        return self.lost == 0 and self.double == 0


async def _inject(fault: Fault, *, proxy_url: str | None, served: Restartable | None,
                  t0: float) -> str | None:
    """Inject the fault; what went wrong injecting it (the run goes on), else None."""
    import time

    import httpx

    await asyncio.sleep(max(0.0, t0 + fault.at_s - time.perf_counter()))
    if fault.kind == "restart":
        if served is None:
            raise ValueError("a restart fault needs the target's process")
        try:
            await asyncio.to_thread(served.restart)
        except Exception as exc:  # a target that does not come back: its requests fail
            return f"restart failed: {exc}"[:300]
        return None
    if proxy_url is None:
        raise ValueError(f"fault {fault.kind} needs the fault proxy in front of the target")
    async with httpx.AsyncClient() as c:
        (await c.post(proxy_url + "/_fault", json=fault.proxy_spec())).raise_for_status()
    return None


async def run_with_fault(schedule: Schedule, target: Target, fault: Fault, *,
                         proxy_url: str | None, served: Restartable | None,
                         slo_ms: dict[str, float],
                         timeout_s: float = 10.0, retry: RetryPolicy | None = None,
                         max_concurrency: int | None = None
                         ) -> tuple[LevelRun, LevelMetrics, FaultOutcome]:
    import time

    restarts = served.restarts if served is not None else 0
    t0 = time.perf_counter() + 0.05
    run, injected = await asyncio.gather(
        run_open(schedule, target, timeout_s=timeout_s, retry=retry,
                 max_concurrency=max_concurrency, start_at=t0),
        _inject(fault, proxy_url=proxy_url, served=served, t0=t0))
    m = summarize(run, slo_ms=slo_ms, label=f"{schedule.description}, fault {fault.kind}")
    idx = [r.index for r in run.records]
    out = FaultOutcome(fault.kind, len(schedule), {s: m.statuses[s] for s in STATUSES},
                       m.retries, sum(1 for r in run.records if r.answer),
                       len(set(range(len(schedule))) - set(idx)), len(idx) - len(set(idx)),
                       m.goodput_fraction, m.e2el.percentiles["p99"],
                       (served.restarts - restarts) if served is not None else 0,
                       injected or "")
    return run, m, out


def fault_table(rows: list[FaultOutcome]) -> list[str]:
    lines = ["| fault | requests | ok | timeout | failed | rate_limited | retries | answers kept "
             "| lost | counted twice | goodput share | E2EL p99 ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        st = r.statuses
        p99 = "-" if r.e2el_p99_ms is None else f"{r.e2el_p99_ms:.0f}"
        lines.append(f"| {r.fault} | {r.n_requests} | {st['ok']} | {st['timeout']} | "
                     f"{st['failed']} | {st['rate_limited']} | {r.retries} | {r.answers_kept} | "
                     f"{r.lost} | {r.double} | {r.goodput_fraction:.0%} | {p99} |")
    return lines + [f"- {r.fault}: {r.error}" for r in rows if r.error]
