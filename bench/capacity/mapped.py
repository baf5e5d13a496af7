"""``capacity.target=http``: load against any endpoint, read through ``system=http``'s
request template and response mapping (``bench.system.mapping``; no second mapping here).

An :class:`Endpoint` is one service to load: its URL and ``api``:

===============  ==============================================================================
``rag``          a RAG API described like ``system=http``: ``request`` (the JSON template,
                 placeholders ``{query}``, ``{query_id}``, ``{roles}``, ``{tenant}``),
                 ``response`` (documents / doc_id / score / passage / answer / citations /
                 server_timings / delta) and ``stream``
``chat``         OpenAI ``POST /v1/chat/completions``, streamed (vLLM, SGLang, TGI): the
                 query as one user message, the answer from ``choices.0.delta.content``
``completions``  OpenAI ``POST /v1/completions``, streamed: the query as the prompt, the
                 answer from ``choices.0.text``
``embeddings``   OpenAI ``POST /v1/embeddings``: the query as ``input``; the reply must carry
                 ``data`` (one item per input, with its ``index``)
``rerank``       ``POST /rerank`` (Cohere / Jina / TEI / Infinity shape): the query and its
                 candidate ``documents``; the reply's ``results`` (``index``,
                 ``relevance_score``) is the ranking, mapped back to the candidates' doc ids
===============  ==============================================================================

The OpenAI and rerank shapes are presets: a template and a mapping of the same kind a
``rag`` endpoint states itself, so every reply is read by the one mapping code
(:class:`bench.system.mapping.ResponseMapping`) and every option is checked by
:class:`bench.system.http.HTTPSystem` (URL, method, template placeholders, the mapping,
``api_key_env``: a bearer token read from that environment variable at request time, never
stored or logged).

:class:`MappedTarget` is the asynchronous twin of ``HTTPSystem``'s request: one
keep-alive client session (:mod:`bench.capacity.transport`) on the driver's loop, many
requests in flight. A streamed reply's
answer is joined from each event's ``delta``, its other fields read from the events that
carry them; TTFT is the first non-empty delta, ITL the gaps between deltas. Each reply is
one :class:`bench.capacity.driver.Reply`; ``answer`` holds what the quality metric reads:
the ranked doc ids, space-separated (``reads="ranking"``), or the answer text.

Statuses: ``ok``; ``invalid`` (a body that is not JSON or does not fit the mapping: the
error names the mapping key); ``rate_limited`` (429/503, retryable, ``Retry-After``
honoured); ``failed`` (a refused connection — retryable —, a 5xx, another 4xx, a stream cut
after content with its partial answer kept); ``timeout``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.capacity.driver import Reply
from bench.config.build import OptionError
from bench.errors import ConfigError

API = ("rag", "chat", "completions", "embeddings", "rerank")
Reads = Literal["ranking", "answer", "none"]
RATE_LIMITED = frozenset({429, 503})


@dataclass(frozen=True)
class EndpointQuery:
    """What one request of query q is built from: the golden query, and for ``rerank`` its
    candidate passages as ``(doc_id, text)``."""

    query_id: str
    text: str
    roles: tuple[str, ...] = ()
    tenant: str = ""
    candidates: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Endpoint:
    """One service to load (see the module docstring). ``urls``: one per replica of the same
    service (round-robin; more than one enables the scale-out check)."""

    name: str
    api: str
    urls: tuple[str, ...]
    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    stream: bool = False
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    api_key_env: str | None = None
    model: str | None = None
    max_tokens: int = 64
    doc_id_separator: str | None = None


def preset(ep: Endpoint) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(request template, response mapping, stream) of the endpoint's api."""
    model = {"model": ep.model} if ep.model else {}
    if ep.api == "rag":
        if ep.response is None:
            raise OptionError("response", "a rag endpoint needs the response mapping "
                              "(documents/doc_id and/or answer or delta), as system=http")
        return dict(ep.request or {"query": "{query}"}), dict(ep.response), ep.stream
    if ep.api == "chat":
        return ({**model, "messages": [{"role": "user", "content": "{query}"}], "stream": True,
                 "max_tokens": ep.max_tokens},
                {"delta": "choices.0.delta.content"}, True)
    if ep.api == "completions":
        return ({**model, "prompt": "{query}", "stream": True, "max_tokens": ep.max_tokens},
                {"delta": "choices.0.text"}, True)
    if ep.api == "embeddings":
        return {**model, "input": "{query}"}, {"documents": "data", "doc_id": "index"}, False
    if ep.api == "rerank":
        return ({**model, "query": "{query}"},
                {"documents": "results", "doc_id": "index", "score": "relevance_score"}, False)
    raise OptionError("api", f"{ep.api!r}: one of {', '.join(API)}")


