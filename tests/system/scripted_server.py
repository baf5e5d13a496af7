"""A real ASGI service with scripted answers, for ``system=http`` tests (run by uvicorn in a
subprocess: real sockets, real HTTP).

The script (JSON file named by ``$SCRIPT``): ``queries`` maps a query text to what the
service does for it — ``body`` (the JSON answer), ``raw`` (a body sent as is), ``status``
(HTTP status, default 200), ``delay_s`` (sleep first), ``fail_first`` (answer 503 to the
first N requests for it), ``events`` (``/v1/stream``: SSE events, each a JSON value sent as
``data:``, ``gap_s`` apart); ``default`` is the answer to any other query (the preflight).
``die_after``: the process exits at request N + 1 (a server that dies mid-run).
``GET /count`` is the number of ``/v1/*`` requests served; ``GET /received`` the bodies.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

SCRIPT: dict[str, Any] = json.loads(Path(os.environ["SCRIPT"]).read_text())
STATE: dict[str, Any] = {"n": 0, "per_query": {}, "received": []}
app = FastAPI()


@app.get("/health")
async def health() -> dict[str, bool]:
    return {"ok": True}


@app.get("/count")
async def count() -> dict[str, int]:
    return {"n": STATE["n"]}


@app.get("/received")
async def received() -> list[Any]:
    return list(STATE["received"])


async def _spec(req: Request) -> tuple[dict[str, Any], Response | None]:
    body = await req.json()
    STATE["n"] += 1
    STATE["received"].append(body)
    die = SCRIPT.get("die_after")
    if die is not None and STATE["n"] > die:
        os._exit(1)
    q = str(body.get("query", ""))
    spec = SCRIPT["queries"].get(q, SCRIPT.get("default", {}))
    seen = STATE["per_query"][q] = STATE["per_query"].get(q, 0) + 1
    if seen <= spec.get("fail_first", 0):
        return spec, JSONResponse({"error": "busy"}, status_code=503)
    if spec.get("delay_s"):
        await asyncio.sleep(spec["delay_s"])
    return spec, None


@app.post("/v1/answer")
async def answer(req: Request) -> Response:
    spec, early = await _spec(req)
    if early is not None:
        return early
    if "raw" in spec:
        return Response(spec["raw"], media_type="application/json")
    return JSONResponse(spec.get("body", {}), status_code=spec.get("status", 200))


@app.post("/v1/stream")
async def stream(req: Request) -> Response:
    spec, early = await _spec(req)
    if early is not None:
        return early
    if spec.get("status", 200) != 200:
        return JSONResponse({"error": "scripted"}, status_code=spec["status"])

    async def events() -> Any:
        for e in spec.get("events", []):
            await asyncio.sleep(spec.get("gap_s", 0.0))
            yield f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
