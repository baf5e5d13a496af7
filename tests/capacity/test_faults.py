"""Faults during a level against a real server behind the real fault proxy: the load keeps
its schedule, every request ends with one status, retries never count a request twice."""

from __future__ import annotations

import asyncio

import pytest

from bench.capacity.ceiling import measure_ceiling, refuse
from bench.capacity.driver import RetryPolicy
from bench.capacity.faults import Fault, fault_table, run_with_fault
from bench.capacity.http import HttpTarget
from bench.capacity.schedule import poisson_arrivals
from bench.capacity.servers import Served
from tests.capacity.conftest import SERVICE_MS, SLOTS, TOKENS


@pytest.mark.parametrize("kind", ["restart", "status_429", "status_503", "slow", "close"])
def test_fault_survived(kind: str, fresh_service: Served, proxy: Served) -> None:
    fault = Fault(kind, at_s=0.3, duration_s=0.6, delay_ms=60)  # type: ignore[arg-type]
    # the restart kills the service itself; the others act in the proxy
    url = fresh_service.url if kind == "restart" else proxy.url
    sched = poisson_arrivals(rate_rps=20, n=40, n_queries=5, seed=1)

    async def go():  # type: ignore[no-untyped-def]
        async with HttpTarget([url], path="/v1/answer", body=lambda q: {"query": q}) as t:
            return await run_with_fault(sched, t, fault, proxy_url=proxy.url,
                                        served=fresh_service, slo_ms={"e2el": 2000},
                                        timeout_s=8.0, retry=RetryPolicy(retries=8))

    run, _, out = asyncio.run(go())
    assert out.survived and out.lost == 0 and out.double == 0
    assert sum(out.statuses.values()) == len(sched) == len(run.records)
    if kind == "restart":
        assert out.restarts == 1 and out.retries > 0
        # refused connections are retried; only the requests in flight at the kill (at most
        # the 2 slots) fail, their streams cut
        assert out.statuses["ok"] >= len(sched) - SLOTS
        assert out.statuses["ok"] + out.statuses["failed"] == len(sched)
    if kind.startswith("status_"):
        assert out.retries > 0  # 429/503 honoured with Retry-After
        assert out.statuses["ok"] + out.statuses["rate_limited"] == len(sched)
    if kind == "slow":
        assert out.statuses["ok"] == len(sched)
        # in flight while the proxy delayed each chunk 60 ms: gaps of at least that long
        # (the window is the proxy's: a loaded machine may start the level late)
        gaps = [g for r in run.records if r.end_s >= 0.3 for g in r.itl_ms]
        assert len(gaps) > 0 and max(gaps) >= 0.9 * 60
        assert max(r.e2el_ms for r in run.records) > SERVICE_MS + (TOKENS - 1) * 0.9 * 60
    if kind == "close":
        cut = [r for r in run.records if r.status == "failed"]
        assert cut and all(r.attempts == 1 for r in cut)  # a cut stream is not retried
        assert all(r.answer for r in cut)  # the chunk already received is kept
    assert len(fault_table([out])) == 3


def test_ceiling_against_the_null_endpoint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bench.capacity.servers import null_server

    with null_server(log_path=tmp_path / "null.log") as null:
        async def go():  # type: ignore[no-untyped-def]
            async with HttpTarget([null.url], path="/v1/answer",
                                  body=lambda q: {"query": q}) as t:
                # a generous limit so the mechanics are checked on a loaded machine
                return await measure_ceiling(t, limit_ms=1e4, base_rps=50, start_rps=50,
                                             seconds=0.5, min_requests=20, max_rps=100)

        c = asyncio.run(go())
    assert c.rate_rps == 100 and [p.rate_rps for p in c.probes] == [50, 100]
    assert all(p.failed == 0 for p in c.probes)
    assert refuse(100, c) is None
    msg = refuse(150, c)
    assert msg is not None and "beyond the generator's ceiling" in msg and "100 req/s" in msg
