"""One event loop drives a schedule against a target; every request ends with one status.

``run_open(schedule, target)`` sends request i at ``start + schedule.send_s[i]`` whether or
not earlier ones have answered (open loop); ``max_concurrency`` caps requests in flight (a
request waiting for a slot keeps its intended time: the wait is latency). ``run_closed``
is the old closed loop, named as such: ``users`` tasks each send, wait, send the next, and a
request's latency counts from its actual send.

Targets (:class:`Target`): :class:`bench.capacity.http.HttpTarget` (asynchronous HTTP, many
requests in flight on one loop, round-robin over replicas) and :class:`PoolTarget` (a worker
pool running an in-process chain, one thread per worker).

Statuses: ``ok``; ``timeout`` (no complete answer within ``timeout_s`` of the intended send);
``rate_limited`` (429/503 until the retries or the time ran out); ``failed`` (anything else:
a refused connection that outlived the retries, a stream cut mid-answer, a 5xx);
``invalid`` (a reply that does not fit the target's response mapping,
:mod:`bench.capacity.mapped`). Retries
(refused connection, 429/503, honouring ``Retry-After``) stay inside the request's record:
``attempts`` counts them and a request is never counted twice. A stream cut after tokens
were shown is not retried — the tokens already received are kept in the record's answer.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from bench.capacity.schedule import Schedule

Status = Literal["ok", "timeout", "failed", "rate_limited", "invalid"]
STATUSES: tuple[Status, ...] = ("ok", "timeout", "failed", "rate_limited", "invalid")


@dataclass(frozen=True)
class Reply:
    """One attempt as the target saw it; times on ``time.perf_counter``. ``retry``: another
    attempt may succeed (refused connection, 429/503) — the driver decides whether to."""

    status: Status
    started_at: float
    end_at: float
    first_token_at: float | None = None
    #: arrival times of the content chunks after the first (for ITL)
    token_at: tuple[float, ...] = ()
    output_tokens: int = 0
    answer: str | None = None
    error: str = ""
    retry: bool = False
    retry_after_s: float | None = None
    replica: int = 0


@dataclass(frozen=True)
class RequestRecord:
    """One scheduled request, whatever happened to it. Times in seconds from the level's
    start: ``intended_s`` (the schedule), ``sent_s`` (the last attempt left the client),
    ``first_token_s`` (first content, None when nothing streamed), ``end_s``."""

    index: int
    query: int
    intended_s: float
    sent_s: float
    end_s: float
    status: Status
    attempts: int
    first_token_s: float | None = None
    itl_ms: tuple[float, ...] = ()
    output_tokens: int = 0
    answer: str | None = None
    error: str = ""
    replica: int = 0

    @property
    def e2el_ms(self) -> float:
        """End-to-end latency from the INTENDED send (queueing in front included)."""
        return (self.end_s - self.intended_s) * 1000.0

    @property
    def ttft_ms(self) -> float | None:
        return None if self.first_token_s is None else (
            (self.first_token_s - self.intended_s) * 1000.0)

    @property
    def tpot_ms(self) -> float | None:
        """vLLM's TPOT: (e2el - ttft) / (output tokens - 1); None below 2 tokens."""
        if self.first_token_s is None or self.output_tokens < 2:
            return None
        return (self.end_s - self.first_token_s) * 1000.0 / (self.output_tokens - 1)

    @property
    def send_lag_ms(self) -> float:
        """How late the (last) attempt left against the schedule: a slot wait, retries, or
        the generator falling behind."""
        return (self.sent_s - self.intended_s) * 1000.0


@dataclass(frozen=True)
class LevelRun:
    """The raw outcome of one level: every scheduled request's record, in schedule order."""

    schedule: Schedule
    records: tuple[RequestRecord, ...]
    #: from the level's start to the last request's end
    duration_s: float
    mode: Literal["open", "closed"] = "open"
    max_concurrency: int | None = None
    users: int | None = None
    meta: dict[str, str] = field(default_factory=dict)


class Target(Protocol):
    """Something requests are sent to. ``send(query)`` makes ONE attempt and never raises
    for a failure of the target (that is a :class:`Reply` status)."""

    name: str

    async def send(self, query: int) -> Reply: ...


@dataclass(frozen=True)
class RetryPolicy:
    """``retries``: extra attempts after a retryable reply (refused connection, 429/503);
    ``backoff_s``: the wait before retry k is ``backoff_s * 2**k`` unless the server says
    ``Retry-After``. Every wait stays inside the request's ``timeout_s``."""

    retries: int = 6
    backoff_s: float = 0.05


