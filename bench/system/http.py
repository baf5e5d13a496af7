"""``system=http``: any RAG service behind an HTTP endpoint, measured as a black box.

One request per golden query: the JSON body is the config's request template filled with the
query (``bench.system.mapping``), the response is read through the config's response
mapping — the ranked documents (ids, scores, passages), the answer, its citations and the
server's stage timings. ``stream=true`` reads server-sent events: each event is JSON, the
answer is joined from each event's ``response.delta``, the other fields are read from the
events that carry them (the last one wins), and TTFT is the time to the first non-empty
delta.

Retries and limits are the remote backends' (``bench.http.client``):
``max_concurrency`` requests in flight, ``timeout_s`` per request end to end, connection
errors / 429 / 5xx retried ``max_retries`` times with exponential backoff from ``backoff_s``
(a 429's Retry-After honoured), other 4xx not retried. The API key is read at request time
from the environment variable ``api_key_env``: never stored, logged or part of the cache key.

Statuses: ``ok``; ``failed`` (HTTP error or connection refused after the retries);
``timeout`` (past ``timeout_s``); ``invalid`` (a body that is not JSON or does not fit the
mapping). Nothing is raised per request and nothing is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.config.build import OptionError
from bench.errors import ConfigError, MissingDependencyError
from bench.http.client import (
    RETRY_STATUS,
    Deadline,
    StreamCut,
    api_key_headers,
    check_api_key_env,
    check_robustness,
    iter_sse_data,
    loads_body,
    redact,
    retry_after,
    secret_values,
    server_total_ms,
)
from bench.system.base import FAILED, INVALID, OK, TIMEOUT, SystemQuery, SystemResponse
from bench.system.mapping import MappingError, Parsed, ResponseMapping, check_template, fill

log = logging.getLogger("bench")

#: the query the preflight request asks (its answer only has to fit the mapping)
PREFLIGHT_QUERY = SystemQuery("preflight", "What is a benchmark?")


@dataclass(frozen=True)
class _Attempt:
    response: SystemResponse | None
    retry: bool
    error: str
    http_status: int | None = None
    retry_after_s: float | None = None


class _Deadline(Exception):
    pass


class HTTPSystem:
    """A RAG service at ``url`` (see the module docstring).

    ``request``: the JSON body template; ``response``: the mapping (``bench.system.mapping``);
    ``method``: POST or GET (GET sends no body); ``headers``: extra request headers (not part
    of the cache key: they must not change answers); ``health_url``: GET before the preflight
    request (200 expected); ``preflight``: send one request before any work and check its
    body against the mapping (off: the first failures show up as per-query statuses);
    ``doc_id_separator``: returned ids are chunk ids ``<doc id><sep><chunk>``: the part before
    the last separator is the document; ``server_timing_header``: without mapped
    ``response.server_timings``, the server's time is the ``total`` entry of its
    ``Server-Timing`` header (``bench.serve`` sends one); ``name``: the config label
    (``system(<name>)``).

    ``serve``: start ``python -m bench.serve <serve...>`` (Hydra overrides naming the served
    run and ``config=<id or label>``) on a free port before the preflight and stop it when
    the requests are done (or at exit); ``url`` is then the path on it (``/v1/retrieve``) and
    the cache key names the served overrides instead of the port. ``serve_log``: its output
    (null: a temporary file, named in the log); ``serve_ready_timeout_s``: how long it may
    take to load (a cold cache builds the served config's chunks, vectors and index);
    ``serve_keep``: keep it up until the process exits instead of stopping it when the
    requests are done (other stages of the run use it too: ``embedder=openai_http`` at a
    fixed ``serve.port``).
    """

    def __init__(
        self,
        *,
        url: str,
        response: dict[str, Any],
        request: dict[str, Any] | None = None,
        method: str = "POST",
        stream: bool = False,
        headers: dict[str, str] | None = None,
        api_key_env: str | None = None,
        health_url: str | None = None,
        preflight: bool = True,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_concurrency: int = 1,
        doc_id_separator: str | None = None,
        server_timing_header: bool = False,
        serve: list[str] | None = None,
        serve_log: str | None = None,
        serve_ready_timeout_s: float = 900.0,
        serve_keep: bool = False,
        name: str = "http",
    ) -> None:
        if serve is not None:
            if not url.startswith("/"):
                raise OptionError("url", f"with serve=..., url is the path on the started "
                                  f"server (/v1/retrieve), got {url!r}")
            if not serve or not any(str(a).startswith(("config=", "serve.config="))
                                    for a in serve):
                raise OptionError("serve", "must name the served config: config=<id or label>")
            if serve_ready_timeout_s <= 0:
                raise OptionError("serve_ready_timeout_s", "must be > 0")
            for a in serve:
                if str(a).startswith("serve.port=") and not str(a)[11:].isdigit():
                    raise OptionError("serve", f"{a!r}: serve.port must be a port number")
        for key, value in (("url", None if serve is not None else url),
                           ("health_url", health_url)):
            if value is not None and not value.startswith(("http://", "https://")):
                raise OptionError(key, f"must start with http:// or https://, got {value!r}")
        if method.upper() not in ("POST", "GET"):
            raise OptionError("method", f"must be POST or GET, got {method!r}")
        check_robustness(max_concurrency=max_concurrency, timeout_s=timeout_s,
                         max_retries=max_retries, backoff_s=backoff_s)
        check_api_key_env(api_key_env)
        if doc_id_separator == "":
            raise OptionError("doc_id_separator", "must be a non-empty string or null")
        if not name or any(c in name for c in "()>,"):
            raise OptionError("name", f"must be a short label without ()>, got {name!r}")
        self.template = dict(request) if request is not None else {"query": "{query}"}
        check_template(self.template)
        self.mapping = ResponseMapping.of(dict(response), stream=stream)
        self.raw_mapping = dict(response)
        self.url = url
        self.method = method.upper()
        self.stream = stream
        self.headers = dict(headers or {})
        self.api_key_env = api_key_env
        self.health_url = health_url
        self.do_preflight = preflight
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_concurrency = max_concurrency
        self.doc_id_separator = doc_id_separator
        self.server_timing_header = server_timing_header
        self.name = name
        self.serve = None if serve is None else [str(a) for a in serve]
        self.serve_log = serve_log
        self.serve_ready_timeout_s = float(serve_ready_timeout_s)
        self.serve_keep = serve_keep
        self.cache_dir: str | None = None
        self._server: Any = None
        self._client: Any = None
        self.timed = True
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HTTPSystem({self.method} {self.url!r}, stream={self.stream})"

    @property
    def documents(self) -> bool:
        return self.mapping.has_documents

    @property
    def answers(self) -> bool:
        return self.mapping.has_answer

    # -- BlackBox ---------------------------------------------------------------------------
    def cache_params(self) -> dict[str, object]:
        # a started server's port changes every run; what it serves does not
        where: object = self.url if self.serve is None else {"serve": self.serve,
                                                             "path": self.url}
        return {"backend": "http", "url": where, "method": self.method,
                "request": self.template, "response": self.raw_mapping, "stream": self.stream,
                "doc_id_separator": self.doc_id_separator}

    def preflight(self) -> None:
        if not self.do_preflight:
            return
        httpx = _httpx()
        self._start()
        if self.health_url is not None:
            try:
                code = httpx.get(self.health_url, timeout=min(self.timeout_s, 10.0)).status_code
            except httpx.HTTPError as exc:
                raise ConfigError("system.health_url", self._redact(
                    f"{self.health_url} unreachable ({type(exc).__name__}: {exc})")) from None
            if code != 200:
                raise ConfigError("system.health_url", f"{self.health_url} answered {code}, "
                                  "expected 200")
        r = self._one(PREFLIGHT_QUERY, retries=0)
        if r.status == OK:
            log.info("stage %-10s preflight %s: ok in %.0f ms (%d documents%s)", "system",
                     self.url, r.e2e_ms, len(r.doc_ids),
                     ", an answer" if r.answer else "")
            return
        err = r.error or r.status
        if r.status == INVALID and err.startswith("response"):
            key, _, why = err.partition(": ")
            raise ConfigError(f"system.{key}", self._redact(
                f"the preflight response from {self.url} does not fit: {why}"))
        raise ConfigError("system.url", self._redact(
            f"preflight request to {self._url()} {r.status}: {err}"))

    def ask(self, queries: Sequence[SystemQuery],
            on_response: Callable[[SystemResponse], None] | None = None
            ) -> list[SystemResponse]:
        if not queries:
            return []
        self._start()
        out: list[SystemResponse | None] = [None] * len(queries)
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(queries))) as pool:
            futures = {pool.submit(self._one, q): i for i, q in enumerate(queries)}
            for fut in as_completed(futures):
                r = fut.result()
                out[futures[fut]] = r
                if on_response is not None:
                    on_response(r)
        return [r for r in out if r is not None]

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            if self._server is not None and not self.serve_keep:
                self._server.stop()
                log.info("stage %-10s stopped bench.serve (pid %s)", "system",
                         self._server.proc.pid)
                self._server = None

    def _start(self) -> None:
        """Start the managed ``bench.serve`` (once); a server that does not come up is a
        config error naming ``system.serve``."""
        import atexit

        from bench.serve.launch import ServedProcess, ServerError

        with self._lock:
            if self.serve is None or self._server is not None:
                return
            extra = [] if self.cache_dir is None or any(
                a.startswith("cache_dir=") for a in self.serve) else [
                f"cache_dir={self.cache_dir}"]
            log_path = None if self.serve_log is None else Path(self.serve_log)
            # a fixed serve.port (another stage of the run calls it there) is the launcher's
            # port: it appends its own serve.port, which would win over ours
            fixed = [a for a in self.serve if a.startswith("serve.port=")]
            port = int(fixed[-1].partition("=")[2]) if fixed else None
            srv = ServedProcess([*(a for a in self.serve if a not in fixed), *extra],
                                port=port, log_path=log_path,
                                ready_timeout_s=self.serve_ready_timeout_s)
            log.info("stage %-10s starting python -m bench.serve %s (log %s)", "system",
                     " ".join(self.serve), srv.log_path)
            try:
                srv.__enter__()
            except ServerError as exc:
                raise ConfigError("system.serve", exc.one_line()) from None
            atexit.register(srv.stop)
            log.info("stage %-10s bench.serve ready at %s in %.1f s", "system", srv.base_url,
                     srv.start_s or 0.0)
            self._server = srv

    def _url(self) -> str:
        if self._server is None:
            return self.url
        return f"{self._server.base_url}{self.url}"

    # -- internals --------------------------------------------------------------------------
    def _http(self) -> Any:
        httpx = _httpx()
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    limits=httpx.Limits(max_connections=self.max_concurrency),
                    timeout=self.timeout_s)
            return self._client

    def _headers(self) -> dict[str, str]:
        return {"Accept": "text/event-stream" if self.stream else "application/json",
                **self.headers, **api_key_headers(self.api_key_env)}

    def body(self, q: SystemQuery) -> Any:
        return fill(self.template, {"query": q.text, "query_id": q.query_id,
                                    "roles": list(q.roles), "tenant": q.tenant})

    def _one(self, q: SystemQuery, retries: int | None = None) -> SystemResponse:
        body = self.body(q)
        t0 = time.perf_counter()
        attempt = _Attempt(None, False, "not attempted")
        n = 0
        limit = self.max_retries if retries is None else retries
        for n in range(limit + 1):
            attempt = self._attempt(q, body, t0)
            if attempt.response is not None:
                r = attempt.response
                return replace(r, attempts=n + 1,
                               error=None if r.error is None else self._redact(r.error))
            if not attempt.retry or n == limit:
                break
            delay = self.backoff_s * (2 ** n)
            if attempt.retry_after_s is not None:
                delay = max(delay, attempt.retry_after_s)
            if time.perf_counter() - t0 + delay > self.timeout_s:
                break  # the next attempt could not finish inside the request's limit
            time.sleep(delay)
        return SystemResponse(q.query_id, FAILED, (time.perf_counter() - t0) * 1000.0,
                              error=self._redact(attempt.error),
                              http_status=attempt.http_status, attempts=n + 1)

    def _redact(self, text: str) -> str:
        """An error text without the configured secrets or echoed credentials (stored in
        system.parquet, printed at preflight)."""
        return redact(text, secret_values(self.api_key_env, self.headers))

    def _attempt(self, q: SystemQuery, body: Any, t0: float) -> _Attempt:
        httpx = _httpx()
        client = self._http()
        # timeout_s bounds the whole request from t0, retries, headers and body included:
        # Deadline shuts the socket down when the time is up, however slowly bytes arrive
        deadline = Deadline(self.timeout_s, start=t0)
        kwargs: dict[str, Any] = {"headers": self._headers(), "timeout": deadline.remaining(),
                                  "extensions": deadline.extensions()}
        if self.method == "POST":
            kwargs["json"] = body
        try:
            with deadline, client.stream(self.method, self._url(), **kwargs) as resp:
                deadline.attach(resp)
                if resp.status_code != 200:
                    # the whole body is redacted before it is cut to its first 200 characters
                    text = self._redact(resp.read().decode("utf-8", "replace"))
                    return _Attempt(None, resp.status_code in RETRY_STATUS,
                                    f"HTTP {resp.status_code}: {' '.join(text.split())[:200]}",
                                    resp.status_code,
                                    retry_after(resp.headers.get("retry-after")))
                if self.stream:
                    r = self._consume(q, resp, t0, deadline.end)
                else:
                    raw = resp.read()
                    if deadline.expired:
                        raise _Deadline
                    r = self._parsed(q, raw, t0)
                return _Attempt(self._header_timing(r, resp.headers.get("server-timing")),
                                False, "")
        except (_Deadline, httpx.TimeoutException):
            return self._timeout(q, t0)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if deadline.fired:
                return self._timeout(q, t0)
            return _Attempt(None, True, f"{type(exc).__name__}: {exc}")
        except httpx.HTTPError as exc:
            if deadline.fired:
                return self._timeout(q, t0)
            return _Attempt(None, False, f"{type(exc).__name__}: {exc}")

    def _timeout(self, q: SystemQuery, t0: float) -> _Attempt:
        return _Attempt(SystemResponse(q.query_id, TIMEOUT, (time.perf_counter() - t0) * 1000.0,
                                       error=f"no complete response within "
                                             f"{self.timeout_s:g} s"), False, "")

    def _header_timing(self, r: SystemResponse, header: str | None) -> SystemResponse:
        """The server's ``Server-Timing: total`` when asked for and no field is mapped."""
        if not self.server_timing_header or r.server_ms or r.status != OK:
            return r
        total = server_total_ms(header)
        return r if total is None else replace(r, server_ms=(("total", total),))

    def _parsed(self, q: SystemQuery, raw: bytes, t0: float) -> SystemResponse:
        got = time.perf_counter()
        try:
            parsed = self.mapping.parse(loads_body(raw))
        except MappingError as exc:
            return self._invalid(q, t0, str(exc), got)
        except ValueError as exc:  # malformed JSON, invalid UTF-8, NaN / Infinity
            return self._invalid(q, t0, f"body is not JSON ({exc}): "
                                        f"{self._redact(repr(raw))[:120]}", got)
        end = time.perf_counter()
        return self._response(q, parsed, t0, end, (end - got) * 1000.0, None)

    def _consume(self, q: SystemQuery, resp: Any, t0: float, deadline: float) -> SystemResponse:
        parts: list[str] = []
        first: float | None = None
        client_s = 0.0
        fields: dict[str, Any] = {}
        events = iter_sse_data(resp.iter_lines())
        while True:
            try:
                data = next(events)
            except StopIteration:
                break
            except StreamCut as exc:  # the last event never ended: an incomplete answer
                return self._invalid(q, t0, str(exc), time.perf_counter())
            now = time.perf_counter()
            if now > deadline:
                raise _Deadline
            if data.strip() == "[DONE]":
                break
            try:
                event = loads_body(data)
                delta = self.mapping.delta_of(event)
                p = self.mapping.parse(event, partial=True)
            except MappingError as exc:
                return self._invalid(q, t0, str(exc), now)
            except ValueError as exc:
                return self._invalid(q, t0, f"stream event is not JSON ({exc}): "
                                            f"{self._redact(repr(data))[:120]}", now)
            if delta:
                parts.append(delta)
                first = now if first is None else first
            fields.update({k: v for k, v in vars(p).items() if v not in (None, (), "")})
            client_s += time.perf_counter() - now
        end = time.perf_counter()
        if self.mapping.delta is not None:
            fields["answer"] = "".join(parts) if parts else fields.get("answer", "")
        missing = self._missing(fields)
        if missing is not None:
            return self._invalid(q, t0, missing, end)
        return self._response(q, Parsed(**fields), t0, end, client_s * 1000.0,
                              None if first is None else (first - t0) * 1000.0)

    def _missing(self, fields: Mapping[str, Any]) -> str | None:
        """A streamed response must have carried every mapped field somewhere."""
        m = self.mapping
        if m.documents is not None and "doc_ids" not in fields:
            return "response.documents: no event of the stream carried it"
        if m.answer is not None and m.delta is None and "answer" not in fields:
            return "response.answer: no event of the stream carried it"
        return None

    def _response(self, q: SystemQuery, p: Parsed, t0: float, end: float, client_ms: float,
                  ttft_ms: float | None) -> SystemResponse:
        ids = p.doc_ids
        if self.doc_id_separator is not None:
            sep = self.doc_id_separator
            ids = tuple(d.rsplit(sep, 1)[0] if sep in d else d for d in ids)
        return SystemResponse(
            q.query_id, OK, (end - t0) * 1000.0, doc_ids=ids,
            scores=p.scores if p.scores is not None else (),
            passages=p.passages, answer=p.answer, citations=p.citations, ttft_ms=ttft_ms,
            client_ms=client_ms, server_ms=p.server_ms, http_status=200)

    @staticmethod
    def _invalid(q: SystemQuery, t0: float, error: str, got: float) -> SystemResponse:
        end = time.perf_counter()
        return SystemResponse(q.query_id, INVALID, (end - t0) * 1000.0,
                              client_ms=(end - got) * 1000.0, error=error, http_status=200)


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise MissingDependencyError("httpx", "cpu", "system=http") from None
    # one INFO line per request would drown the run's log: system.parquet has every request
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return httpx
