"""The ASGI application of ``bench.serve`` (FastAPI): one config's chain over HTTP.

Endpoints (request and response JSON in docs/serve.md):

- ``GET /health``: the process is alive (200 while loading too); ``GET /ready``: 200 once
  the index-time artifacts are loaded and the chain warmed up, 503 while loading, after a
  failed load and while draining;
- ``POST /v1/retrieve``: the config's query-time chain for one query -> ranked documents;
- ``POST /v1/answer``: retrieval, the config's context and its generator; streamed as
  server-sent events (``retrieval``, ``token``..., ``done``) unless ``stream: false``;
- ``POST /v1/embeddings``: OpenAI-compatible, the run's embedder;
- ``POST /v1/rerank`` (Cohere / Jina / vLLM shape) and ``POST /rerank`` (TEI shape): the
  run's reranker;
- ``POST /v1/chat/completions``: OpenAI-compatible, the run's generator, SSE chunks when
  ``stream: true``;
- ``GET /v1/models``, ``GET /v1/config``: what is served.

Every response carries ``X-Request-Id`` (the caller's, or a fresh one) and, for work
endpoints, ``Server-Timing`` with the server-side milliseconds of each latency stage, the
time the request waited for a worker (``queue``) and the whole request (``total``); JSON
bodies carry the same as ``timings_ms``. At most ``serve.max_concurrency`` requests run at
once, ``serve.max_queue`` more wait; a request beyond them is answered 503 with Retry-After
(so clients back off instead of piling up). Errors are ``{"error": {"message", "type",
"code"}}``: 400 for a malformed request, 404 for an endpoint the config cannot serve (no
reranker, no generator), 503 not ready / overloaded, 502 when a remote backend of the chain
failed, 500 for a bug (logged with its traceback; the server keeps serving).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from bench.errors import BenchError
from bench.generation.base import (
    ChatMessage,
    Generation,
    GenerationRequest,
    StreamingGenerator,
)
from bench.serve.service import Answered, BadRequest, Retrieved, ServeSettings, Service

if TYPE_CHECKING:
    from bench.traces.otel import GenAITracer

log = logging.getLogger("bench")

T = TypeVar("T")
REQUEST_ID = "X-Request-Id"


class ServeFailure(Exception):
    """An HTTP error with the body's type and code."""

    def __init__(self, status: int, message: str, kind: str, *,
                 retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.retry_after_s = retry_after_s


def _error_body(message: str, kind: str, status: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": status}}


@dataclass
class ServerState:
    """Lifecycle of the server: loading -> ready -> draining (or failed)."""

    phase: str = "loading"
    error: str | None = None
    running: int = 0
    waiting: int = 0
    started_unix: float = field(default_factory=time.time)
    lock: threading.Lock = field(default_factory=threading.Lock)


# -- request bodies ------------------------------------------------------------------------
class RetrieveBody(BaseModel):
    query: str | None = None
    query_id: str | None = None
    k: int | None = Field(default=None, ge=1)
    roles: list[str] | None = None
    tenant: str | None = None
    include_text: bool = False
    #: put on the request's OpenTelemetry spans when serve.traces is set (``user.id``,
    #: ``bench.route``, ``bench.feedback.thumbs``, ``bench.feedback.regenerated`` ...)
    trace_attributes: dict[str, str | int | float | bool] | None = None


class AnswerBody(RetrieveBody):
    stream: bool = True
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None


class EmbeddingsBody(BaseModel):
    input: str | list[str]
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    #: bench extension: encode as queries or documents (asymmetric prefixes)
    input_type: Literal["query", "document"] = "document"
    dimensions: int | None = None
    user: str | None = None


class RerankDocument(BaseModel):
    text: str


class CohereRerankBody(BaseModel):
    query: str
    documents: list[str | RerankDocument]
    model: str | None = None
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool = False


class TEIRerankBody(BaseModel):
    query: str
    texts: list[str]
    raw_scores: bool = False
    return_text: bool = False
    truncate: bool | None = None


class ChatMessageBody(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatBody(BaseModel):
    messages: list[ChatMessageBody] = Field(min_length=1)
    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=1)


# -- timing --------------------------------------------------------------------------------
def server_timing(ms: dict[str, float]) -> str:
    """A W3C ``Server-Timing`` header value (``stage;dur=ms, ...``)."""
    return ", ".join(f"{k};dur={v:.3f}" for k, v in ms.items())


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _hits_json(r: Retrieved) -> list[dict[str, Any]]:
    out = []
    for h in r.hits:
        row: dict[str, Any] = {"rank": h.rank, "doc_id": h.doc_id, "score": h.score,
                               "chunk": h.chunk, "title": h.title}
        if h.text is not None:
            row["text"] = h.text
        out.append(row)
    return out


def _generation_json(g: Generation) -> dict[str, Any]:
    return {"status": g.status, "finish_reason": g.finish_reason,
            "prompt_tokens": g.prompt_tokens, "output_tokens": g.output_tokens,
            "ttft_ms": g.ttft_ms, "tpot_ms": g.tpot_ms, "generate_ms": g.e2e_ms,
            "error": g.error}


def _span_docs(r: Retrieved) -> tuple[Any, ...]:
    from bench.traces.otel import SpanDoc

    return tuple(SpanDoc(h.doc_id, h.score, h.text) for h in r.hits)


def create_app(service: Service, settings: ServeSettings, state: ServerState, *,
               on_shutdown: Callable[[], None] | None = None,
               tracer: GenAITracer | None = None) -> FastAPI:
    """The app over a (possibly still loading) service; ``state`` is shared with the loader;
    ``tracer``: emit each retrieve / answer request's GenAI spans (``serve.traces``)."""
    from contextlib import asynccontextmanager

    limiter = anyio.CapacityLimiter(settings.max_concurrency)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        state.phase = "draining"
        if on_shutdown is not None:
            on_shutdown()

    app = FastAPI(title="bench.serve", lifespan=lifespan,
                  description=f"config {service.spec.config_id} {service.spec.label}")

    @app.middleware("http")
    async def request_id(request: Request, call_next: Any) -> Response:
        rid = request.headers.get(REQUEST_ID) or uuid.uuid4().hex
        request.state.request_id = rid
        request.state.t0 = time.perf_counter()
        request.state.t0_ns = time.time_ns()
        response: Response = await call_next(request)
        response.headers[REQUEST_ID] = rid
        return response

    @app.exception_handler(ServeFailure)
    async def failure(request: Request, exc: ServeFailure) -> JSONResponse:
        headers = {} if exc.retry_after_s is None else {"Retry-After": str(exc.retry_after_s)}
        return JSONResponse(_error_body(exc.message, exc.kind, exc.status), exc.status,
                            headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for e in exc.errors():
            where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            parts.append(f"{where or 'body'}: {e.get('msg', 'invalid')}")
        return JSONResponse(_error_body("; ".join(parts), "invalid_request_error", 400), 400)

    # -- admission and workers ------------------------------------------------------------
    def admit() -> None:
        if state.phase != "ready":
            raise ServeFailure(503, f"not ready ({state.phase})", "not_ready", retry_after_s=1)
        with state.lock:
            if state.running + state.waiting >= settings.max_concurrency + settings.max_queue:
                raise ServeFailure(503, f"overloaded: {state.running} requests running and "
                                   f"{state.waiting} waiting (serve.max_concurrency="
                                   f"{settings.max_concurrency}, serve.max_queue="
                                   f"{settings.max_queue})", "overloaded", retry_after_s=1)
            state.waiting += 1

    async def in_worker(fn: Callable[[], T]) -> tuple[T, float]:
        """Run admitted work on a worker thread: its result and the ms it waited."""
        t_wait = time.perf_counter()
        started: list[float] = []

        def run() -> T:
            started.append(time.perf_counter())
            with state.lock:
                state.waiting -= 1
                state.running += 1
            try:
                return fn()
            finally:
                with state.lock:
                    state.running -= 1

        try:
            out = await anyio.to_thread.run_sync(run, limiter=limiter)
        except BaseException:
            if not started:  # cancelled before it ran: it waits no more
                with state.lock:
                    state.waiting -= 1
            raise
        return out, (started[0] - t_wait) * 1000.0

    def work_error(exc: Exception, what: str) -> ServeFailure:
        if isinstance(exc, ServeFailure):
            return exc
        if isinstance(exc, BadRequest):
            return ServeFailure(400, str(exc), "invalid_request_error")
        if isinstance(exc, LookupError):
            return ServeFailure(404, str(exc).strip("'\""), "not_found")
        if isinstance(exc, BenchError):
            return ServeFailure(502, exc.one_line(), "backend_error")
        log.exception("serve: %s failed", what)
        return ServeFailure(500, f"{type(exc).__name__}: {exc}", "server_error")

    async def run_json(request: Request, what: str, fn: Callable[[], T]
                       ) -> tuple[T, dict[str, float]]:
        admit()
        try:
            out, queue_ms = await in_worker(fn)
        except Exception as exc:
            raise work_error(exc, what) from None
        return out, {"queue": queue_ms}

    def finish(request: Request, body: dict[str, Any], stages: dict[str, float]
               ) -> JSONResponse:
        total = (time.perf_counter() - request.state.t0) * 1000.0
        ms = {**stages, "total": total}
        body["timings_ms"] = ms
        body.setdefault("request_id", request.state.request_id)
        return JSONResponse(body, headers={"Server-Timing": server_timing(ms)})

    # -- lifecycle ------------------------------------------------------------------------
    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "alive", "phase": state.phase}

    @app.get("/ready")
    async def ready() -> JSONResponse:
        body: dict[str, Any] = {"status": state.phase, "config_id": service.spec.config_id,
                                "label": service.spec.label}
        if state.phase == "ready":
            body["load_s"] = service.load_s
            return JSONResponse(body)
        if state.error:
            body["error"] = state.error
        return JSONResponse(body, 503, headers={"Retry-After": "1"})

    @app.get("/v1/config")
    async def config() -> dict[str, Any]:
        spec = service.spec
        return {"config_id": spec.config_id, "label": spec.label, "kind": str(spec.kind),
                "params": json.loads(json.dumps(dict(spec.params), default=str)),
                "chain": [n.stage for n in spec.pool_node.ancestors()],
                "dataset": {"name": service.dataset.name,
                            "fingerprint": service.dataset.fingerprint,
                            "documents": len(service.dataset.documents),
                            "queries": len(service.dataset.queries)},
                "endpoints": {"answer": service.can_answer,
                              "rerank": service.reranker is not None,
                              "chat": service.generator is not None},
                "max_concurrency": settings.max_concurrency, "max_queue": settings.max_queue}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        names = [embedder_name(service)]
        if service.generator is not None:
            names.append(generator_model(service))
        return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "bench",
                                            "created": int(state.started_unix)}
                                           for n in names]}

    # -- retrieval ------------------------------------------------------------------------
    @app.post("/v1/retrieve")
    async def retrieve(body: RetrieveBody, request: Request) -> JSONResponse:
        rid = request.state.request_id

        def work() -> Retrieved:
            q = service.query(text=body.query, query_id=body.query_id, roles=body.roles,
                              tenant=body.tenant, request_id=rid)
            t_ret = time.time_ns()
            r = service.retrieve(q, k=body.k, include_text=body.include_text)
            if tracer is not None:
                from bench.traces.otel import RequestSpans

                tracer.record(RequestSpans(
                    "/v1/retrieve", rid, request.state.t0_ns, time.time_ns(), q.text,
                    _span_docs(r), t_ret, tuple(r.timings_ms.items()), top_k=body.k,
                    tenant=q.tenant, attributes=body.trace_attributes))
            return r

        r, extra = await run_json(request, "retrieve", work)
        return finish(request, {"request_id": rid, "config_id": service.spec.config_id,
                                "query_id": r.query_id, "hits": _hits_json(r)},
                      {**r.timings_ms, **extra})

    @app.post("/v1/answer", response_model=None)
    async def answer(body: AnswerBody, request: Request) -> Response:
        if not service.can_answer:
            raise ServeFailure(404, f"config {service.spec.label} is not a generated config "
                               "(no context and generator): serve one with a generator to "
                               "answer", "not_found")
        rid = request.state.request_id
        sampling = service.sampling(max_tokens=body.max_tokens, temperature=body.temperature,
                                    top_p=body.top_p, seed=body.seed)

        def work(emit: Callable[[str, Any], None]) -> Answered:
            q = service.query(text=body.query, query_id=body.query_id, roles=body.roles,
                              tenant=body.tenant, request_id=rid)
            t_ret = time.time_ns()
            a = service.answer(
                q, sampling, request_id=rid, k=body.k, include_text=body.include_text,
                on_retrieved=lambda r: emit("retrieval", {
                    "request_id": rid, "query_id": r.query_id, "hits": _hits_json(r),
                    "timings_ms": r.timings_ms}),
                on_text=lambda t: emit("token", {"text": t}))
            if tracer is not None:
                from bench.traces.otel import RequestSpans

                end, r, gen, t_gen = (time.time_ns(), a.retrieved, a.generation,
                                      a.generate_start_ns)
                tracer.record(RequestSpans(
                    "/v1/answer", rid, request.state.t0_ns, end, q.text, _span_docs(r), t_ret,
                    tuple(r.timings_ms.items()), top_k=body.k, tenant=q.tenant,
                    attributes=body.trace_attributes, model=generator_model(service),
                    answer=gen.text, generate_start_ns=t_gen,
                    generate_end_ns=t_gen + int(gen.e2e_ms * 1e6),
                    input_tokens=gen.prompt_tokens, output_tokens=gen.output_tokens,
                    ttft_ms=gen.ttft_ms, error=None if gen.status == "ok" else gen.error))
            return a

        def done_body(a: Answered, queue_ms: float) -> dict[str, Any]:
            total = (time.perf_counter() - request.state.t0) * 1000.0
            return {"request_id": rid, "config_id": service.spec.config_id,
                    "query_id": a.retrieved.query_id, "answer": a.generation.text,
                    "context": [{"doc_id": p.doc_id, "chunk": p.chunk_idx, "rank": p.rank,
                                 "truncated": p.truncated} for p in a.context.passages],
                    "context_tokens": a.context.n_tokens,
                    "generation": _generation_json(a.generation),
                    "timings_ms": {**a.timings_ms, "queue": queue_ms, "total": total}}

        admit()
        if not body.stream:
            try:
                a, queue_ms = await in_worker(lambda: work(lambda e, d: None))
            except Exception as exc:
                raise work_error(exc, "answer") from None
            out = done_body(a, queue_ms)
            out["hits"] = _hits_json(a.retrieved)
            return JSONResponse(out, headers={"Server-Timing": server_timing(
                out["timings_ms"])})

        async def events(emit_queue: asyncio.Queue[bytes | None], task: asyncio.Task[Any]
                         ) -> AsyncIterator[bytes]:
            while True:
                item = await emit_queue.get()
                if item is None:
                    break
                yield item
            try:
                a, queue_ms = await task
            except Exception as exc:
                f = work_error(exc, "answer")
                yield _sse(_error_body(f.message, f.kind, f.status), "error")
                return
            yield _sse(done_body(a, queue_ms), "done")

        return streamed(lambda emit: work(emit), events)

    def streamed(work: Callable[[Callable[[str, Any], None]], T],
                 events: Callable[[asyncio.Queue[bytes | None], asyncio.Task[Any]],
                                  AsyncIterator[bytes]]) -> StreamingResponse:
        """Run admitted ``work`` on a worker, its ``emit(event, data)`` calls becoming SSE
        events as they happen; ``events`` renders the stream (the end from the result)."""
        loop = asyncio.get_running_loop()
        q: asyncio.Queue[bytes | None] = asyncio.Queue()

        def emit(event: str, data: Any) -> None:
            loop.call_soon_threadsafe(q.put_nowait, _sse(data, event))

        def run() -> T:
            try:
                return work(emit)
            finally:
                loop.call_soon_threadsafe(q.put_nowait, None)

        task = asyncio.ensure_future(in_worker(run))
        return StreamingResponse(events(q, task), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    # -- OpenAI-compatible embeddings -------------------------------------------------------
    @app.post("/v1/embeddings")
    async def embeddings(body: EmbeddingsBody, request: Request) -> JSONResponse:
        texts = [body.input] if isinstance(body.input, str) else list(body.input)
        if not texts:
            raise ServeFailure(400, "input: must hold at least one text",
                               "invalid_request_error")
        if body.dimensions is not None and body.dimensions != service.embedder.dim:
            raise ServeFailure(400, f"dimensions: the served embedder gives "
                               f"{service.embedder.dim}-d vectors, got {body.dimensions}",
                               "invalid_request_error")
        e, extra = await run_json(request, "embeddings",
                                  lambda: service.embed(texts, kind=body.input_type))
        data = []
        for i, v in enumerate(e.vectors):
            vec: Any = (base64.b64encode(np.ascontiguousarray(v, dtype="<f4").tobytes())
                        .decode() if body.encoding_format == "base64" else v.tolist())
            data.append({"object": "embedding", "index": i, "embedding": vec})
        return finish(request, {"object": "list", "data": data, "model": embedder_name(service),
                                "usage": {"prompt_tokens": e.n_tokens,
                                          "total_tokens": e.n_tokens}},
                      {**e.timings_ms, **extra})

    # -- rerank ---------------------------------------------------------------------------
    def check_reranker() -> None:
        if service.reranker is None:
            raise ServeFailure(404, "the served run has no reranker (reranker=none): serve a "
                               "run with one (reranker=maxsim, reranker=bi_encoder)",
                               "not_found")

    @app.post("/v1/rerank")
    async def rerank(body: CohereRerankBody, request: Request) -> JSONResponse:
        check_reranker()
        docs = [d if isinstance(d, str) else d.text for d in body.documents]
        r, extra = await run_json(request, "rerank", lambda: service.rerank(body.query, docs))
        order = sorted(range(len(docs)), key=lambda i: (-float(r.scores[i]), i))
        if body.top_n is not None:
            order = order[: body.top_n]
        results = []
        for i in order:
            row: dict[str, Any] = {"index": i, "relevance_score": float(r.scores[i])}
            if body.return_documents:
                row["document"] = {"text": docs[i]}
            results.append(row)
        return finish(request, {"id": request.state.request_id, "model": reranker_name(service),
                                "results": results,
                                "usage": {"total_tokens": 0}}, {**r.timings_ms, **extra})

    @app.post("/rerank")
    async def rerank_tei(body: TEIRerankBody, request: Request) -> JSONResponse:
        check_reranker()
        r, extra = await run_json(request, "rerank",
                                  lambda: service.rerank(body.query, body.texts))
        order = sorted(range(len(body.texts)), key=lambda i: (-float(r.scores[i]), i))
        rows = []
        for i in order:
            row: dict[str, Any] = {"index": i, "score": float(r.scores[i])}
            if body.return_text:
                row["text"] = body.texts[i]
            rows.append(row)
        total = (time.perf_counter() - request.state.t0) * 1000.0
        return JSONResponse(rows, headers={"Server-Timing": server_timing(
            {**r.timings_ms, **extra, "total": total})})

    # -- OpenAI-compatible chat completions ------------------------------------------------
    @app.post("/v1/chat/completions", response_model=None)
    async def chat(body: ChatBody, request: Request) -> Response:
        if service.generator is None:
            raise ServeFailure(404, "the served run has no generator (generator=none): serve "
                               "one with generator=transformers_cpu", "not_found")
        rid = request.state.request_id
        chat_id = f"chatcmpl-{rid}"
        model = generator_model(service)
        created = int(time.time())
        sampling = service.sampling(
            max_tokens=body.max_completion_tokens or body.max_tokens,
            temperature=body.temperature, top_p=body.top_p, seed=body.seed)
        req = GenerationRequest(rid, tuple(ChatMessage(m.role, m.content)
                                           for m in body.messages), sampling)
        admit()
        if not body.stream:
            try:
                g, queue_ms = await in_worker(lambda: generate(service, req, None))
            except Exception as exc:
                raise work_error(exc, "chat") from None
            if g.status != "ok":
                raise ServeFailure(500, f"generation {g.status}: {g.error}", "server_error")
            out = {"id": chat_id, "object": "chat.completion", "created": created,
                   "model": model,
                   "choices": [{"index": 0, "finish_reason": g.finish_reason,
                                "message": {"role": "assistant", "content": g.text}}],
                   "usage": _usage(g)}
            return finish(request, out, {"generate": g.e2e_ms, "queue": queue_ms})

        include_usage = body.stream_options is not None and body.stream_options.include_usage

        def chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
            return {"id": chat_id, "object": "chat.completion.chunk", "created": created,
                    "model": model, "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish_reason}]}

        def work(emit: Callable[[str, Any], None]) -> Generation:
            return generate(service, req, lambda t: emit("", chunk({"content": t}, None)))

        async def events(q: asyncio.Queue[bytes | None], task: asyncio.Task[Any]
                         ) -> AsyncIterator[bytes]:
            yield _sse(chunk({"role": "assistant", "content": ""}, None))
            while True:
                item = await q.get()
                if item is None:
                    break
                yield item
            try:
                g, queue_ms = await task
            except Exception as exc:
                f = work_error(exc, "chat")
                yield _sse(_error_body(f.message, f.kind, f.status))
                yield b"data: [DONE]\n\n"
                return
            if g.status != "ok":
                yield _sse(_error_body(f"generation {g.status}: {g.error}", "server_error",
                                       500))
                yield b"data: [DONE]\n\n"
                return
            total = (time.perf_counter() - request.state.t0) * 1000.0
            end = chunk({}, g.finish_reason)
            end["timings_ms"] = {"queue": queue_ms, "generate": g.e2e_ms, "total": total}
            yield _sse(end)
            if include_usage:
                yield _sse({"id": chat_id, "object": "chat.completion.chunk",
                            "created": created, "model": model, "choices": [],
                            "usage": _usage(g)})
            yield b"data: [DONE]\n\n"

        return streamed(work, events)

    return app


def _usage(g: Generation) -> dict[str, int]:
    return {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.output_tokens,
            "total_tokens": g.prompt_tokens + g.output_tokens}


def generate(service: Service, req: GenerationRequest,
             on_text: Callable[[str], None] | None) -> Generation:
    """One answer; streamed piece by piece when the generator can, else in one piece."""
    gen = service.generator
    assert gen is not None
    if on_text is not None and isinstance(gen, StreamingGenerator):
        return gen.stream(req, on_text)
    out = gen.generate([req])[0]
    if on_text is not None and out.text:
        on_text(out.text)
    return out


def embedder_name(service: Service) -> str:
    return str(service.embedder.cache_params().get("model", type(service.embedder).__name__))


def reranker_name(service: Service) -> str:
    r = service.reranker
    return "none" if r is None else str(r.name)


def generator_model(service: Service) -> str:
    from bench.generation.stage import generator_name

    assert service.generator is not None
    return generator_name(service.generator)
