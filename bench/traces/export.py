"""Sending evaluation events and spans to an OTLP/HTTP endpoint (a collector, Phoenix, ...).

The requests are the protobuf ``ExportLogsServiceRequest`` / ``ExportTraceServiceRequest`` of
opentelemetry-proto, POSTed as ``application/x-protobuf`` to ``{endpoint}/v1/logs`` and
``{endpoint}/v1/traces`` (the OTLP/HTTP specification's paths; an endpoint that already ends
in ``/v1/logs`` or ``/v1/traces`` is used as is). Not the SDK's ``OTLPLogExporter``: it takes
SDK log records (evaluations of *past* spans are built from scores, not logged by a running
SDK), and it reports a failed batch only as ``FAILURE`` plus a log warning, where bench needs
a status per event.

Settings (``Endpoint``; the CLI flags are the keys errors name): ``--endpoint`` the base URL,
``--header NAME=ENV_VAR`` a header whose value is read from an environment variable (so an
``Authorization`` token never sits in a command line or a file; errors print the header
name, never its value), ``--timeout-s`` per request, ``--batch`` events per request.

``check_reachable`` and ``probe`` run before any work: an unparsable URL, an unset header
variable, a refused connection, or an empty export request answered 401 / 403 (the header)
or 404 / 405 (no receiver for that signal, e.g. Phoenix's ``/v1/logs``) is one line naming
the key (exit 2). Failures after that (a non-2xx
answer, a timeout, a dropped connection) are a status per event / per span line, counted;
the events are always written to their OTLP JSON file first, so a failed send loses nothing
(send the file again with ``send``).
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.errors import ConfigError, MissingDependencyError

SIGNAL_PATHS = {"logs": "/v1/logs", "traces": "/v1/traces"}


@dataclass(frozen=True)
class Endpoint:
    """An OTLP/HTTP endpoint. ``headers``: ``(name, env var)`` pairs, read at send time."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 10.0
    batch: int = 100

    def check(self) -> Endpoint:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError("--endpoint", f"{self.url!r}: give http(s)://host:port")
        if not (0 < self.timeout_s <= 600):
            raise ConfigError("--timeout-s", f"must be in (0, 600] seconds, got {self.timeout_s}")
        if self.batch < 1:
            raise ConfigError("--batch", f"must be >= 1, got {self.batch}")
        for name, env in self.headers:
            if not name or not env:
                raise ConfigError("--header", "give NAME=ENV_VAR (the value is read from the "
                                              "environment variable)")
            if not os.environ.get(env):
                raise ConfigError("--header", f"{name}: environment variable {env} is not set")
        return self

    def url_for(self, signal: str) -> str:
        base = self.url.rstrip("/")
        if base.endswith(tuple(SIGNAL_PATHS.values())):
            return base
        return base + SIGNAL_PATHS[signal]

    def header_values(self) -> dict[str, str]:
        return {name: os.environ[env] for name, env in self.headers}

    def redact(self, text: str) -> str:
        """``text`` with every header value replaced (errors may echo a request)."""
        for name, env in self.headers:
            value = os.environ.get(env)
            if value:
                text = text.replace(value, f"<{name} from ${env}>")
        return text


def parse_headers(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        name, sep, env = item.partition("=")
        if not sep or not name.strip() or not env.strip():
            raise ConfigError("--header", f"{item!r}: give NAME=ENV_VAR")
        out.append((name.strip(), env.strip()))
    return tuple(out)


def check_reachable(ep: Endpoint) -> None:
    """Refuse, before any work, an endpoint nothing listens on (one line naming the key)."""
    parts = urlsplit(ep.url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port),
                                      timeout=min(ep.timeout_s, 5.0)):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError("--endpoint", f"{ep.url}: {reason} (is the collector running?)"
                          ) from None


#: answers to an empty export request that no retry can fix: refused before any work
PERMANENT = {401: "--header", 403: "--header", 404: "--endpoint", 405: "--endpoint"}


