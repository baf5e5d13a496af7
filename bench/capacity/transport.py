"""The load generator's HTTP client: one ``aiohttp.ClientSession`` per target, keep-alive
connections, many requests in flight on the driver's event loop.

Why aiohttp and not httpx (which the rest of bench uses for single requests): on this 2-core
box httpx's asynchronous client spends ~0.6 ms of CPU on each request (pure-Python h11
parsing, anyio layers), aiohttp ~0.2 ms (llhttp, a C parser) — at 1,000 requests/s that is
the difference between a generator whose own queueing is the measured latency and one that
is not (``scripts/bench_generator_ceiling.py``, docs/experiments/capacity.md). Both targets
that send load (:class:`bench.capacity.http.HttpTarget`,
:class:`bench.capacity.mapped.MappedTarget`) go through :func:`session`, so the ceiling
measured against the null server is the ceiling of the client the study drives.

Errors a target maps to statuses: :data:`TIMEOUT` (no complete answer in time) and
:data:`TRANSPORT` (a refused, reset or cut connection, a malformed reply).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

TIMEOUT: tuple[type[BaseException], ...] = (asyncio.TimeoutError, TimeoutError)
TRANSPORT: tuple[type[BaseException], ...] = (aiohttp.ClientError, ConnectionError)


def session(*, timeout_s: float, max_connections: int,
            headers: Mapping[str, str] | None = None) -> aiohttp.ClientSession:
    """A session for one target (created on the running loop: call it in ``__aenter__``).
    ``max_connections`` caps open connections (a request beyond them waits for one, and
    that wait is latency); idle ones are kept alive."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=max_connections, limit_per_host=0,
                                       keepalive_timeout=60.0, ttl_dns_cache=300),
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        headers=dict(headers or {}),
        cookie_jar=aiohttp.DummyCookieJar(),
        # a streamed line (one SSE event) may be up to 1 MiB before it counts as malformed
        read_bufsize=2**19)


async def lines(resp: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The body's lines as they arrive, without their line ends (server-sent events)."""
    async for raw in resp.content:
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def content_type(resp: aiohttp.ClientResponse) -> str:
    return str(resp.headers.get("content-type", ""))


def header(resp: aiohttp.ClientResponse, name: str) -> str | None:
    v: Any = resp.headers.get(name)
    return None if v is None else str(v)
