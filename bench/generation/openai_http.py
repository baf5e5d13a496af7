"""OpenAI-compatible chat-completions client with streaming, for `vllm serve` or any server
that speaks the API.

Latency is measured from the stream on the client's monotonic clock: TTFT is the time from
sending the request to the first chunk that carries content, ITL the gaps between content
chunks (vLLM streams one token per chunk; a server that batches tokens into chunks gives
fewer, longer gaps), TPOT = (e2e - TTFT) / (output_tokens - 1) with the token count from the
server's ``usage`` (``stream_options.include_usage``).

The server is either given (``base_url``) or started here (``serve_command``, default
``vllm serve``) on a free port, health-checked before use, and stopped (SIGTERM, then SIGKILL)
by ``close()`` or at interpreter exit. It is started on first use, not at construction, so a
config can be validated without launching anything.

The API key is read from the environment variable named by ``api_key_env`` at request time; it
is never stored on the object, logged, or part of ``cache_params``.
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.config.build import OptionError
from bench.errors import BenchError, MissingDependencyError
from bench.generation.base import Generation, GenerationRequest
from bench.http.client import (  # shared with the other remote backends
    RETRY_STATUS,
    Deadline,
    StreamCut,
    api_key_headers,
    check_api_key_env,
    free_port,
    iter_sse_data,
    loads_body,
    redact,
    retry_after,
    secret_values,
)

log = logging.getLogger(__name__)

DEFAULT_SERVE_COMMAND = ("vllm", "serve", "{model}", "--host", "{host}", "--port", "{port}")


class ServerError(BenchError):
    """The managed server did not come up (or the given one is unreachable)."""


@dataclass(frozen=True)
class _Attempt:
    """Outcome of one HTTP attempt; ``retry`` says whether another attempt may help."""

    generation: Generation | None
    retry: bool
    error: str
    retry_after_s: float | None = None


class ManagedServer:
    """A server subprocess on a free port; its stdout/stderr go to ``log_path``."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        model: str,
        log_path: Path,
        host: str = "127.0.0.1",
        startup_timeout_s: float = 900.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.port = free_port(host)
        self.host = host
        self.log_path = log_path
        self.stop_timeout_s = stop_timeout_s
        fields = {"model": model, "port": str(self.port), "host": host}
        self.command = [part.format(**fields) for part in command]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        try:
            # A new session: stop() signals the whole group (vllm serve forks engine workers).
            self.proc = subprocess.Popen(
                self.command,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except FileNotFoundError:
            self._log.close()
            if self.command[0] == "vllm":
                raise MissingDependencyError(
                    "vllm", "vllm", "generator=openai_http with a managed `vllm serve`"
                ) from None
            raise ServerError(f"server command not found: {self.command[0]!r}") from None
        log.info("generator: started %s (pid %d), log %s", self.command[0], self.proc.pid, log_path)
        atexit.register(self.stop)
        self._wait_healthy(startup_timeout_s)

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _wait_healthy(self, timeout_s: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise ServerError(
                    f"server exited with code {self.proc.returncode} before becoming healthy; "
                    f"see {self.log_path}"
                )
            if _healthy(httpx, self.root, timeout_s=2.0):
                return
            time.sleep(0.25)
        self.stop()
        raise ServerError(f"server not healthy after {timeout_s:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
            log.info("generator: stopped server pid %d", proc.pid)
        if not self._log.closed:
            self._log.close()
        atexit.unregister(self.stop)


def _healthy(httpx: Any, root: str, *, timeout_s: float, api_root: str | None = None) -> bool:
    """``/health`` (vLLM) or, failing that, ``/v1/models`` answers 200."""
    for url in (f"{root}/health", f"{api_root or root + '/v1'}/models"):
        try:
            if httpx.get(url, timeout=timeout_s).status_code == 200:
                return True
        except httpx.HTTPError:
            continue
    return False


class OpenAIHTTPGenerator:
    """Streaming chat-completions client.

    ``base_url``: the API root of a running server (``http://host:8000/v1``); when null, the
    server is started with ``serve_command`` (``{model}``, ``{host}``, ``{port}`` are filled
    in) plus ``serve_args``, its log written to ``server_log`` (the config puts it in the
    Hydra run dir; null: a file in the system temp dir, named in the log).
    ``max_concurrency`` requests are in flight at once; each has ``timeout_s`` end to end.
    Connection errors, 429 and 5xx are retried up to ``max_retries`` times with exponential
    backoff from ``backoff_s`` (a 429's Retry-After is honoured); other 4xx are not retried.
    ``tokenizer``: a local Hugging Face tokenizer path for ``count_tokens``; when null the
    server's ``/tokenize`` endpoint (vLLM) is used. ``extra_body``: further request fields
    (``top_k``, ``repetition_penalty``...), part of ``cache_params``.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        serve_command: list[str] | None = None,
        serve_args: list[str] | None = None,
        server_log: str | None = None,
        api_key_env: str | None = None,
        max_concurrency: int = 8,
        timeout_s: float = 300.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        startup_timeout_s: float = 900.0,
        tokenizer: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise OptionError("model", "must name the served model")
        if max_concurrency < 1:
            raise OptionError("max_concurrency", f"must be >= 1, got {max_concurrency}")
        if timeout_s <= 0:
            raise OptionError("timeout_s", f"must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise OptionError("max_retries", f"must be >= 0, got {max_retries}")
        if backoff_s < 0:
            raise OptionError("backoff_s", f"must be >= 0, got {backoff_s}")
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise OptionError("base_url", f"must start with http:// or https://, got {base_url!r}")
        check_api_key_env(api_key_env)
        command = list(serve_command) if serve_command else list(DEFAULT_SERVE_COMMAND)
        if base_url is None and "{port}" not in " ".join(command):
            raise OptionError("serve_command", "must contain {port} (the server's port)")
        self.model = model
        self.base_url = base_url.rstrip("/") if base_url else None
        self.serve_command = command
        self.serve_args = list(serve_args or [])
        self.server_log = server_log
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.startup_timeout_s = float(startup_timeout_s)
        self.tokenizer = tokenizer
        self.extra_body = dict(extra_body or {})
        self._server: ManagedServer | None = None
        self._client: Any = None
        self._tok: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        where = self.base_url or f"managed {self.serve_command[0]}"
        return f"OpenAIHTTPGenerator(model={self.model!r}, server={where!r})"

    # -- Protocol ---------------------------------------------------------------------------
    def cache_params(self) -> dict[str, object]:
        # Where the server runs does not change answers; how it was started does.
        params: dict[str, object] = {"backend": "openai_http", "model": self.model}
        if self.base_url is None:
            params["serve_command"] = [self.serve_command[0], *self.serve_args]
        if self.extra_body:
            params["extra_body"] = dict(sorted(self.extra_body.items()))
        return params

    def count_tokens(self, text: str) -> int:
        if self.tokenizer is not None:
            if self._tok is None:
                from transformers import AutoTokenizer

                self._tok = AutoTokenizer.from_pretrained(self.tokenizer)
            return len(self._tok(text, add_special_tokens=False)["input_ids"])
        api = self._api_root()
        root = api[: -len("/v1")] if api.endswith("/v1") else api
        resp = self._http().post(
            f"{root}/tokenize",
            json={"model": self.model, "prompt": text, "add_special_tokens": False},
            headers=self._headers(),
            timeout=self.timeout_s,
        )
        if resp.status_code != 200:
            raise ServerError(
                f"{root}/tokenize answered {resp.status_code}; set generator.tokenizer to a "
                "local tokenizer path for servers without it"
            )
        body = resp.json()
        return int(body["count"]) if "count" in body else len(body["tokens"])

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if not requests:
            return []
        api = self._api_root()
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests))) as pool:
            return list(pool.map(lambda r: self._one(api, r), requests))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._client is not None:
                self._client.close()
                self._client = None
            if self._server is not None:
                self._server.stop()
                self._server = None

    # -- internals --------------------------------------------------------------------------
    def _http(self) -> Any:
        try:
            import httpx
        except ImportError:
            raise MissingDependencyError("httpx", "cpu", "generator=openai_http") from None
        with self._lock:
            if self._client is None:
                limits = httpx.Limits(max_connections=self.max_concurrency)
                self._client = httpx.Client(limits=limits, timeout=self.timeout_s)
            return self._client

    def _api_root(self) -> str:
        if self.base_url is not None:
            return self.base_url
        with self._lock:
            if self._closed:
                raise ServerError("generator is closed")
            if self._server is None:
                log_path = Path(
                    self.server_log
                    or tempfile.mkstemp(prefix="bench-server-", suffix=".log")[1]
                )
                self._server = ManagedServer(
                    [*self.serve_command, *self.serve_args],
                    model=self.model,
                    log_path=log_path,
                    startup_timeout_s=self.startup_timeout_s,
                )
            return self._server.root + "/v1"

    def _headers(self) -> dict[str, str]:
        return {"Accept": "text/event-stream", **api_key_headers(self.api_key_env)}

    def _body(self, req: GenerationRequest) -> dict[str, Any]:
        s = req.sampling
        body: dict[str, Any] = {
            **self.extra_body,
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in req.messages],
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if req.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": json.loads(req.json_schema)},
            }
        return body

    def _one(self, api: str, req: GenerationRequest) -> Generation:
        body = self._body(req)
        start = time.perf_counter()
        attempt = _Attempt(None, False, "not attempted")
        n = 0
        for n in range(self.max_retries + 1):
            attempt = self._attempt(api, req, body)
            if attempt.generation is not None:
                g = attempt.generation
                return dataclasses.replace(
                    g, attempts=n + 1, error=None if g.error is None else self._redact(g.error))
            if not attempt.retry or n == self.max_retries:
                break
            delay = self.backoff_s * (2**n)
            if attempt.retry_after_s is not None:
                delay = max(delay, attempt.retry_after_s)
            log.debug("generator: %s retry %d after %s", req.request_id, n + 1,
                      self._redact(attempt.error))
            time.sleep(delay)
        return dataclasses.replace(_failed(req, "error", self._redact(attempt.error), start),
                                   attempts=n + 1)

    def _redact(self, text: str) -> str:
        """An error text without the API key or credentials a server echoed back."""
        return redact(text, secret_values(self.api_key_env))

    def _attempt(self, api: str, req: GenerationRequest, body: dict[str, Any]) -> _Attempt:
        import httpx

        client = self._http()
        t0 = time.perf_counter()
        # timeout_s bounds the whole attempt, its stream included (Deadline shuts the socket
        # down when the time is up, however slowly the server sends)
        deadline = Deadline(self.timeout_s, start=t0)
        try:
            with deadline, client.stream(
                "POST", f"{api}/chat/completions", json=body, headers=self._headers(),
                timeout=deadline.remaining(), extensions=deadline.extensions()
            ) as resp:
                deadline.attach(resp)
                if resp.status_code != 200:
                    text = self._redact(resp.read().decode("utf-8", "replace"))
                    msg = f"HTTP {resp.status_code}: {text[:300]}"
                    retry = resp.status_code in RETRY_STATUS
                    after = retry_after(resp.headers.get("retry-after"))
                    return _Attempt(None, retry, msg, after)
                return _Attempt(self._consume(req, resp, t0, deadline.end), False, "")
        except httpx.TimeoutException:
            return _Attempt(
                _failed(req, "timeout", f"no answer within {self.timeout_s:g} s", t0), False, ""
            )
        except _Deadline:
            return _Attempt(
                _failed(req, "timeout", f"stream exceeded {self.timeout_s:g} s", t0), False, ""
            )
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if deadline.fired:
                return _Attempt(
                    _failed(req, "timeout", f"stream exceeded {self.timeout_s:g} s", t0),
                    False, "")
            return _Attempt(None, True, f"{type(exc).__name__}: {exc}")
        except httpx.HTTPError as exc:
            if deadline.fired:
                return _Attempt(
                    _failed(req, "timeout", f"stream exceeded {self.timeout_s:g} s", t0),
                    False, "")
            return _Attempt(None, False, f"{type(exc).__name__}: {exc}")

    def _consume(
        self, req: GenerationRequest, resp: Any, t0: float, deadline: float
    ) -> Generation:
        parts: list[str] = []
        stamps: list[float] = []
        finish = "error"
        usage: dict[str, Any] = {}
        events = iter_sse_data(resp.iter_lines())
        while True:
            try:
                data = next(events)
            except StopIteration:
                break
            except StreamCut as exc:  # the last event never ended: an incomplete answer
                return _failed(req, "error", str(exc), t0)
            now = time.perf_counter()
            if now > deadline:
                raise _Deadline
            if data.strip() == "[DONE]":
                break
            try:
                event = loads_body(data)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                shown = self._redact(data)[:200]
                return _failed(req, "error", f"malformed stream event: {shown!r}", t0)
            if "error" in event:
                err = event["error"]
                msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
                return _failed(req, "error", f"server error in stream: {msg}", t0)
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    parts.append(content)
                    stamps.append(now)
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
        end = time.perf_counter()
        e2e = (end - t0) * 1000.0
        text = "".join(parts)
        if "completion_tokens" in usage:
            out_tokens = int(usage["completion_tokens"])
            prompt_tokens = int(usage.get("prompt_tokens", 0))
        else:
            # A server without include_usage: count with our tokenizer; the prompt count then
            # excludes the chat template's tokens.
            out_tokens = self.count_tokens(text) if text else 0
            prompt_tokens = sum(self.count_tokens(m.content) for m in req.messages)
        ttft = (stamps[0] - t0) * 1000.0 if stamps else None
        itl = tuple((b - a) * 1000.0 for a, b in itertools.pairwise(stamps))
        tpot = (e2e - ttft) / (out_tokens - 1) if ttft is not None and out_tokens > 1 else None
        ok = finish in ("stop", "length")
        return Generation(
            request_id=req.request_id,
            text=text,
            status="ok" if ok else "error",
            finish_reason=finish if ok else "error",
            prompt_tokens=prompt_tokens,
            output_tokens=out_tokens,
            ttft_ms=ttft,
            tpot_ms=tpot,
            e2e_ms=e2e,
            itl_ms=itl,
            error=None if ok else f"stream ended without a finish reason (got {finish!r})",
        )


class _Deadline(Exception):
    pass


def _failed(req: GenerationRequest, status: str, error: str, t0: float) -> Generation:
    e2e = (time.perf_counter() - t0) * 1000.0
    return Generation(
        request_id=req.request_id,
        text="",
        status=status,
        finish_reason=status,
        prompt_tokens=0,
        output_tokens=0,
        ttft_ms=None,
        tpot_ms=None,
        e2e_ms=e2e,
        error=error,
    )