def probe(ep: Endpoint, signal: str) -> None:
    """POST an empty export request (the OTLP spec has receivers accept it) and refuse, as
    one line naming the key, an answer that says the settings are wrong: 401 / 403 (the
    auth header), 404 / 405 (no receiver for this signal at that path). Other answers
    (a 503, a timeout) may pass; they are counted per event during the work."""
    if signal == "logs":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )

        empty: Any = ExportLogsServiceRequest()
    else:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        empty = ExportTraceServiceRequest()
    with open_client(ep) as client:
        d = post(client, ep, signal, empty, 0)
    code = int(d.status.removeprefix("http_")) if d.status.startswith("http_") else 0
    if code in PERMANENT:
        raise ConfigError(PERMANENT[code], f"{ep.url_for(signal)} answered {code} to an empty "
                                           f"{signal} export: {d.detail or 'no detail'}")


@dataclass(frozen=True)
class Delivery:
    """The fate of one request's worth of items: ``status`` ``sent`` | ``http_<code>`` |
    ``timeout`` | ``connection_error`` | ``partial_success`` (the receiver accepted the
    request but rejected some items, which it does not name)."""

    status: str
    items: int
    detail: str = ""
    latency_ms: float = 0.0


def open_client(ep: Endpoint) -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "httpx", "traces",
                                     "sending to an OTLP endpoint") from None
    return httpx.Client(timeout=ep.timeout_s, headers={
        "Content-Type": "application/x-protobuf", **ep.header_values()})


def _rejected(signal: str, body: bytes) -> tuple[int, str]:
    """Items the receiver rejected (OTLP partial success) and its message."""
    if not body:
        return 0, ""
    from google.protobuf.message import DecodeError

    if signal == "logs":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceResponse,
        )

        resp: Any = ExportLogsServiceResponse()
        field = "rejected_log_records"
    else:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        resp = ExportTraceServiceResponse()
        field = "rejected_spans"
    try:
        resp.ParseFromString(body)
    except DecodeError:
        return 0, ""  # a JSON or empty-object answer: nothing rejected that we can read
    if not resp.HasField("partial_success"):
        return 0, ""
    ps = resp.partial_success
    return int(getattr(ps, field)), str(ps.error_message)


def post(client: Any, ep: Endpoint, signal: str, message: Any, items: int) -> Delivery:
    """POST one export request; never raises for what the network or receiver does."""
    import httpx

    t0 = time.perf_counter()
    try:
        resp = client.post(ep.url_for(signal), content=message.SerializeToString())
    except httpx.TimeoutException:
        return Delivery("timeout", items, f"no answer within {ep.timeout_s} s",
                        (time.perf_counter() - t0) * 1e3)
    except httpx.HTTPError as exc:
        return Delivery("connection_error", items, ep.redact(f"{type(exc).__name__}: {exc}"),
                        (time.perf_counter() - t0) * 1e3)
    ms = (time.perf_counter() - t0) * 1e3
    if not 200 <= resp.status_code < 300:
        return Delivery(f"http_{resp.status_code}", items,
                        ep.redact(resp.text[:200].replace("\n", " ")), ms)
    rejected, why = _rejected(signal, resp.content)
    if rejected:
        return Delivery("partial_success", items, ep.redact(f"{rejected} rejected: {why}"), ms)
    return Delivery("sent", items, "", ms)


def trace_requests(path: str | Path) -> list[tuple[int, Any, int]]:
    """``(line, ExportTraceServiceRequest, spans)`` of every spans line of an OTLP JSON file
    (hex ids, as the collector's file exporter and ``bench.serve`` write them)."""
    import base64

    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from bench.data.jsonl import iter_jsonl

    def b64(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (base64.b64encode(bytes.fromhex(v)).decode()
                        if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                        else b64(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [b64(x) for x in node]
        return node

    out = []
    for where, obj in iter_jsonl(path):
        if "resourceSpans" not in obj:
            continue
        try:
            msg = json_format.ParseDict(b64(obj), ExportTraceServiceRequest())
        except (json_format.ParseError, ValueError) as exc:
            raise where.error(f"not an OTLP JSON spans line: {exc}") from None
        n = sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
        out.append((where.line, msg, n))
    return out


def send_spans(path: str | Path, ep: Endpoint) -> list[tuple[int, Delivery]]:
    """Every spans line of ``path`` POSTed as one request; ``(line, delivery)``."""
    reqs = trace_requests(path)
    with open_client(ep) as client:
        return [(line, post(client, ep, "traces", msg, n)) for line, msg, n in reqs]


def summary(deliveries: Sequence[Delivery]) -> dict[str, int]:
    """Items per status."""
    c: Counter[str] = Counter()
    for d in deliveries:
        c[d.status] += d.items
    return dict(sorted(c.items()))
