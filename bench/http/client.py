"""A JSON-over-HTTP client for remote stage backends: bounded retries, a concurrency limit,
timeouts, the API key from a named environment variable, one record per request.

``JSONEndpoint.post(path, body)`` sends one request and returns a ``JSONResult``: the parsed
body when the server answered 200 with JSON, and always a ``RequestRecord`` — status
(``ok`` | ``failed`` | ``timeout`` | ``invalid``), the whole request's latency over every
attempt, the attempts made, the server's own time when it sends a ``Server-Timing`` header.
Connection errors, 429 and 5xx are retried up to ``max_retries`` times with exponential
backoff from ``backoff_s`` (a ``Retry-After`` header is honoured, capped at 60 s); other 4xx
and timeouts are not (another attempt would not answer sooner). A caller that finds the
body's shape wrong marks the record ``invalid`` (:meth:`JSONEndpoint.invalid`).

The API key is read from the environment variable named by ``api_key_env`` at request time;
it is never stored on the object, logged, or part of a cache key. ``check_api_key_env`` makes
a missing variable a config error before any work.

Also here, shared with ``bench.generation.openai_http``: the retryable statuses, free ports,
``Retry-After`` parsing, server-sent-event framing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bench.config.build import OptionError
from bench.errors import MissingDependencyError, ServiceError

log = logging.getLogger("bench")

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: the per-request records a stage stores next to its artifact
REQUESTS_FILE = "requests.parquet"
#: the longest Retry-After honoured (a server asking for more is not waited on longer)
MAX_RETRY_AFTER_S = 60.0


class RemoteError(ServiceError):
    """A remote backend could not do the work (unreachable, refused, malformed answers):
    one line naming the config key and the endpoint. ``status``: the request's status
    (``failed`` | ``timeout`` | ``invalid``), what a caller that goes on records for the
    queries it lacked."""

    def __init__(self, message: str, status: str = "failed") -> None:
        super().__init__(message)
        self.status = status


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header (delta-seconds form), capped; None if absent."""
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_S)
    except ValueError:
        return None


class StreamCut(Exception):
    """A server-sent-event stream that ended inside an event (a ``data:`` line without the
    blank line that dispatches it): the event is discarded (as the SSE spec says) and the
    answer is incomplete."""

    def __init__(self, pending: str) -> None:
        super().__init__(f"stream ended inside an event (no blank line after {pending[:60]!r}):"
                         " the answer is incomplete")


def iter_sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The ``data`` payload of each server-sent event (multi-line data joined by newlines);
    comments, ``event:``/``id:`` fields and keep-alives are skipped. An event is dispatched by
    the blank line that ends it; a stream that ends before that blank line raises
    :class:`StreamCut` (the unterminated event is not yielded) — except a bare ``[DONE]``,
    the OpenAI terminator, which carries no content."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data == ["[DONE]"]:
        yield "[DONE]"  # OpenAI's terminator without its blank line: no content is lost
    elif data:
        raise StreamCut("\n".join(data))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_body(raw: bytes | str) -> Any:
    """A response body as JSON, strictly: invalid UTF-8 and ``NaN`` / ``Infinity`` (which
    Python's json accepts and no JSON number is) raise ``ValueError`` like malformed JSON."""
    return json.loads(raw, parse_constant=_no_constant)


#: echoed credentials: a header or field whose name says it holds one, and its value
_SECRET_FIELD = re.compile(
    r"""(?ix)
    ( (?:proxy-)?authori[sz]ation | x-api-key | api[-_]?key | x-auth-token | auth[-_]?token
      | access[-_]?token | refresh[-_]?token | client[-_]?secret | secret | password
      | set-cookie | cookie )
    ( ["']? \s* [:=] \s* ["']? )
    ( (?:bearer|basic|token)\s+ )?
    (?! \[redacted\] | (?:bearer|basic|token)\s )
    ( [^\s"',;&}\]]+ )""")
#: a bearer / basic credential wherever it stands
_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer|basic)(\s+)(?!\[redacted\])[A-Za-z0-9._~+/=-]+")
REDACTED = "[redacted]"


