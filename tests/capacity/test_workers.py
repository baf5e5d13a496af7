"""Several generator processes on one schedule against the real synthetic service: every
request sent once, merged back in schedule order, latency from the intended send."""

from __future__ import annotations

import asyncio
import functools

import numpy as np
import pytest

from bench.capacity.backends import null_body
from bench.capacity.http import HttpTarget
from bench.capacity.metrics import summarize
from bench.capacity.schedule import QueryStream, poisson_arrivals
from bench.capacity.servers import Served
from bench.capacity.workers import PooledTarget, ProcessPool, send_level
from tests.capacity.conftest import SERVICE_MS


# spawning two worker processes (each imports bench, numpy and httpx) takes 5-15 s here
@pytest.mark.slow
def test_two_processes_send_one_schedule(service: Served) -> None:
    factory = functools.partial(HttpTarget, [service.url], path="/v1/answer", body=null_body,
                                name="synthetic")
    sched = QueryStream(5).fresh(poisson_arrivals(rate_rps=20, n=30, n_queries=5, seed=2))

    async def go():  # type: ignore[no-untyped-def]
        async with factory() as local:
            with ProcessPool(2, factory, warmup=2) as pool:
                t = PooledTarget(local, pool)
                assert "2 generator processes" in t.name
                return await send_level(sched, t, timeout_s=10)

    run = asyncio.run(go())
    assert [r.index for r in run.records] == list(range(30))
    assert [r.query for r in run.records] == sched.query.tolist()
    assert all(r.status == "ok" for r in run.records)
    # each request held a 40 ms slot: no E2EL below it; intended times are the schedule's
    assert min(r.e2el_ms for r in run.records) >= SERVICE_MS * 0.9
    assert np.allclose([r.intended_s for r in run.records], sched.send_s)
    m = summarize(run, slo_ms={"e2el": 1e4})
    assert m.n_requests == 30 and m.repeats == 25 and run.meta["engine"] == "2 processes"
