"""An OpenAI-compatible chat / completions server with scripted token timings: vLLM's API
shape (``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /health``), streamed as server-sent events, ``[DONE]`` last; and, for single-component
tests, ``POST /v1/embeddings`` (8-dimensional word-hash vectors) and ``POST /rerank`` (the
Cohere / TEI / Infinity shape, scored by word overlap), each holding a slot ``--pool-ms``.

Timings are scripted, not computed: ``--slots`` sequences decode at once (more wait in a
FIFO queue: that wait is the TTFT a loaded server shows); a sequence holds its slot for
``--prefill-ms`` before its first token, then one token every ``--tpot-ms`` plus
``--tpot-per-active-ms`` for each other active sequence (a batch slows each token down).
The answer: with ``--answers`` (JSON lines ``{"query", "answer"}``), the answer of the
prompt's last user message (a scripted model that knows the golden answer: any quality lost
under load is the server's doing), else ``"I do not know."``; ``--degrade-after-ms``: a
request that queued longer gets its first two words only (a server that cuts work under
load). ``max_tokens`` cuts the answer (``finish_reason: length``). One token = one word.

    python -m bench.capacity.services.chat --port 8001 --slots 4 --prefill-ms 20 --tpot-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
MODEL = "scripted-chat"


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body"):
            return b"".join(chunks)


async def _json(send: Send, status: int, obj: Any) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(obj).encode()})


def _words(text: str) -> set[str]:
    return {w.strip(".,;:!?()\"'").lower() for w in text.split()} - {""}


def embed(req: dict[str, Any]) -> dict[str, Any]:
    """``/v1/embeddings``: a scripted 8-dimensional vector per input (word hashes)."""
    import zlib

    inputs = req["input"] if isinstance(req["input"], list) else [req["input"]]
    data = []
    for i, text in enumerate(inputs):
        v = [0.0] * 8
        for w in _words(str(text)):
            v[zlib.crc32(w.encode()) % 8] += 1.0
        data.append({"object": "embedding", "index": i, "embedding": v})
    return {"object": "list", "model": req.get("model", MODEL), "data": data}


def rerank(req: dict[str, Any]) -> dict[str, Any]:
    """``/rerank``: each document's share of the query's words, best first (the Cohere /
    Jina / TEI / Infinity reply shape: ``results[].index``, ``relevance_score``)."""
    q = _words(str(req["query"]))
    scores = [len(q & _words(str(d))) / max(len(q), 1) for d in req["documents"]]
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return {"model": req.get("model", MODEL),
            "results": [{"index": i, "relevance_score": scores[i]} for i in order]}


def app(*, slots: int, prefill_ms: float, tpot_ms: float, tpot_per_active_ms: float = 0.0,
        answers: dict[str, str] | None = None, degrade_after_ms: float | None = None,
        pool_ms: float = 2.0) -> Callable[..., Awaitable[None]]:
    book = answers or {}
    state = {"active": 0, "served": 0}
    gate: list[asyncio.Semaphore] = []

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    gate.append(asyncio.Semaphore(slots))
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"]
        if path == "/health":
            return await _json(send, 200, {"ok": True, **state})
        if path == "/v1/models":
            return await _json(send, 200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "owned_by": "bench"}]})
        if path in ("/v1/embeddings", "/rerank", "/v1/rerank"):
            try:
                req = json.loads(await _body(receive) or b"{}")
                async with gate[0]:
                    await asyncio.sleep(pool_ms / 1000)
                return await _json(send, 200, embed(req) if path == "/v1/embeddings"
                                   else rerank(req))
            except (ValueError, KeyError, TypeError) as exc:
                return await _json(send, 400, {"error": {"message": f"bad request: {exc}"}})
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return await _json(send, 404, {"error": {"message": f"no route {path}"}})
        try:
            req = json.loads(await _body(receive) or b"{}")
            if path == "/v1/chat/completions":
                users = [m["content"] for m in req["messages"] if m.get("role") == "user"]
                prompt = str(users[-1]) if users else ""
            else:
                prompt = str(req["prompt"])
        except (ValueError, KeyError, TypeError) as exc:
            return await _json(send, 400, {"error": {"message": f"bad request: {exc}"}})
        chat = path == "/v1/chat/completions"
        words = book.get(prompt.strip(), "I do not know.").split()
        max_tokens = int(req.get("max_tokens") or 256)
        t0 = time.perf_counter()
        async with gate[0]:
            waited_ms = (time.perf_counter() - t0) * 1000
            if degrade_after_ms is not None and waited_ms > degrade_after_ms:
                words = words[:2]
            finish = "length" if len(words) > max_tokens else "stop"
            words = words[:max_tokens]
            state["active"] += 1
            try:
                if not req.get("stream"):
                    await asyncio.sleep((prefill_ms + tpot_ms * max(len(words) - 1, 0)) / 1000)
                    text = " ".join(words)
                    choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                               "finish_reason": finish} if chat else
                              {"index": 0, "text": text, "finish_reason": finish})
                    return await _json(send, 200, {
                        "id": f"cmpl-{state['served']}", "model": MODEL, "choices": [choice],
                        "usage": {"prompt_tokens": len(prompt.split()),
                                  "completion_tokens": len(words)}})
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"text/event-stream")]})
                due = time.perf_counter() + prefill_ms / 1000
                kind = "chat.completion.chunk" if chat else "text_completion"
                for k, w in enumerate(words):
                    # absolute deadlines: late wake-ups on a loaded machine do not add up
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                    piece = w if k == 0 else " " + w
                    last = k == len(words) - 1
                    choice = ({"index": 0, "delta": {"content": piece},
                               "finish_reason": finish if last else None} if chat else
                              {"index": 0, "text": piece,
                               "finish_reason": finish if last else None})
                    await send({"type": "http.response.body", "more_body": True,
                                "body": b"data: " + json.dumps({
                                    "id": f"cmpl-{state['served']}", "object": kind,
                                    "model": MODEL, "choices": [choice]}).encode() + b"\n\n"})
                    due += (tpot_ms + tpot_per_active_ms * (state["active"] - 1)) / 1000
                await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
            finally:
                state["active"] -= 1
                state["served"] += 1

    return asgi


def load_answers(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[str(row["query"]).strip()] = str(row["answer"])
    return out


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m bench.capacity.services.chat",
                                description=__doc__.split("\n\n")[0],
                                # standalone (nothing from bench): bench.docs.CAPACITY_HTTP's line
                                epilog="documentation: docs/experiments/capacity_http.md "
                                       "(capacity_http)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--prefill-ms", type=float, default=20.0)
    p.add_argument("--tpot-ms", type=float, default=5.0)
    p.add_argument("--tpot-per-active-ms", type=float, default=0.0)
    p.add_argument("--answers", type=Path, default=None)
    p.add_argument("--degrade-after-ms", type=float, default=None)
    p.add_argument("--pool-ms", type=float, default=2.0)
    a = p.parse_args(argv)
    asgi = app(slots=a.slots, prefill_ms=a.prefill_ms, tpot_ms=a.tpot_ms,
               tpot_per_active_ms=a.tpot_per_active_ms,
               answers=load_answers(a.answers) if a.answers else None,
               degrade_after_ms=a.degrade_after_ms, pool_ms=a.pool_ms)
    uvicorn.run(asgi, host="127.0.0.1", port=a.port, log_level="warning", access_log=False,
                lifespan="on")


if __name__ == "__main__":
    main()