def build_system(ep: Endpoint, *, key: str, timeout_s: float) -> Any:
    """The endpoint's options checked by ``HTTPSystem`` (the mapping and template code of
    ``system=http``); a bad one is a ConfigError naming ``<key>.<option>``."""
    from bench.system.http import HTTPSystem

    if not ep.urls:
        raise ConfigError(f"{key}.url", "an endpoint needs a url")
    try:
        request, response, stream = preset(ep)
        return HTTPSystem(url=ep.urls[0], response=response, request=request,
                          method=ep.method, stream=stream, headers=dict(ep.headers),
                          api_key_env=ep.api_key_env, preflight=False, timeout_s=timeout_s,
                          doc_id_separator=ep.doc_id_separator, name="capacity")
    except OptionError as exc:
        raise ConfigError(f"{key}.{exc.option}", exc.message) from None


class MappedTarget:
    """``async with MappedTarget(ep, queries, ...) as t: await t.send(q)`` — one request of
    query ``q`` through the endpoint's template and mapping (see the module docstring)."""

    def __init__(self, ep: Endpoint, queries: Sequence[EndpointQuery], *, key: str,
                 reads: Reads = "answer", timeout_s: float = 30.0,
                 max_connections: int = 1000, urls: Sequence[str] | None = None,
                 name: str | None = None) -> None:
        self.ep = ep
        self.system = build_system(ep, key=key, timeout_s=timeout_s)
        self.mapping = self.system.mapping
        self.queries = list(queries)
        self.reads = reads
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.urls = [u for u in (urls or ep.urls)]
        self.name = name or f"{ep.name} ({ep.api}) {self.urls[0]}" + (
            f" (+{len(self.urls) - 1} replicas, round-robin)" if len(self.urls) > 1 else "")
        self._turn = itertools.cycle(range(len(self.urls)))
        self._client: Any = None

    async def __aenter__(self) -> MappedTarget:
        from bench.capacity import transport

        self._client = transport.session(timeout_s=self.timeout_s,
                                         max_connections=self.max_connections)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def body(self, q: int) -> Any:
        eq = self.queries[q]
        from bench.system.base import SystemQuery

        body = self.system.body(SystemQuery(eq.query_id, eq.text, eq.roles, eq.tenant))
        if self.ep.api == "rerank" and isinstance(body, dict):
            body["documents"] = [t for _, t in eq.candidates]
        return body

    def _answer(self, q: int, fields: Mapping[str, Any]) -> str | None:
        ids: tuple[str, ...] = tuple(fields.get("doc_ids", ()))
        if self.ep.api == "rerank":
            # the reply ranks the candidates by index: back to their doc ids, best first
            cands = self.queries[q].candidates
            scores = fields.get("scores")
            pos = [int(i) for i in ids]
            if any(not 0 <= i < len(cands) for i in pos):
                raise _Invalid("response.doc_id: a result index is not one of the "
                               f"{len(cands)} candidates")
            order = (sorted(range(len(pos)), key=lambda k: -scores[k]) if scores
                     else range(len(pos)))
            ids = tuple(cands[pos[k]][0] for k in order)
        elif self.ep.doc_id_separator is not None:
            sep = self.ep.doc_id_separator
            ids = tuple(d.rsplit(sep, 1)[0] if sep in d else d for d in ids)
        if self.reads == "ranking":
            return " ".join(dict.fromkeys(ids))  # a document's first (best) place counts
        answer = fields.get("answer")
        return answer if isinstance(answer, str) else (" ".join(ids) if ids else None)

    async def send(self, query: int) -> Reply:
        from bench.capacity import transport
        from bench.system.mapping import MappingError, Parsed

        replica = next(self._turn)
        url = self.urls[replica]
        started = time.perf_counter()
        first: float | None = None
        later: list[float] = []
        parts: list[str] = []
        fields: dict[str, Any] = {}
        kw: dict[str, Any] = {"headers": self.system._headers()}
        if self.system.method == "POST":
            kw["data"] = json.dumps(self.body(query)).encode()
            if not any(k.lower() == "content-type" for k in kw["headers"]):
                kw["headers"] = {**kw["headers"], "content-type": "application/json"}
        try:
            async with self._client.request(self.system.method, url, **kw) as resp:
                if resp.status in RATE_LIMITED:
                    await resp.read()
                    return Reply("rate_limited", started, time.perf_counter(),
                                 error=f"HTTP {resp.status}", retry=True,
                                 retry_after_s=_retry_after(transport.header(resp,
                                                                             "retry-after")),
                                 replica=replica)
                if resp.status >= 400:
                    raw = await resp.read()
                    return Reply("failed", started, time.perf_counter(),
                                 error=f"HTTP {resp.status}: "
                                       f"{raw[:120].decode(errors='replace')}",
                                 replica=replica, retry=resp.status == 502)
                if self.system.stream:
                    data: list[str] = []
                    async for line in transport.lines(resp):
                        if line.startswith("data:"):
                            v = line[5:]
                            data.append(v[1:] if v.startswith(" ") else v)
                            continue
                        if line or not data:
                            continue  # comments, event:/id: fields, keep-alives
                        payload, data = "\n".join(data), []
                        if payload.strip() == "[DONE]":
                            break
                        now = time.perf_counter()
                        try:
                            event = json.loads(payload)
                            delta = self.mapping.delta_of(event)
                            p = self.mapping.parse(event, partial=True)
                        except json.JSONDecodeError:
                            raise _Invalid(f"stream event is not JSON: {payload[:80]!r}"
                                           ) from None
                        if delta:
                            parts.append(delta)
                            if first is None:
                                first = now
                            else:
                                later.append(now)
                        fields.update({k: v for k, v in vars(p).items()
                                       if v not in (None, (), "")})
                    if self.mapping.delta is not None:
                        fields["answer"] = "".join(parts) if parts else fields.get("answer", "")
                    missing = self.system._missing(fields)
                    if missing is not None:
                        raise _Invalid(missing)
                else:
                    raw = await resp.read()
                    try:
                        fields = vars(self.mapping.parse(json.loads(raw)))
                    except json.JSONDecodeError:
                        raise _Invalid(f"body is not JSON: {raw[:80]!r}") from None
                    Parsed(**fields)
                answer = self._answer(query, fields)
        except (_Invalid, MappingError) as exc:
            return Reply("invalid", started, time.perf_counter(), first, tuple(later),
                         len(parts), "".join(parts) or None, str(exc)[:300], replica=replica)
        except transport.TIMEOUT:
            return Reply("timeout", started, time.perf_counter(), first, tuple(later),
                         len(parts), "".join(parts) or None, "client timeout", replica=replica)
        except transport.TRANSPORT as exc:
            # before any content the service may be restarting: retry; after content the
            # user saw a partial answer: keep it, do not retry
            return Reply("failed", started, time.perf_counter(), first, tuple(later),
                         len(parts), "".join(parts) or None,
                         f"{type(exc).__name__}: {exc}"[:200], retry=first is None,
                         replica=replica)
        return Reply("ok", started, time.perf_counter(), first, tuple(later), len(parts),
                     answer, replica=replica)


class _Invalid(Exception):
    pass


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


async def preflight(target: MappedTarget, *, key: str, query: int = 0) -> Reply:
    """One request before any load: a refused connection, an HTTP error or a reply the
    mapping does not fit is a ConfigError naming the key (exit 2 before work)."""
    r = await target.send(query)
    if r.status == "ok":
        return r
    if r.status == "invalid":
        err = r.error
        mkey, sep, why = err.partition(": ")
        if sep and mkey.startswith("response"):
            raise ConfigError(f"{key}.{mkey}", f"the reply of {target.urls[0]} does not fit: "
                                              f"{why}")
        raise ConfigError(f"{key}.response", f"the reply of {target.urls[0]} does not fit: "
                                             f"{err}")
    raise ConfigError(f"{key}.url", f"preflight request to {target.urls[0]} {r.status}: "
                                    f"{r.error}")
