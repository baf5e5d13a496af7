"""Real servers the load generator is checked against, each a subprocess.

- ``null``: the generator's ceiling is measured against it. A raw asyncio HTTP/1.1 server
  (keep-alive, ``Content-Length`` bodies), on uvloop when it is installed, that answers every
  ``POST`` at once with ``{"answer":"null"}`` and ``GET /health`` with 200: about 20 µs of
  CPU a request against uvicorn's ~200 µs (h11, parsed in Python) — on a 2-core box the
  uvicorn null server took the CPU the generator was being measured on.
- ``synthetic`` (uvicorn): a service of known capacity. ``slots`` requests are served at once (FIFO
  queue in front), each holds its slot ``service_ms`` and streams ``tokens`` chunks evenly
  over it, so throughput saturates at ``slots / service_ms`` and the knee is arithmetic.
  ``service_ms=0`` and ``tokens=0`` make it a zero-work endpoint that still parses each
  request as JSON through uvicorn. ``degrade_after_ms``: a request that queued longer is
  answered with a truncated answer — a system that cuts work under load, for
  quality-under-load checks.
  Answer of query q: ``"answer q"`` (truncated: ``"answer"``).
- ``faults``: a proxy in front of any target that injects faults on command
  (``POST /_fault {"kind": ..., "duration_s": ...}``): ``status`` (every request answered
  with ``status`` 429/503 and ``Retry-After``), ``slow`` (each chunk delayed ``delay_ms``),
  ``close`` (the connection dropped after ``after_chunks`` chunks), ``none``.
- :class:`Served`: start one on a free port, wait until ``/health`` answers, ``kill()``
  (SIGKILL: a crash) and ``start()`` again on the same port, ``stop()``.

``python -m bench.capacity.servers synthetic --port P --slots 2 --service-ms 40 --tokens 8``,
``python -m bench.capacity.servers null --port P``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body"):
            return b"".join(chunks)


async def _respond(send: Send, status: int, body: bytes, *,
                   content_type: bytes = b"application/json",
                   headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), *headers]})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def synthetic_app(*, slots: int, service_ms: float, tokens: int,
                  degrade_after_ms: float | None = None) -> Callable[..., Awaitable[None]]:
    gate = asyncio.Semaphore(slots)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        path = scope["path"]
        if path == "/health":
            return await _respond(send, 200, b'{"status":"ok"}')
        if path != "/v1/answer":
            return await _respond(send, 404, b'{"error":"not found"}')
        req = json.loads(await _body(receive) or b"{}")
        q = int(req.get("query", 0))
        t0 = time.perf_counter()
        async with gate:
            waited_ms = (time.perf_counter() - t0) * 1000
            words = [f"answer {q}"] if degrade_after_ms is None or waited_ms <= degrade_after_ms \
                else ["answer"]
            if tokens == 0:
                if service_ms:
                    await asyncio.sleep(service_ms / 1000)
                return await _respond(send, 200, json.dumps({"answer": words[0]}).encode())
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            text = " ".join(words)
            step = service_ms / 1000 / tokens
            start = time.perf_counter()
            for k in range(tokens):
                # absolute deadlines: late wake-ups on a loaded machine do not add up
                await asyncio.sleep(max(0.0, start + (k + 1) * step - time.perf_counter()))
                piece = text if k == 0 else " ."
                await send({"type": "http.response.body", "more_body": True,
                            "body": b"data: " + json.dumps({"token": piece}).encode() + b"\n\n"})
            await send({"type": "http.response.body", "more_body": True,
                        "body": b"data: " + json.dumps({"answer": text}).encode() + b"\n\n"})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    return app


_NULL_REPLY = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
               b"content-length: 17\r\n\r\n{\"answer\":\"null\"}")
_HEALTH_REPLY = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                 b"content-length: 15\r\n\r\n{\"status\":\"ok\"}")


class NullProtocol(asyncio.Protocol):
    """One connection of the null server: requests are cut from the byte stream by their
    ``Content-Length`` and answered in order (pipelining works); nothing is parsed beyond
    the request line and that header. ``connection: close`` closes after the reply."""

    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            at = head.find(b"\r\ncontent-length:")
            n = int(head[at + 17:].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buf) < end + 4 + n:
                return
            self.buf = self.buf[end + 4 + n:]
            assert self.transport is not None
            self.transport.write(_HEALTH_REPLY if head.startswith(b"get /health")
                                 else _NULL_REPLY)
            if b"\r\nconnection: close" in head:
                self.transport.close()
                return


async def serve_null(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(
        NullProtocol, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def run_null(port: int) -> None:
    """The null server until killed, on uvloop when it is installed (libuv's loop costs
    less per request; the server is then a smaller share of the box it shares)."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve_null(port))
        return
    uvloop.run(serve_null(port))


