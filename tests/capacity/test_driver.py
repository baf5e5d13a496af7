"""The open-loop driver against a real server of known capacity (2 slots x 40 ms: 50 req/s):
intended-time accounting, the closed loop's blind spot, statuses, the in-process pool."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from bench.capacity.driver import PoolTarget, RetryPolicy, run_closed, run_open
from bench.capacity.http import HttpTarget
from bench.capacity.schedule import Schedule, gamma_arrivals, poisson_arrivals
from bench.capacity.servers import Served
from tests.capacity.conftest import SERVICE_MS, SLOTS, TOKENS


def burst(n: int) -> Schedule:
    """n requests all due at once."""
    return Schedule("constant", np.zeros(n), np.arange(n, dtype=np.int64), math.inf)


def target(s: Served, **kw: object) -> HttpTarget:
    return HttpTarget([s.url], path="/v1/answer", body=lambda q: {"query": q}, **kw)  # type: ignore[arg-type]


def test_queueing_counts_from_the_intended_time(service: Served) -> None:
    # 6 requests due at 0 with one in flight at a time: request k waits k services
    async def go():  # type: ignore[no-untyped-def]
        async with target(service) as t:
            return await run_open(burst(6), t, max_concurrency=1)

    run = asyncio.run(go())
    recs = sorted(run.records, key=lambda r: r.sent_s)
    assert all(r.status == "ok" for r in recs)
    e2el = np.asarray([r.e2el_ms for r in recs])
    lag = np.asarray([r.send_lag_ms for r in recs])
    # request k was sent when request k-1 ended, and its latency counts that wait
    assert np.allclose(lag[1:], e2el[:-1], atol=5)
    own = e2el - lag
    assert (own >= SERVICE_MS * 0.9).all()
    assert e2el[-1] >= 6 * SERVICE_MS * 0.9  # six services, one after another
    r0 = run.records[0]
    assert r0.output_tokens == TOKENS and len(r0.itl_ms) == TOKENS - 1
    assert r0.answer == "answer 0"  # the final event's answer wins over the joined chunks
    assert r0.ttft_ms is not None and r0.tpot_ms is not None


def test_open_loop_sees_the_queueing_a_closed_loop_hides(service: Served) -> None:
    # The same mean load (the closed loop's own throughput), sent open loop as Poisson
    # arrivals: waiting in front of the 2 slots shows up only in the open loop's latency.
    async def go():  # type: ignore[no-untyped-def]
        async with target(service) as t:
            closed = await run_closed(t, users=SLOTS, n=80, n_queries=10)
            rate = len(closed.records) / closed.duration_s
            opened = await run_open(poisson_arrivals(rate_rps=0.9 * rate, n=160, n_queries=10,
                                                     seed=2), t)
            return closed, opened, rate

    closed, opened, rate = asyncio.run(go())
    assert rate <= 1.1 * SLOTS / (SERVICE_MS / 1000)  # never above capacity (HTTP costs more)
    c99 = np.percentile([r.e2el_ms for r in closed.records], 99)
    o99 = np.percentile([r.e2el_ms for r in opened.records], 99)
    own = np.median([r.e2el_ms for r in closed.records])
    assert c99 < 2.5 * own  # each closed user only ever waits for itself
    assert o99 > 1.5 * c99  # Poisson arrivals at 90 % of capacity queue


def test_statuses_timeout_and_pool(service: Served) -> None:
    async def go():  # type: ignore[no-untyped-def]
        async with target(service) as t:
            return await run_open(burst(4), t, timeout_s=0.02)

    run = asyncio.run(go())
    assert [r.status for r in run.records] == ["timeout"] * 4
    assert all(r.e2el_ms == pytest.approx(20, abs=25) for r in run.records)

    def fn(q: int) -> str:
        if q == 3:
            raise RuntimeError("broken query")
        time.sleep(0.02)
        return f"a{q}"

    pool = PoolTarget(fn, workers=2)
    try:
        run = asyncio.run(run_open(burst(6), pool))
    finally:
        pool.close()
    by = {r.query: r for r in run.records}
    assert by[3].status == "failed" and "broken query" in by[3].error
    assert by[0].answer == "a0" and by[0].first_token_s is None
    # 5 sleeping requests over 2 workers: the last waits 2 services before its own
    assert max(r.e2el_ms for r in run.records) == pytest.approx(60, abs=40)


def test_unreachable_target_fails_every_request_after_bounded_retries() -> None:
    async def go():  # type: ignore[no-untyped-def]
        async with HttpTarget(["http://127.0.0.1:9"], path="/v1/answer",
                              body=lambda q: {"query": q}) as t:
            return await run_open(gamma_arrivals(rate_rps=50, n=5, n_queries=1), t,
                                  retry=RetryPolicy(retries=2, backoff_s=0.01))

    run = asyncio.run(go())
    assert [r.status for r in run.records] == ["failed"] * 5
    assert all(r.attempts == 3 for r in run.records)


class _GcProbe:
    """A target that answers at once and notes whether collection was on when asked."""

    name = "gc probe"

    def __init__(self) -> None:
        self.enabled: list[bool] = []

    async def send(self, query: int):  # type: ignore[no-untyped-def]
        import gc

        from bench.capacity.driver import Reply

        self.enabled.append(gc.isenabled())
        t = time.perf_counter()
        return Reply("ok", t, t)


def test_no_collection_while_an_open_level_is_sent() -> None:
    import gc

    probe = _GcProbe()
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    run = asyncio.run(run_open(poisson_arrivals(rate_rps=500, n=20, n_queries=4, seed=1),
                               probe, timeout_s=5))
    assert [r.status for r in run.records] == ["ok"] * 20
    assert probe.enabled == [False] * 20
    # after the level: collection back on, nothing left frozen
    assert gc.isenabled() and gc.get_freeze_count() == frozen
