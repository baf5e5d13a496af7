"""A real OpenAI-compatible ``/v1/embeddings`` server with a Cohere-shaped ``/v1/rerank``
(a Starlette app under uvicorn, in a thread of the test process) that dies after a given
number of requests: every later request
is refused (503, then the socket is gone). Vectors are a deterministic hash of the words of
each text, so two servers answer the same text with the same vector and a resumed run is
comparable with an uninterrupted one. ``seen`` records the inputs of every request it
answered (what a rerun asks again is counted on it)."""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

import numpy as np

DIM = 32


def vector(text: str) -> list[float]:
    v = np.zeros(DIM, dtype=np.float64)
    v[0] = 0.5  # never a zero vector
    for w in text.lower().split():
        h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "little")
        v[1 + h % (DIM - 1)] += 1.0
    return [float(x) for x in v]


class DyingServer:
    """``with DyingServer(port, die_after=N) as s``: answers N requests, then dies."""

    def __init__(self, port: int, *, die_after: int | None = None) -> None:
        self.port = port
        self.die_after = die_after
        self.seen: list[list[str]] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def embeddings(request: Request) -> JSONResponse:
            body = await request.json()
            with self._lock:
                dead = self.die_after is not None and len(self.seen) >= self.die_after
                if not dead:
                    self.seen.append(list(body["input"]))
                last = self.die_after is not None and len(self.seen) == self.die_after
            if dead:
                return JSONResponse({"error": "shutting down"}, status_code=503)
            if last:  # this answer is its last: the process goes away
                self._server.should_exit = True
            data = [{"object": "embedding", "index": i, "embedding": vector(t)}
                    for i, t in enumerate(body["input"])]
            return JSONResponse({"object": "list", "data": data, "model": body["model"],
                                 "usage": {"prompt_tokens": 0, "total_tokens": 0}})

        async def rerank(request: Request) -> JSONResponse:
            body = await request.json()
            with self._lock:
                dead = self.die_after is not None and len(self.seen) >= self.die_after
                if not dead:
                    self.seen.append([body["query"]])
                last = self.die_after is not None and len(self.seen) == self.die_after
            if dead:
                return JSONResponse({"error": "shutting down"}, status_code=503)
            if last:
                self._server.should_exit = True
            q = np.asarray(vector(body["query"]))
            results = [{"index": i, "relevance_score": float(np.dot(q, vector(d)))}
                       for i, d in enumerate(body["documents"])]
            return JSONResponse({"results": results})

        return Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"]),
                                 Route("/v1/rerank", rerank, methods=["POST"])])

    def __enter__(self) -> DyingServer:
        import uvicorn

        config = uvicorn.Config(self._app(), host="127.0.0.1", port=self.port,
                                log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        t0 = time.monotonic()
        while not self._server.started:
            if time.monotonic() - t0 > 20:
                raise RuntimeError("the embeddings server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        assert self._thread is not None
        self._thread.join(timeout=20)

    def requests_with(self, texts: set[str]) -> int:
        """Requests answered whose inputs are all among ``texts``."""
        return sum(1 for batch in self.seen if batch and set(batch) <= texts)
