"""Several load-generator processes on one schedule, on this machine.

One event loop (``run_open``) spends CPU per request in its HTTP client; past some rate the
loop itself falls behind and its lag becomes the measured latency. :class:`ProcessPool`
starts ``processes`` worker processes once (``spawn``: no state shared with the parent's
loop); each keeps one event loop and one target (an HTTP client with its warm connections)
for the pool's life. :meth:`ProcessPool.run_open` splits a schedule the way the Ray driver
does (:meth:`bench.capacity.schedule.Schedule.part`: every W-th request), sends each share
with one start time agreed on the wall clock, and merges the records back by schedule index
into one :class:`bench.capacity.driver.LevelRun`: latency still counts from each request's
intended send, and ``Schedule.seen`` travels with each share.

The target is built in each worker by ``factory()`` — a picklable callable (a module-level
function or a :func:`functools.partial` of one, e.g. of
:class:`bench.capacity.mapped.MappedTarget` with its endpoint and queries) returning an
async context manager that is a :class:`bench.capacity.driver.Target`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.capacity.driver import LevelRun, RequestRecord, RetryPolicy, run_open
from bench.capacity.schedule import Schedule

#: each worker process's loop, its target factory (set once, by the pool's initializer:
#: a large factory — an endpoint's queries — is pickled once per process, not per level) and
#: its open target
_LOOP: asyncio.AbstractEventLoop | None = None
_FACTORY: list[Callable[[], Any]] = []
_TARGET: list[Any] = []


def _init(factory: Callable[[], Any]) -> None:
    _FACTORY.append(factory)


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
        asyncio.set_event_loop(_LOOP)
    return _LOOP


async def _target() -> Any:
    if not _TARGET:
        cm = _FACTORY[0]()
        _TARGET.append(await cm.__aenter__())
    return _TARGET[0]


def _warm(n: int) -> int:
    """Open the worker's target and send ``n`` requests (connections, first-call costs)."""

    async def go() -> int:
        t = await _target()
        replies = await asyncio.gather(*(t.send(0) for _ in range(n)))
        return sum(r.status == "ok" for r in replies)

    return _loop().run_until_complete(go())


def _share(schedule: Schedule, w: int, workers: int, start_epoch: float, timeout_s: float,
           retries: int, max_concurrency: int | None) -> tuple[int, list[RequestRecord]]:
    part = schedule.part(w, workers)

    async def go() -> LevelRun:
        t = await _target()
        start_at = time.perf_counter() + (start_epoch - time.time())
        return await run_open(part, t, timeout_s=timeout_s, retry=RetryPolicy(retries=retries),
                              max_concurrency=max_concurrency, start_at=start_at)

    run = _loop().run_until_complete(go())
    # back to the one schedule's indices: share w's k-th request is request w + k * workers
    return w, [dataclasses.replace(r, index=w + r.index * workers) for r in run.records]


class ProcessPool:
    """``with ProcessPool(4, factory) as pool: run = await pool.run_open(schedule)``."""

    def __init__(self, processes: int, factory: Callable[[], Any], *, name: str = "",
                 lead_s: float = 0.3, warmup: int = 20) -> None:
        if processes < 1:
            raise ValueError("processes must be >= 1")
        self.processes = processes
        self.factory = factory
        self.lead_s = lead_s
        self.warmup = warmup
        self.name = name or f"{processes} generator processes"
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> ProcessPool:
        self._pool = ProcessPoolExecutor(max_workers=self.processes,
                                         mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_init, initargs=(self.factory,))
        # a share blocks its process for the whole level, so with W shares queued on W idle
        # processes each process takes exactly one
        futs = [self._pool.submit(_warm, self.warmup) for _ in range(self.processes)]
        for f in futs:
            f.result()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    async def run_open(self, schedule: Schedule, *, timeout_s: float = 30.0,
                       retry: RetryPolicy | None = None,
                       max_concurrency: int | None = None) -> LevelRun:
        """The schedule over the worker processes (``max_concurrency`` is per process)."""
        assert self._pool is not None, "use ProcessPool as a context manager"
        policy = retry or RetryPolicy()
        start_epoch = time.time() + self.lead_s
        loop = asyncio.get_running_loop()
        futs = [loop.run_in_executor(self._pool, _share, schedule, w, self.processes,
                                     start_epoch, timeout_s, policy.retries, max_concurrency)
                for w in range(self.processes)]
        parts = await asyncio.gather(*futs)
        records = sorted((r for _, recs in parts for r in recs), key=lambda r: r.index)
        duration = max((r.end_s for r in records), default=0.0)
        return LevelRun(schedule, tuple(records), duration, "open", max_concurrency,
                        meta={"engine": f"{self.processes} processes",
                              "start_epoch_s": repr(start_epoch)})


class PooledTarget:
    """A target whose open-loop levels go out through a :class:`ProcessPool`; single
    requests (closed loops, preflights) through ``local``, the same target in this process."""

    def __init__(self, local: Any, pool: ProcessPool) -> None:
        self.local = local
        self.pool = pool
        self.name = f"{local.name} [{pool.processes} generator processes]"

    async def send(self, query: int) -> Any:
        return await self.local.send(query)

    async def run_open(self, schedule: Schedule, *, timeout_s: float,
                       retry: RetryPolicy | None = None,
                       max_concurrency: int | None = None) -> LevelRun:
        return await self.pool.run_open(schedule, timeout_s=timeout_s, retry=retry,
                                        max_concurrency=max_concurrency)


async def send_level(schedule: Schedule, target: Any, *, timeout_s: float,
                     retry: RetryPolicy | None = None,
                     max_concurrency: int | None = None) -> LevelRun:
    """One open-loop level: through the target's process pool when it has one, else on this
    event loop (:func:`bench.capacity.driver.run_open`)."""
    if isinstance(target, PooledTarget):
        return await target.run_open(schedule, timeout_s=timeout_s, retry=retry,
                                     max_concurrency=max_concurrency)
    return await run_open(schedule, target, timeout_s=timeout_s, retry=retry,
                          max_concurrency=max_concurrency)
