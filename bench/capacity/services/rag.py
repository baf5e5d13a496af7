"""A small RAG API written only against the ``system=http`` mapping documented in
docs/black-box.md — a user's own service as far as bench is concerned.

``POST /v1/ask {"question": str, "top_k": int, "stream": bool}``:

- JSON reply: ``{"results": [{"id", "text", "score"}], "answer": str, "cached": bool,
  "timing": {"retrieve_ms", "generate_ms"}}``;
- streamed (``"stream": true``): server-sent events, first ``{"results": [...]}``, then one
  ``{"delta": " word"}`` per answer word, last ``{"timing": {...}, "cached": bool}``.

Its ``system=http`` mapping: ``documents: results, doc_id: id, score: score, passage: text,
answer: answer`` (streamed: ``delta: delta`` instead of ``answer``).

Retrieval is real work: BM25 (k1 0.9, b 0.4) over ``--corpus`` (JSON lines ``{"id",
"text"}``), in numpy, on the event loop. The answer is extractive (the top passage's first
sentence) after a scripted generation time (``--generate-ms`` plus ``--word-ms`` per
streamed word; ``--slots`` generations at once) standing in for an LLM. An LRU cache of
``--cache-size`` answers keyed by the normalised question skips both: a repeated question
is answered in microseconds — the gap a load test must report apart, not count as capacity.
``--cache-size 0`` turns it off.

    python -m bench.capacity.services.rag --port 8002 --corpus corpus.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """BM25 over a corpus held in memory: postings per term (doc indices, term counts)."""

    def __init__(self, docs: list[tuple[str, str]], *, k1: float = 0.9, b: float = 0.4) -> None:
        self.ids = [d for d, _ in docs]
        self.texts = [t for _, t in docs]
        lens = np.zeros(len(docs), dtype=np.float64)
        post: dict[str, dict[int, int]] = {}
        for i, (_, text) in enumerate(docs):
            toks = tokens(text)
            lens[i] = len(toks)
            for w in toks:
                post.setdefault(w, {})
                post[w][i] = post[w].get(i, 0) + 1
        avg = float(lens.mean()) if len(docs) else 1.0
        self.norm = k1 * (1 - b + b * lens / max(avg, 1e-9))
        self.k1 = k1
        n = len(docs)
        self.post = {w: (np.fromiter(p.keys(), np.int64, len(p)),
                         np.fromiter(p.values(), np.float64, len(p)),
                         math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)))
                     for w, p in post.items()}

    def search(self, query: str, k: int) -> list[tuple[str, str, float]]:
        scores = np.zeros(len(self.ids), dtype=np.float64)
        for w in set(tokens(query)):
            got = self.post.get(w)
            if got is None:
                continue
            idx, tf, idf = got
            scores[idx] += idf * tf * (self.k1 + 1) / (tf + self.norm[idx])
        k = min(k, len(self.ids))
        top = np.argpartition(-scores, k - 1)[:k] if k else np.zeros(0, np.int64)
        top = top[np.lexsort((np.asarray(self.ids, dtype=object)[top].astype(str),
                              -scores[top]))]
        return [(self.ids[i], self.texts[i], float(scores[i])) for i in top if scores[i] > 0]


def first_sentence(text: str, words: int = 40) -> str:
    s = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return " ".join(s.split()[:words])


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


def app(index: BM25, *, generate_ms: float, word_ms: float, slots: int,
        cache_size: int) -> Callable[..., Awaitable[None]]:
    cache: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
    gate: list[asyncio.Semaphore] = []
    stats = {"hits": 0, "misses": 0}

    async def answer(question: str, k: int) -> tuple[dict[str, Any], bool]:
        key = (" ".join(tokens(question)), k)
        if cache_size and key in cache:
            cache.move_to_end(key)
            stats["hits"] += 1
            return cache[key], True
        stats["misses"] += 1
        t0 = time.perf_counter()
        hits = index.search(question, k)
        t1 = time.perf_counter()
        async with gate[0]:
            await asyncio.sleep(generate_ms / 1000)
        out = {"results": [{"id": d, "text": t, "score": s} for d, t, s in hits],
               "answer": first_sentence(hits[0][1]) if hits else "I do not know.",
               "timing": {"retrieve_ms": (t1 - t0) * 1000,
                          "generate_ms": (time.perf_counter() - t1) * 1000}}
        if cache_size:
            cache[key] = out
            if len(cache) > cache_size:
                cache.popitem(last=False)
        return out, False

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
        if scope["path"] == "/health":
            return await _json(send, 200, {"ok": True, "docs": len(index.ids), **stats})
        if scope["path"] != "/v1/ask":
            return await _json(send, 404, {"error": f"no route {scope['path']}"})
        try:
            req = json.loads(await _body(receive) or b"{}")
            question, k = str(req["question"]), int(req.get("top_k", 10))
        except (ValueError, KeyError, TypeError) as exc:
            return await _json(send, 400, {"error": f"bad request: {exc}"})
        out, cached = await answer(question, k)
        if not req.get("stream"):
            return await _json(send, 200, {**out, "cached": cached})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})

        async def event(obj: Any) -> None:
            await send({"type": "http.response.body", "more_body": True,
                        "body": b"data: " + json.dumps(obj).encode() + b"\n\n"})

        await event({"results": out["results"]})
        for i, w in enumerate(out["answer"].split()):
            if not cached and word_ms:
                await asyncio.sleep(word_ms / 1000)
            await event({"delta": w if i == 0 else " " + w})
        await event({"timing": out["timing"], "cached": cached})
        await send({"type": "http.response.body", "body": b""})

    return asgi


def load_corpus(path: Path) -> list[tuple[str, str]]:
    docs = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            docs.append((str(row["id"]), str(row["text"])))
    return docs


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m bench.capacity.services.rag",
                                description=__doc__.split("\n\n")[0],
                                # standalone (nothing from bench): bench.docs.CAPACITY_HTTP's line
                                epilog="documentation: docs/experiments/capacity_http.md "
                                       "(capacity_http)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--generate-ms", type=float, default=30.0)
    p.add_argument("--word-ms", type=float, default=0.0)
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--cache-size", type=int, default=4096)
    a = p.parse_args(argv)
    asgi = app(BM25(load_corpus(a.corpus)), generate_ms=a.generate_ms, word_ms=a.word_ms,
               slots=a.slots, cache_size=a.cache_size)
    uvicorn.run(asgi, host="127.0.0.1", port=a.port, log_level="warning", access_log=False,
                lifespan="on")


if __name__ == "__main__":
    main()
