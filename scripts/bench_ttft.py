"""TTFT / ITL measurement error of the streaming HTTP client against a delayed test server.

The scripted OpenAI-compatible server of the test suite (tests/generation/_openai_test_server.py)
runs as its own process (a managed server, as `vllm serve` would be), sleeps ``ttft_ms`` before
its first content chunk and ``itl_ms`` between chunks, and records when it really sent each
chunk (CLOCK_MONOTONIC, one clock for both processes). The error of a request is the client's
TTFT minus the delay the server really produced (request received -> first content chunk sent);
it is one-sided (client-side scheduling only adds), so the minimum estimates the systematic
error and the percentiles show what a loaded machine adds.

    .venv/bin/python scripts/bench_ttft.py --requests 40 --ttft-ms 50,150,400
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import httpx
import numpy as np

from bench.generation.base import ChatMessage, GenerationRequest, SamplingParams
from bench.generation.openai_http import ManagedServer, OpenAIHTTPGenerator

SERVER = Path(__file__).resolve().parents[1] / "tests" / "generation" / "_openai_test_server.py"


def measure(requests: int, ttfts: list[int], itl_ms: int, tokens: int
            ) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        srv = ManagedServer([sys.executable, str(SERVER), "--port", "{port}"], model="m",
                            log_path=Path(tmp) / "server.log", startup_timeout_s=60)
        gen = OpenAIHTTPGenerator(model="test-model", base_url=srv.root + "/v1", backoff_s=0.0)
        out = []
        try:
            warm = json.dumps({"tokens": ["w"]})
            gen.generate([GenerationRequest("warm", (ChatMessage("user", warm),),
                                            SamplingParams())])
            for i in range(requests):
                script = {"tokens": [f"t{j}" for j in range(tokens)],
                          "ttft_ms": ttfts[i % len(ttfts)], "itl_ms": itl_ms, "n": i}
                msg = (ChatMessage("user", json.dumps(script)),)
                out.extend(gen.generate([GenerationRequest(f"r{i}", msg, SamplingParams())]))
            received = httpx.get(srv.root + "/_requests").json()[1:]
        finally:
            gen.close()
            srv.stop()
    ttft_err: list[float] = []
    itl_err: list[float] = []
    for g, sent in zip(out, received, strict=True):
        if g.status != "ok" or g.ttft_ms is None:
            raise SystemExit(f"bench_ttft: request {g.request_id} failed: {g.error}")
        real_ttft = (sent["content_sent_s"][0] - sent["received_s"]) * 1000.0
        ttft_err.append(g.ttft_ms - real_ttft)
        real_itl = np.diff(np.asarray(sent["content_sent_s"])) * 1000.0
        itl_err.extend(m - r for m, r in zip(g.itl_ms, real_itl, strict=True))

    def stats(xs: list[float]) -> dict[str, float]:
        a = np.asarray(xs)
        return {"n": float(len(a)), "min": float(a.min()), "p50": float(np.median(a)),
                "p95": float(np.percentile(a, 95)), "max": float(a.max()),
                "mean_abs": float(statistics.fmean(abs(x) for x in xs))}

    return {"ttft_error_ms": stats(ttft_err), "itl_error_ms": stats(itl_err)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--ttft-ms", default="50,150,400", help="server delays, cycled")
    ap.add_argument("--itl-ms", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=5)
    args = ap.parse_args()
    ttfts = [int(x) for x in args.ttft_ms.split(",")]
    res = measure(args.requests, ttfts, args.itl_ms, args.tokens)
    print("| quantity | n | min | p50 | p95 | max | mean |abs| |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, s in res.items():
        print(f"| {name} | {int(s['n'])} | {s['min']:.2f} | {s['p50']:.2f} | {s['p95']:.2f} | "
              f"{s['max']:.2f} | {s['mean_abs']:.2f} |")


if __name__ == "__main__":
    main()
