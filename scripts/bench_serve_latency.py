"""Unloaded latency of one served request against the same work in process.

    python scripts/bench_serve_latency.py [--n 200] [--endpoint /v1/retrieve] [--profile] \
        -- [bench overrides, e.g. dataset=foldoc serve.config=<id>]

1. In process: the config prepared as ``bench.serve`` prepares it (``prepare_service``),
   loaded, then ``Service.retrieve`` for ``--n`` queries of the dataset, one after another, on
   the calling thread (what "~25 ms in process" means).
2. Served: ``python -m bench.serve`` of the same overrides (``ServedProcess``), then ``--n``
   requests to ``--endpoint`` with the same ``query_id``s, one at a time (unloaded: nothing
   else in flight), client-side latency plus the server's ``Server-Timing`` split (queue,
   each chain stage, total) — from a synchronous httpx client as it comes, the same with
   TCP_NODELAY, and the capacity study's own asynchronous client (``HttpTarget``).

Prints p50 / p95 / mean of each. ``--thread`` also repeats the in-process pass on an
``anyio`` worker thread (where the endpoint runs the chain), to separate "a worker thread"
from "HTTP and the server".
Run it under the shared CPU lock; the figures are those of an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs, dtype=np.float64)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "mean": float(a.mean()), "n": len(xs)}


def fmt(name: str, d: dict[str, float]) -> str:
    return f"{name:<34} p50 {d['p50']:8.2f} ms  p95 {d['p95']:8.2f} ms  mean {d['mean']:8.2f} ms"


def in_process(overrides: list[str], n: int, thread: bool) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register
    from bench.serve.service import prepare_service

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=overrides)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    service, _ = prepare_service(cfg)
    service.load()
    queries = service.dataset.queries
    ids = [queries[i % len(queries)].query_id for i in range(n)]

    def one(qid: str) -> float:
        q = service.query(text=None, query_id=qid, roles=None, tenant=None, request_id=qid)
        t0 = time.perf_counter()
        service.retrieve(q)
        return (time.perf_counter() - t0) * 1e3

    out: dict[str, Any] = {"ids": ids, "main": pct([one(q) for q in ids])}
    if thread:
        import anyio
        import anyio.to_thread

        async def on_workers() -> list[float]:
            return [await anyio.to_thread.run_sync(one, q) for q in ids]

        out["anyio_thread"] = pct(anyio.run(on_workers))
    service.close()
    return out


def _sync_client(base_url: str, ids: list[str], endpoint: str, warmup: int,
                 nodelay: bool) -> tuple[list[float], dict[str, list[float]]]:
    """One request at a time from a synchronous httpx client; ``nodelay``: its socket with
    TCP_NODELAY (httpx's default socket has Nagle's algorithm on)."""
    import socket

    import httpx

    opts = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)] if nodelay else None
    with httpx.Client(base_url=base_url, timeout=60.0,
                      transport=httpx.HTTPTransport(socket_options=opts)) as client:
        for qid in ids[:warmup]:
            client.post(endpoint, json={"query_id": qid}).raise_for_status()
        lat: list[float] = []
        stages: dict[str, list[float]] = {}
        for qid in ids:
            t0 = time.perf_counter()
            r = client.post(endpoint, json={"query_id": qid})
            lat.append((time.perf_counter() - t0) * 1e3)
            r.raise_for_status()
            for k, v in r.json()["timings_ms"].items():
                stages.setdefault(k, []).append(float(v))
    return lat, stages


def _study_client(base_url: str, ids: list[str], endpoint: str, warmup: int) -> list[float]:
    """One request at a time through the capacity study's own client (``HttpTarget``: one
    ``httpx.AsyncClient`` on an event loop)."""
    import asyncio

    from bench.capacity.http import HttpTarget

    async def go() -> list[float]:
        async with HttpTarget([base_url], path=endpoint,
                              body=lambda i: {"query_id": ids[i]}) as t:
            for i in range(warmup):
                await t.send(i)
            out = []
            for i in range(len(ids)):
                r = await t.send(i)
                assert r.status == "ok", r.error
                out.append((r.end_at - r.started_at) * 1e3)
            return out

    return asyncio.run(go())


def served(overrides: list[str], ids: list[str], endpoint: str, warmup: int) -> dict[str, Any]:
    from bench.serve.launch import ServedProcess

    with ServedProcess(overrides, ready_timeout_s=900.0) as srv:
        lat, stages = _sync_client(srv.base_url, ids, endpoint, warmup, nodelay=False)
        lat_nd, _ = _sync_client(srv.base_url, ids, endpoint, warmup, nodelay=True)
        lat_study = _study_client(srv.base_url, ids, endpoint, warmup)
        return {"start_s": srv.start_s, "client": pct(lat), "client_nodelay": pct(lat_nd),
                "client_study": pct(lat_study),
                "server": {k: pct(v) for k, v in stages.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--endpoint", default="/v1/retrieve")
    ap.add_argument("--thread", action="store_true",
                    help="also time the in-process pass on an anyio worker thread")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    t0 = time.perf_counter()
    res: dict[str, Any] = {"overrides": a.overrides, "n": a.n}
    ip = in_process(a.overrides, a.n, a.thread)
    ids = ip.pop("ids")
    res["in_process"] = ip
    print(fmt("in process, calling thread", ip["main"]))
    if "anyio_thread" in ip:
        print(fmt("in process, anyio worker thread", ip["anyio_thread"]))
    sv = served(a.overrides, ids, a.endpoint, a.warmup)
    res["served"] = sv
    print(fmt(f"served {a.endpoint}, client", sv["client"]))
    print(fmt("  sync client, TCP_NODELAY", sv["client_nodelay"]))
    print(fmt("  the study's HttpTarget (async)", sv["client_study"]))
    for k, d in sv["server"].items():
        print(fmt(f"  server {k}", d))
    print(f"served process ready after {sv['start_s']:.1f} s; script wall "
          f"{time.perf_counter() - t0:.1f} s")
    if a.json is not None:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(main())
