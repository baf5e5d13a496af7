"""Asynchronous HTTP target: one keep-alive client session (:mod:`bench.capacity.transport`)
on the driver's event loop, many requests in flight, round-robin over replicas.

A request is ``POST {url}{path}`` with ``body(query)`` as JSON. A ``text/event-stream``
reply is read as server-sent events: every ``data:`` event that carries text is one content
chunk (TTFT = the first, ITL = the gaps; vLLM streams one token per chunk), ``[DONE]`` or
the end of the stream finishes it. The text of a chunk is read from OpenAI's
``choices[0].delta.content`` / ``choices[0].text`` or a ``token`` / ``delta`` / ``text``
field; an event with an ``answer`` field sets the final answer (``bench.serve``'s
``retrieval`` / ``token`` / ``done`` events read that way). Any other reply is read whole (no
TTFT): its ``answer`` / ``text`` field, or a retrieval reply's ``hits`` as space-separated
doc ids in rank order.

Status mapping: 2xx ``ok``; 429 and 503 ``rate_limited`` (retryable, ``Retry-After``
honoured); an SSE ``event: error`` ``failed``; a refused or reset connection before any
content ``failed`` and retryable (a restarting server); a stream cut after content
``failed``, not retried, the partial text kept; 502 (a gateway whose backend is down)
``failed`` and retryable; other statuses ``failed``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.capacity import transport
from bench.capacity.driver import Reply
from bench.http.client import redact, secret_values

RATE_LIMITED = frozenset({429, 503})
_JSON = {"content-type": "application/json"}


def _chunk_text(payload: Any) -> tuple[str | None, str | None]:
    """(content of one chunk, final answer) of one SSE payload."""
    if not isinstance(payload, dict):
        return None, None
    answer = payload.get("answer")
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        c = choices[0]
        delta = c.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else c.get("text")
        return (text if isinstance(text, str) and text else None,
                answer if isinstance(answer, str) else None)
    for key in ("token", "delta", "text"):
        v = payload.get(key)
        if isinstance(v, str) and v:
            return v, answer if isinstance(answer, str) else None
    return None, answer if isinstance(answer, str) else None


def _json_answer(obj: Any) -> str:
    """A whole JSON reply's answer: its ``answer`` / ``text``, else the doc ids of its
    ``hits`` in rank order, space-separated (a retrieval reply), else the JSON itself."""
    if isinstance(obj, dict):
        got = obj.get("answer", obj.get("text"))
        if isinstance(got, str):
            return got
        hits = obj.get("hits")
        if isinstance(hits, list):
            return " ".join(str(h.get("doc_id")) for h in hits if isinstance(h, dict))
    return json.dumps(obj)


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


class HttpTarget:
    """``async with HttpTarget([...urls], path="/v1/answer", body=...) as t: await t.send(q)``.
    ``urls``: one per replica, taken in turn (a round-robin client). ``headers``: sent with
    every request (a credential among them is redacted from every error text kept)."""

    def __init__(self, urls: Sequence[str], *, path: str, body: Callable[[int], dict[str, Any]],
                 timeout_s: float = 30.0, max_connections: int = 1000,
                 name: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        if not urls:
            raise ValueError("HttpTarget needs at least one url")
        self.urls = [u.rstrip("/") for u in urls]
        self.path = path
        self.body = body
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.headers = dict(headers or {})
        self._secrets = secret_values(headers=self.headers)
        self.name = name or f"{self.urls[0]}{path}" + (
            f" (+{len(self.urls) - 1} replicas, round-robin)" if len(self.urls) > 1 else "")
        self._turn = itertools.cycle(range(len(self.urls)))
        self._client: Any = None

    async def __aenter__(self) -> HttpTarget:
        self._client = transport.session(timeout_s=self.timeout_s,
                                         max_connections=self.max_connections,
                                         headers=self.headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def send(self, query: int) -> Reply:
        replica = next(self._turn)
        url = self.urls[replica] + self.path
        started = time.perf_counter()
        first: float | None = None
        later: list[float] = []
        parts: list[str] = []
        answer: str | None = None
        try:
            async with self._client.post(url, data=json.dumps(self.body(query)).encode(),
                                         headers=_JSON) as resp:
                if resp.status in RATE_LIMITED:
                    await resp.read()
                    return Reply("rate_limited", started, time.perf_counter(),
                                 error=f"HTTP {resp.status}", retry=True,
                                 retry_after_s=_retry_after(transport.header(resp,
                                                                             "retry-after")),
                                 replica=replica)
                if resp.status >= 400:
                    await resp.read()
                    # 502: a gateway whose backend is down (restarting) — nothing was served
                    return Reply("failed", started, time.perf_counter(),
                                 error=f"HTTP {resp.status}", replica=replica,
                                 retry=resp.status == 502)
                if transport.content_type(resp).startswith("text/event-stream"):
                    event = ""
                    async for line in transport.lines(resp):
                        if line.startswith("event:"):
                            event = line[6:].strip()
                            continue
                        if not line.startswith("data:"):
                            if not line:
                                event = ""
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            break
                        if event == "error":  # the server failed mid-answer and said so
                            return Reply("failed", started, time.perf_counter(), first,
                                         tuple(later), len(parts), "".join(parts) or None,
                                         "server error event: "
                                         f"{redact(data, self._secrets)[:200]}",
                                         replica=replica)
                        try:
                            text, final = _chunk_text(json.loads(data))
                        except json.JSONDecodeError:
                            text, final = data or None, None
                        now = time.perf_counter()
                        if final is not None:
                            answer = final
                        if text is None:
                            continue
                        if first is None:
                            first = now
                        else:
                            later.append(now)
                        parts.append(text)
                else:
                    raw = await resp.read()
                    try:
                        answer = _json_answer(json.loads(raw))
                    except json.JSONDecodeError:
                        answer = raw.decode(errors="replace")
        except transport.TIMEOUT:
            return Reply("timeout", started, time.perf_counter(), first, tuple(later),
                         len(parts), "".join(parts) or None, "client timeout", replica=replica)
        except transport.TRANSPORT as exc:
            # Before any content the server may be restarting: retry. After content, the
            # user already saw a partial answer: keep it, do not retry.
            return Reply("failed", started, time.perf_counter(), first, tuple(later),
                         len(parts), "".join(parts) or None,
                         redact(f"{type(exc).__name__}: {exc}", self._secrets)[:200],
                         retry=first is None,
                         replica=replica)
        end = time.perf_counter()
        text = "".join(parts)
        return Reply("ok", started, end, first, tuple(later), len(parts),
                     answer if answer is not None else (text or None), replica=replica)
