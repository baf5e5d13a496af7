"""Beyond one machine: the same open-loop schedule split over Ray actors.

``run_distributed(schedule, urls=..., path=..., bodies=..., workers=W)`` starts W actors
(``ray.init(address=...)`` joins a cluster; without one, a small local Ray with ``num_cpus``:
:func:`start_local_ray`).
Actor w sends every W-th request of the schedule (``Schedule.part``) with its own event loop
and HTTP client, all from one start time agreed on the wall clock once every actor is up (so
each actor's schedule is the slice of the one schedule); their records are merged back by
schedule index into one :class:`LevelRun`. Latency still counts from each request's intended
time. Each actor's clock is its machine's: on several machines, keep them NTP-synchronised
(the start offset error is added to every send lag).

Needs the ``cluster`` extra (``pip install -e .[cluster]``: ray).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from bench.capacity.driver import LevelRun, RequestRecord, RetryPolicy, run_open
from bench.capacity.http import HttpTarget
from bench.capacity.schedule import Schedule
from bench.errors import BenchError, MissingDependencyError


def _share(schedule: Schedule, w: int, workers: int, start_epoch: float, urls: list[str],
           path: str, bodies: list[dict[str, Any]], timeout_s: float,
           retries: int) -> tuple[int, list[RequestRecord]]:
    part = schedule.part(w, workers)

    async def go() -> LevelRun:
        async with HttpTarget(urls, path=path, body=lambda q: bodies[q],
                              timeout_s=timeout_s) as t:
            start_at = time.perf_counter() + (start_epoch - time.time())
            return await run_open(part, t, timeout_s=timeout_s,
                                  retry=RetryPolicy(retries=retries), start_at=start_at)

    run = asyncio.run(go())
    # back to the one schedule's indices: share w's k-th request is request w + k * workers
    return w, [dataclasses.replace(r, index=w + r.index * workers) for r in run.records]


#: the local node's object store: Ray's minimum (75 MiB) plus room; the workers pass a
#: schedule and records, kilobytes, not the default 30 % of the machine's memory
LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024


def start_local_ray(*, num_cpus: int = 1) -> None:
    """A small local Ray for the load workers: no dashboard, a 100 MiB object store (not
    30 % of memory), no usage reporting, ``num_cpus`` slots (the actors take 0: they wait on
    the network). ``ray.init`` takes 2.5-3.5 s on the idle 2-core box either way; Ray gives a
    local node a fixed 30 s to register, which a saturated machine can still miss."""
    import os

    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=num_cpus, num_gpus=0, include_dashboard=False, log_to_driver=False,
             object_store_memory=LOCAL_OBJECT_STORE_BYTES, configure_logging=False)


class _Worker:
    """One Ray actor: its own process, event loop and HTTP client."""

    def ready(self) -> bool:
        return True

    def run(self, *args: Any) -> tuple[int, list[RequestRecord]]:
        return _share(*args)


def run_distributed(schedule: Schedule, *, urls: Sequence[str], path: str,
                    bodies: Sequence[dict[str, Any]], workers: int = 2,
                    timeout_s: float = 30.0, retries: int = 6, address: str | None = None,
                    num_cpus: int = 1, lead_s: float = 1.0,
                    start_timeout_s: float = 120.0) -> LevelRun:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "cluster", "capacity over Ray actors") from None
    if workers < 1:
        raise ValueError("workers must be >= 1")
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        else:
            start_local_ray(num_cpus=num_cpus)
    try:
        # Any: Ray's actor handles are built at run time, their methods gain .remote
        actors: list[Any] = [ray.remote(num_cpus=0)(_Worker).remote() for _ in range(workers)]
        # agree on a start only once every actor is up (starting one takes seconds, more on
        # a loaded machine): a start in the past would fire a burst of late requests
        # every wait is bounded: actors Ray cannot place, or a worker stuck past every
        # request's own timeouts, fail the level instead of hanging it
        try:
            ray.get([a.ready.remote() for a in actors], timeout=start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise BenchError(f"capacity over Ray: {workers} load workers did not start within "
                             f"{start_timeout_s:g} s (can the cluster place them?)") from None
        start_epoch = time.time() + lead_s
        bound_s = lead_s + schedule.span_s + 2.0 * (retries + 1) * timeout_s + 60.0
        try:
            parts = ray.get([a.run.remote(schedule, w, workers, start_epoch, list(urls), path,
                                          list(bodies), timeout_s, retries)
                             for w, a in enumerate(actors)], timeout=bound_s)
        except ray.exceptions.GetTimeoutError:
            raise BenchError(f"capacity over Ray: the load workers did not finish within "
                             f"{bound_s:.0f} s (the schedule's {schedule.span_s:.0f} s plus "
                             "every request's timeouts and retries)") from None
    finally:
        if started_here:
            ray.shutdown()
    records = sorted((r for _, recs in parts for r in recs), key=lambda r: r.index)
    duration = max((r.end_s for r in records), default=0.0)
    return LevelRun(schedule, tuple(records), duration, "open", None,
                    meta={"engine": f"ray, {workers} workers"})
