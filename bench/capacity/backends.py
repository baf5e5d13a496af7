"""Backends a capacity study drives (:class:`bench.capacity.study.Backend`).

- :class:`PoolBackend`: an in-process chain (``fn(query) -> answer``) behind a pool of
  worker threads; ``replicas`` multiplies the workers (threads of one process: they share
  its cores and the GIL, which the scale-out check then measures). No faults.
- :class:`HttpBackend`: served processes (``start(i)`` launches replica i) behind the
  round-robin HTTP client; the ceiling is measured against a real null server on this
  machine (:func:`bench.capacity.servers.null_server`, through the same client); faults go
  through the real fault proxy in front of replica 0.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from bench.capacity.driver import PoolTarget, Target
from bench.capacity.http import HttpTarget
from bench.capacity.servers import fault_proxy, null_server
from bench.capacity.study import FaultRig


class ServedReplica(Protocol):
    restarts: int

    @property
    def url(self) -> str: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...


class PoolBackend:
    kind = "in-process"

    def __init__(self, fn: Callable[[int], str | None], *, n_queries: int, name: str,
                 workers: int = 1) -> None:
        self.fn = fn
        self.n_queries = n_queries
        self.name = name
        self.workers = workers

    @asynccontextmanager
    async def target(self, replicas: int) -> AsyncIterator[Target]:
        pool = PoolTarget(self.fn, workers=self.workers * replicas, name=self.name)
        try:
            yield pool
        finally:
            pool.close()

    @asynccontextmanager
    async def null_target(self) -> AsyncIterator[Target]:
        pool = PoolTarget(lambda q: None, workers=self.workers, name="in-process null")
        try:
            yield pool
        finally:
            pool.close()

    def fault_rig(self) -> AbstractAsyncContextManager[FaultRig] | None:
        return None


class HttpBackend:
    kind = "http"

    def __init__(self, start: Callable[[int], ServedReplica], *, path: str,
                 body: Callable[[int], dict[str, Any]], n_queries: int, name: str,
                 work_dir: Path, timeout_s: float = 30.0) -> None:
        self.start = start
        self.path = path
        self.body = body
        self.n_queries = n_queries
        self.name = name
        self.work_dir = work_dir
        self.timeout_s = timeout_s
        self.replicas: list[ServedReplica] = []

    def _ensure(self, n: int) -> list[ServedReplica]:
        while len(self.replicas) < n:
            self.replicas.append(self.start(len(self.replicas)))
        return self.replicas[:n]

    def _http(self, urls: list[str], name: str | None = None) -> HttpTarget:
        return HttpTarget(urls, path=self.path, body=self.body, timeout_s=self.timeout_s,
                          name=name)

    @asynccontextmanager
    async def target(self, replicas: int) -> AsyncIterator[Target]:
        reps = self._ensure(replicas)
        async with self._http([r.url for r in reps]) as t:
            yield t

    @asynccontextmanager
    async def null_target(self) -> AsyncIterator[Target]:
        with null_server(log_path=self.work_dir / "null-server.log") as null:
            async with HttpTarget([null.url], path="/v1/answer", body=lambda q: {"query": q},
                                  name="a null HTTP server on this machine") as t:
                yield t

    def endpoint(self, path: str, body: Callable[[int], dict[str, Any]], name: str
                 ) -> Callable[[], AbstractAsyncContextManager[Target]]:
        """A target factory for another endpoint of replica 0 (a component the served
        process also serves: ``/v1/embeddings``, ``/v1/rerank``, ``/v1/chat/completions``)."""

        @asynccontextmanager
        async def cm() -> AsyncIterator[Target]:
            rep = self._ensure(1)[0]
            async with HttpTarget([rep.url], path=path, body=body, timeout_s=self.timeout_s,
                                  name=f"{name}: {rep.url}{path}") as t:
                yield t

        return cm

    def fault_rig(self) -> AbstractAsyncContextManager[FaultRig] | None:
        @asynccontextmanager
        async def rig() -> AsyncIterator[FaultRig]:
            rep = self._ensure(1)[0]
            with fault_proxy(rep.url, log_path=self.work_dir / "fault-proxy.log") as proxy:
                async with self._http([proxy.url], f"{self.name} behind the fault proxy") as t:
                    yield FaultRig(t, proxy.url, rep)

        return rig()

    def close(self) -> None:
        for r in self.replicas:
            r.stop()
        self.replicas.clear()


def null_body(query: int) -> dict[str, Any]:
    """The null server's request body (module-level: worker processes unpickle it)."""
    return {"query": query}


class _NotOwned:
    """The replica behind a service bench does not own: it cannot be restarted."""

    restarts = 0

    def restart(self) -> None:
        raise RuntimeError("bench does not own this service: the restart fault is refused")


class EndpointBackend:
    """Any endpoint (``capacity.target=http``, :mod:`bench.capacity.mapped`): its replicas
    are its URLs (the scale-out check needs more than one); the ceiling is measured against a
    real null server on this machine; faults only when ``allow_faults`` (a service bench does
    not own is never faulted unless asked), and only through the fault proxy in front of the
    first URL (``status_*``, ``slow``, ``close``; no ``restart``: there is no process here to
    kill)."""

    kind = "http (a service bench does not own)"

    def __init__(self, make: Callable[..., Target], *, urls: list[str],
                 n_queries: int, name: str, work_dir: Path, allow_faults: bool = False,
                 processes: int = 1) -> None:
        self.make = make
        self.urls = urls
        self.n_queries = n_queries
        self.name = name
        self.work_dir = work_dir
        self.allow_faults = allow_faults
        self.processes = processes

    @asynccontextmanager
    async def _pooled(self, factory: Callable[[], Any]) -> AsyncIterator[Target]:
        """``factory()``'s target; with ``processes`` > 1 its open-loop levels go out from
        that many generator processes (:mod:`bench.capacity.workers`)."""
        t: Any = factory()
        async with t:
            if self.processes <= 1:
                yield t
            else:
                from bench.capacity.workers import PooledTarget, ProcessPool

                with ProcessPool(self.processes, factory) as pool:
                    yield PooledTarget(t, pool)

    @asynccontextmanager
    async def target(self, replicas: int) -> AsyncIterator[Target]:
        # ``make`` is picklable (a partial of MappedTarget): worker processes rebuild it
        async with self._pooled(functools.partial(self.make, urls=self.urls[:max(1, replicas)],
                                                  name=None)) as t:
            yield t

    @asynccontextmanager
    async def null_target(self) -> AsyncIterator[Target]:
        with null_server(log_path=self.work_dir / "null-server.log") as null:
            async with self._pooled(functools.partial(
                    HttpTarget, [null.url], path="/v1/answer", body=null_body,
                    name="a null HTTP server on this machine")) as t:
                yield t

    def fault_rig(self) -> AbstractAsyncContextManager[FaultRig] | None:
        if not self.allow_faults:
            return None

        @asynccontextmanager
        async def rig() -> AsyncIterator[FaultRig]:
            from urllib.parse import urlsplit

            u = urlsplit(self.urls[0])
            upstream = f"{u.scheme}://{u.netloc}"
            with fault_proxy(upstream, log_path=self.work_dir / "fault-proxy.log") as proxy:
                via = proxy.url + self.urls[0][len(upstream):]
                t: Any = self.make(urls=[via], name=f"{self.name} behind the fault proxy")
                async with t:
                    yield FaultRig(t, proxy.url, _NotOwned())

        return rig()