def secret_values(api_key_env: str | None = None,
                  headers: Mapping[str, str] | None = None) -> list[str]:
    """The configured secrets of a client: the value of ``api_key_env`` and of every
    configured header whose name says it holds a credential (its value and, for
    ``Bearer x``, ``x``)."""
    out: list[str] = []
    if api_key_env is not None and os.environ.get(api_key_env):
        out.append(os.environ[api_key_env])
    for name, value in (headers or {}).items():
        if _SECRET_FIELD.match(f"{name}: x") and value:
            out.append(str(value))
            scheme, _, rest = str(value).partition(" ")
            if rest.strip() and scheme.lower() in ("bearer", "basic", "token"):
                out.append(rest.strip())
    return sorted({v for v in out if len(v) >= 4}, key=len, reverse=True)


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` (an error message: a server's body, an exception) without credentials: every
    configured secret value, any ``Bearer``/``Basic`` credential and the value of any
    ``Authorization`` / ``api-key`` / ``token`` / ``cookie``-like header or field echoed
    back are replaced by ``[redacted]``. Applied before an error text is truncated, stored
    or printed."""
    for value in secrets:
        if value:
            text = text.replace(value, REDACTED)
    text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _SECRET_FIELD.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{REDACTED}", text)


class Deadline:
    """One request's end-to-end limit on a synchronous httpx client: connecting, the
    headers and the whole body, however slowly the server sends it.

    httpx's ``timeout`` bounds each network operation (a read that waits longer than it
    fails), not their sum: a body trickled one byte at a time never trips it. ``Deadline``
    keeps the request's sockets (from httpcore's ``trace`` extension when it connects, from
    the response's ``network_stream`` otherwise) and shuts them down when the time is up,
    which ends any read in progress; ``expired`` then says the failure was the deadline.
    Use: ``with Deadline(t) as d: client.stream(..., timeout=d.remaining(),
    extensions=d.extensions())`` and ``d.attach(resp)``."""

    def __init__(self, timeout_s: float, start: float | None = None) -> None:
        self.end = (time.perf_counter() if start is None else start) + timeout_s
        self.fired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = False
        self._timer: threading.Timer | None = None

    def remaining(self) -> float:
        return max(self.end - time.perf_counter(), 0.001)

    @property
    def expired(self) -> bool:
        return self.fired or time.perf_counter() >= self.end

    def extensions(self) -> dict[str, Any]:
        return {"trace": self._trace}

    def _trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith(("connect_tcp.complete", "start_tls.complete")):
            self._watch(info.get("return_value"))

    def attach(self, resp: Any) -> None:
        """Watch the socket the response is read from (a pooled connection's too)."""
        self._watch(getattr(resp, "extensions", {}).get("network_stream"))

    def _watch(self, stream: Any) -> None:
        try:
            sock = None if stream is None else stream.get_extra_info("socket")
        except Exception:  # a transport without sockets: the per-read timeout still holds
            sock = None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._socks.append(sock)
            if self.fired:
                _shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            for sock in self._socks:
                _shutdown(sock)

    def __enter__(self) -> Deadline:
        self._timer = threading.Timer(max(self.end - time.perf_counter(), 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True
        if self._timer is not None:
            self._timer.cancel()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


def api_key_headers(api_key_env: str | None) -> dict[str, str]:
    """``Authorization: Bearer`` from the named environment variable (nothing when unset)."""
    if api_key_env is None:
        return {}
    key = os.environ.get(api_key_env)
    return {"Authorization": f"Bearer {key}"} if key else {}


def check_base_url(base_url: str, option: str = "base_url") -> str:
    if not base_url.startswith(("http://", "https://")):
        raise OptionError(option, f"must start with http:// or https://, got {base_url!r}")
    return base_url.rstrip("/")


def check_api_key_env(api_key_env: str | None) -> None:
    if api_key_env is not None and not os.environ.get(api_key_env):
        raise OptionError("api_key_env", f"environment variable {api_key_env} is not set")


def check_robustness(*, max_concurrency: int, timeout_s: float, max_retries: int,
                     backoff_s: float) -> None:
    """The options every remote backend shares (``OptionError`` naming the bad one)."""
    if max_concurrency < 1:
        raise OptionError("max_concurrency", f"must be >= 1, got {max_concurrency}")
    if timeout_s <= 0:
        raise OptionError("timeout_s", f"must be > 0, got {timeout_s}")
    if max_retries < 0:
        raise OptionError("max_retries", f"must be >= 0, got {max_retries}")
    if backoff_s < 0:
        raise OptionError("backoff_s", f"must be >= 0, got {backoff_s}")


_SERVER_TIMING_TOTAL = re.compile(r"(?:^|,)\s*total\s*;[^,]*?dur=([0-9.]+)")


def server_total_ms(header: str | None) -> float | None:
    """The ``total`` entry of a ``Server-Timing`` header (bench.serve sends one), in ms."""
    if not header:
        return None
    m = _SERVER_TIMING_TOTAL.search(header)
    return float(m.group(1)) if m else None


@dataclass(frozen=True)
class RequestRecord:
    """One request to a remote backend, over all its attempts."""

    endpoint: str
    status: str  # ok | failed | timeout | invalid
    latency_ms: float
    attempts: int
    n_items: int
    http_status: int | None = None
    error: str | None = None
    #: the server's own time (``Server-Timing: total``), None when it does not say
    server_ms: float | None = None


@dataclass(frozen=True)
class JSONResult:
    record: RequestRecord
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.record.status == "ok"


@runtime_checkable
class Preflight(Protocol):
    """A remote backend that can prove, with one request, that its server answers as
    configured; the run asks it before any work when it will need the server (so an
    unreachable URL is exit 2 then, not configs failed later)."""

    def preflight(self) -> None:
        """One request; a ``RemoteError`` naming the config key and endpoint if it fails."""
        ...


@runtime_checkable
class RecordsRequests(Protocol):
    """A remote backend that keeps a record of each request (stages store them with their
    artifact, ``requests.parquet``)."""

    def take_records(self) -> list[RequestRecord]:
        """The requests since the last call."""
        ...


REQUEST_FIELDS = tuple(RequestRecord.__dataclass_fields__)


def save_records(records: Sequence[RequestRecord], path: Path) -> None:
    """The requests of one stage's work as a Parquet table (one row per request)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        pa.field("endpoint", pa.string()), pa.field("status", pa.string()),
        pa.field("latency_ms", pa.float64()), pa.field("attempts", pa.int64()),
        pa.field("n_items", pa.int64()), pa.field("http_status", pa.int64()),
        pa.field("error", pa.string()), pa.field("server_ms", pa.float64())])
    cols = {f: [getattr(r, f) for r in records] for f in REQUEST_FIELDS}
    pq.write_table(pa.table(cols, schema=schema), path)


def summary_line(records: Sequence[RequestRecord]) -> str:
    """Requests, statuses, retries and latency percentiles, for the stage's log line."""
    if not records:
        return "no requests"
    lat = sorted(r.latency_ms for r in records)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, round(p * (len(lat) - 1)))]

    by: dict[str, int] = {}
    for r in records:
        by[r.status] = by.get(r.status, 0) + 1
    retries = sum(r.attempts - 1 for r in records)
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(by.items()))
    return (f"{len(records)} requests ({statuses}; {retries} retries), latency p50 "
            f"{pct(0.5):.1f} ms, p95 {pct(0.95):.1f} ms")


class JSONEndpoint:
    """POST JSON to ``base_url + path`` with the robustness above. Thread-safe: callers may
    post from several threads; at most ``max_concurrency`` requests are in flight at once.
    ``key`` is the config key errors name (``embedder``, ``reranker``)."""

    def __init__(self, *, base_url: str, key: str, api_key_env: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 3, backoff_s: float = 0.5,
                 max_concurrency: int = 4) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._client: Any = None
        self._records: list[RequestRecord] = []

    def __repr__(self) -> str:
        return f"JSONEndpoint({self.base_url!r})"

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _http(self) -> Any:
        try:
            import httpx
        except ImportError:
            raise MissingDependencyError("httpx", "serve", f"{self.key} over HTTP") from None
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    limits=httpx.Limits(max_connections=self.max_concurrency),
                    timeout=self.timeout_s)
            return self._client

    def post(self, path: str, body: Mapping[str, Any], *, n_items: int = 1) -> JSONResult:
        import httpx

        client = self._http()
        headers = {"Content-Type": "application/json", **api_key_headers(self.api_key_env)}
        payload = json.dumps(body)
        t0 = time.perf_counter()
        error, code, status, server_ms = "not attempted", None, "failed", None
        n = 0
        for n in range(self.max_retries + 1):
            delay: float | None = None
            deadline = Deadline(self.timeout_s)
            try:
                with self._slots:
                    # timeout_s bounds each attempt end to end, its body included
                    deadline = Deadline(self.timeout_s)
                    with deadline, client.stream(
                            "POST", self.url(path), content=payload, headers=headers,
                            timeout=deadline.remaining(),
                            extensions=deadline.extensions()) as resp:
                        deadline.attach(resp)
                        raw = resp.read()
                code = resp.status_code
                server_ms = server_total_ms(resp.headers.get("server-timing"))
                if code == 200:
                    try:
                        parsed = loads_body(raw)
                    except ValueError as exc:
                        return self._record(path, "invalid", t0, n + 1, n_items, code,
                                            f"not JSON ({exc}): "
                                            f"{self._redact(repr(raw))[:200]}", server_ms)
                    return JSONResult(self._record(path, "ok", t0, n + 1, n_items, code, None,
                                                   server_ms).record, parsed)
                text = self._redact(raw.decode("utf-8", "replace"))
                error = f"HTTP {code}: {text[:300]}"
                if code not in RETRY_STATUS:
                    break
                delay = retry_after(resp.headers.get("retry-after"))
            except httpx.TimeoutException:
                return self._record(path, "timeout", t0, n + 1, n_items, None,
                                    f"no complete answer within {self.timeout_s:g} s", None)
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError,
                    httpx.WriteError) as exc:
                if deadline.fired:  # the deadline shut the socket mid-read
                    return self._record(path, "timeout", t0, n + 1, n_items, None,
                                        f"no complete answer within {self.timeout_s:g} s",
                                        None)
                error, code = f"{type(exc).__name__}: {exc}", None
            except httpx.HTTPError as exc:
                error, code = f"{type(exc).__name__}: {exc}", None
                break
            if n == self.max_retries:
                break
            wait = self.backoff_s * (2 ** n)
            time.sleep(max(wait, delay) if delay is not None else wait)
        return self._record(path, status, t0, n + 1, n_items, code, error, server_ms)

    def _redact(self, text: str) -> str:
        return redact(text, secret_values(self.api_key_env))

    def _record(self, path: str, status: str, t0: float, attempts: int, n_items: int,
                code: int | None, error: str | None, server_ms: float | None) -> JSONResult:
        rec = RequestRecord(path, status, (time.perf_counter() - t0) * 1000.0, attempts,
                            n_items, code, None if error is None else self._redact(error),
                            server_ms)
        with self._lock:
            self._records.append(rec)
        return JSONResult(rec)

    def invalid(self, result: JSONResult, why: str) -> RequestRecord:
        """Mark an answered request ``invalid`` (its body had the wrong shape)."""
        rec = replace(result.record, status="invalid", error=self._redact(why))
        with self._lock:
            for i in range(len(self._records) - 1, -1, -1):
                if self._records[i] is result.record:
                    self._records[i] = rec
                    break
        return rec

    def fail(self, record: RequestRecord, *, key: str | None = None) -> RemoteError:
        """The one-line error of a request the work cannot do without (naming ``key``,
        by default ``<key>.base_url``)."""
        return RemoteError(self._redact(
            f"config key {key or self.key + '.base_url'}: POST {self.url(record.endpoint)} "
            f"{record.status} after {record.attempts} attempt"
            f"{'s' if record.attempts != 1 else ''}: {record.error}"), record.status)

    def records(self) -> list[RequestRecord]:
        """Every request so far, in completion order."""
        with self._lock:
            return list(self._records)

    def take_records(self) -> list[RequestRecord]:
        """Every request since the last call (a stage's own requests)."""
        with self._lock:
            out, self._records = self._records, []
            return out

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