def fault_proxy_app(upstream: str) -> Callable[..., Awaitable[None]]:
    """Forwards every request to ``upstream`` (streaming passed through chunk by chunk),
    with the fault set by the last ``POST /_fault`` while it lasts."""
    import httpx

    state: dict[str, Any] = {"kind": "none", "until": 0.0}
    client: list[httpx.AsyncClient] = []

    def active() -> dict[str, Any]:
        if state["kind"] != "none" and time.monotonic() >= state["until"]:
            state.update(kind="none")
        return state

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        path = scope["path"]
        if path == "/_fault":
            spec = json.loads(await _body(receive) or b"{}")
            if spec.get("kind") not in ("none", "status", "slow", "close"):
                return await _respond(send, 400, b'{"error":"kind: none|status|slow|close"}')
            state.clear()
            state.update(spec, until=time.monotonic() + float(spec.get("duration_s", 1e9)))
            return await _respond(send, 200, json.dumps(state, default=str).encode())
        if not client:
            client.append(httpx.AsyncClient(timeout=httpx.Timeout(300.0)))
        body = await _body(receive)
        fault = dict(active())
        if fault["kind"] == "status" and path != "/health":
            status = int(fault.get("status", 503))
            return await _respond(send, status, b'{"error":"injected"}',
                                  headers=[(b"retry-after", str(fault.get("retry_after_s", 0.05))
                                            .encode())])
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in (b"host",
                                                                          b"content-length")]
        try:
            req = client[0].build_request(scope["method"], upstream + path, content=body,
                                          headers=headers)
            resp = await client[0].send(req, stream=True)
        except httpx.TransportError:
            return await _respond(send, 502, b'{"error":"upstream unreachable"}')
        try:
            await send({"type": "http.response.start", "status": resp.status_code,
                        "headers": [(k.encode(), v.encode()) for k, v in resp.headers.items()
                                    if k.lower() not in ("content-length", "transfer-encoding",
                                                         "connection")]})
            n = 0
            async for chunk in resp.aiter_raw():
                if fault["kind"] == "slow":
                    await asyncio.sleep(float(fault.get("delay_ms", 50)) / 1000)
                if fault["kind"] == "close" and n >= int(fault.get("after_chunks", 1)):
                    # An exception after the response started: uvicorn drops the connection
                    # without finishing the chunked body — the client sees a cut stream.
                    raise ConnectionAbortedError("injected mid-stream close")
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                n += 1
            await send({"type": "http.response.body", "body": b""})
        finally:
            await resp.aclose()

    return app


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A server subprocess on a fixed port: ``start()`` waits for ``/health`` (bounded),
    ``kill()`` crashes it (SIGKILL), ``start()`` again restarts it on the same port, ``stop()``
    ends it (SIGTERM, then SIGKILL). A context manager that always stops it."""

    def __init__(self, argv: Sequence[str], *, log_path: Path, port: int | None = None,
                 startup_timeout_s: float = 60.0, env: dict[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.argv = [a.format(port=self.port) for a in argv]
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Served:
        import httpx

        if self.proc is not None and self.proc.poll() is None:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, **(self.env or {})})
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with code {self.proc.returncode} before "
                                   f"answering /health; see {self.log_path}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not healthy after {self.startup_timeout_s:g} s; see "
                           f"{self.log_path}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> Served:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def synthetic(*, slots: int = 1, service_ms: float = 0.0, tokens: int = 0,
              degrade_after_ms: float | None = None, log_path: Path,
              port: int | None = None) -> Served:
    """A :class:`Served` synthetic service (not started)."""
    argv = [sys.executable, "-m", "bench.capacity.servers", "synthetic", "--port", "{port}",
            "--slots", str(slots), "--service-ms", str(service_ms), "--tokens", str(tokens)]
    if degrade_after_ms is not None:
        argv += ["--degrade-after-ms", str(degrade_after_ms)]
    return Served(argv, log_path=log_path, port=port)


def null_server(*, log_path: Path, port: int | None = None) -> Served:
    """A :class:`Served` null server (not started): the generator's ceiling."""
    return Served([sys.executable, "-m", "bench.capacity.servers", "null", "--port", "{port}"],
                  log_path=log_path, port=port)


def fault_proxy(upstream: str, *, log_path: Path, port: int | None = None) -> Served:
    return Served([sys.executable, "-m", "bench.capacity.servers", "faults", "--port", "{port}",
                   "--upstream", upstream], log_path=log_path, port=port)


def main(argv: Sequence[str] | None = None) -> None:
    from bench.docs import CAPACITY

    p = argparse.ArgumentParser(prog="python -m bench.capacity.servers",
                                description="The null server, the synthetic service or the fault "
                                            "proxy the load generator is checked against.",
                                epilog=CAPACITY.help_line())
    sub = p.add_subparsers(dest="kind", required=True)
    s = sub.add_parser("synthetic")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--slots", type=int, default=1)
    s.add_argument("--service-ms", type=float, default=0.0)
    s.add_argument("--tokens", type=int, default=0)
    s.add_argument("--degrade-after-ms", type=float, default=None)
    f = sub.add_parser("faults")
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--upstream", required=True)
    n = sub.add_parser("null")
    n.add_argument("--port", type=int, required=True)
    a = p.parse_args(argv)
    if a.kind == "null":
        return run_null(a.port)
    import uvicorn

    app = (synthetic_app(slots=a.slots, service_ms=a.service_ms, tokens=a.tokens,
                         degrade_after_ms=a.degrade_after_ms)
           if a.kind == "synthetic" else fault_proxy_app(a.upstream.rstrip("/")))
    uvicorn.run(app, host="127.0.0.1", port=a.port, log_level="warning", access_log=False,
                lifespan="on")


if __name__ == "__main__":
    main()