async def _one(i: int, query: int, intended: float, t0: float, target: Target,
               gate: asyncio.Semaphore | None, timeout_s: float,
               retry: RetryPolicy) -> RequestRecord:
    deadline = t0 + intended + timeout_s
    attempts = 0
    sent = time.perf_counter()
    last: Reply | None = None

    async def attempt_loop() -> Reply:
        nonlocal attempts, sent, last
        while True:
            attempts += 1
            sent = time.perf_counter()
            reply = await target.send(query)
            last = reply
            if reply.status == "ok" or not reply.retry or attempts > retry.retries:
                return reply
            wait = (reply.retry_after_s if reply.retry_after_s is not None
                    else retry.backoff_s * 2 ** (attempts - 1))
            if time.perf_counter() + wait >= deadline:
                return reply
            await asyncio.sleep(wait)

    async def gated() -> Reply:
        if gate is None:
            return await attempt_loop()
        async with gate:
            return await attempt_loop()

    try:
        # asyncio.timeout, not wait_for: wait_for wraps the request in a second task
        async with asyncio.timeout(max(deadline - time.perf_counter(), 0)):
            reply = await gated()
    except TimeoutError:
        now = time.perf_counter()
        part = last  # a stream in progress when the time ran out: keep what arrived
        return RequestRecord(i, query, intended, sent - t0, now - t0, "timeout", max(attempts, 1),
                             None, (), 0, None if part is None else part.answer,
                             f"no complete answer within {timeout_s:g} s")
    first = None if reply.first_token_at is None else reply.first_token_at - t0
    itl: tuple[float, ...] = ()
    if reply.first_token_at is not None and reply.token_at:
        stamps = np.asarray((reply.first_token_at, *reply.token_at))
        itl = tuple(float(v) for v in np.diff(stamps) * 1000.0)
    return RequestRecord(i, query, intended, reply.started_at - t0, reply.end_at - t0,
                         reply.status, attempts, first, itl, reply.output_tokens, reply.answer,
                         reply.error, reply.replica)


@contextmanager
def quiet_gc() -> Iterator[None]:
    """No garbage collection while an open-loop level is sent over HTTP: a full collection
    walks every object of the process (numpy, the models, the config: tens of ms) and lands
    in some request's latency. The objects alive before the level are frozen out of later
    collections, collection is off until the level ends, then one collection runs (outside
    the timed window) and the frozen objects are handed back."""
    was = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        gc.unfreeze()
        gc.collect(0)


async def run_open(schedule: Schedule, target: Target, *, timeout_s: float = 30.0,
                   max_concurrency: int | None = None,
                   retry: RetryPolicy | None = None,
                   start_at: float | None = None) -> LevelRun:
    """Send the schedule open loop; ``start_at`` (a ``perf_counter`` time) lets several
    drivers share one start."""
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1 (or None: no cap)")
    policy = retry or RetryPolicy()
    gate = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    t0 = start_at if start_at is not None else time.perf_counter()
    # the level's start on the wall clock (per-request exports name epoch times)
    start_epoch = time.time() - (time.perf_counter() - t0)
    tasks = []
    send_s = schedule.send_s.tolist()
    query = schedule.query.tolist()
    # an in-process chain runs in this process's threads: its collections are the service's
    # own, left as they are
    with nullcontext() if isinstance(target, PoolTarget) else quiet_gc():
        for i, intended in enumerate(send_s):
            delay = t0 + intended - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(
                _one(i, int(query[i]), intended, t0, target, gate, timeout_s, policy)))
        records = tuple(await asyncio.gather(*tasks))
    duration = max((r.end_s for r in records), default=0.0)
    return LevelRun(schedule, records, duration, "open", max_concurrency,
                    meta={"start_epoch_s": repr(start_epoch)})


def closed_queries(n: int, n_queries: int, seed: int = 0) -> np.ndarray:
    """The queries ``run_closed`` asks, in order: a seeded permutation, cycled."""
    order = np.random.default_rng(seed + 1).permutation(n_queries)
    return order[np.arange(n) % n_queries]


async def run_closed(target: Target, *, users: int, n: int, n_queries: int, seed: int = 0,
                     timeout_s: float = 30.0, retry: RetryPolicy | None = None) -> LevelRun:
    """``users`` closed-loop users sharing ``n`` requests: each sends, waits for the answer,
    sends the next. A request's intended time IS its send time — the closed loop's blind
    spot, kept so the two can be compared."""
    if users < 1 or n < 1:
        raise ValueError("users and n must be >= 1")
    policy = retry or RetryPolicy()
    queries = closed_queries(n, n_queries, seed)
    t0 = time.perf_counter()
    next_i = 0
    out: list[RequestRecord] = []

    async def user() -> None:
        nonlocal next_i
        while next_i < n:
            i = next_i
            next_i += 1
            intended = time.perf_counter() - t0
            out.append(await _one(i, int(queries[i]), intended, t0, target, None, timeout_s,
                                  policy))

    await asyncio.gather(*(user() for _ in range(users)))
    records = tuple(sorted(out, key=lambda r: r.index))
    sched = Schedule("constant", np.asarray([r.intended_s for r in records]),
                     np.asarray([r.query for r in records], dtype=np.int64),
                     len(records) / max(records[-1].intended_s, 1e-9),
                     None, f"closed loop, {users} users")
    duration = max(r.end_s for r in records)
    return LevelRun(sched, records, duration, "closed", None, users)


class PoolTarget:
    """An in-process chain behind a pool of ``workers`` threads: ``fn(query)`` runs one
    request and returns its answer text (or None); an exception is a ``failed`` request.
    A request waits for a free worker like it would for a free replica."""

    def __init__(self, fn: Callable[[int], str | None], *, workers: int,
                 name: str = "in-process chain") -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.fn = fn
        self.workers = workers
        self.name = f"{name} ({workers} worker{'s' if workers != 1 else ''})"
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capacity")

    def _call(self, query: int) -> Reply:
        t = time.perf_counter()
        try:
            answer = self.fn(query)
        except Exception as exc:  # a failed request is a measurement, not a crash
            return Reply("failed", t, time.perf_counter(), error=f"{type(exc).__name__}: {exc}")
        return Reply("ok", t, time.perf_counter(), answer=answer)

    async def send(self, query: int) -> Reply:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, query)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
