"""The load generator against a null endpoint on this machine, before and after, interleaved.

Each variant is one child process (``--child``) that starts its null server, sends a
Poisson schedule open loop at ``--base-rps`` and then at each of ``--rates`` with
:func:`bench.capacity.driver.run_open` and its :class:`bench.capacity.http.HttpTarget`, and
prints one JSON line: per rate the requests sent and answered, the rate sustained (answered
requests over the level's duration), E2EL p50/p99 from the intended send, the added p50/p99
(minus the base level's), send-lag p99, and the CPU each side spent per request. Variants:

- ``before``: the code of commit ``--before`` (``git archive`` into a temporary folder): the
  httpx client, ``asyncio.wait_for`` per request, garbage collection on, and the uvicorn
  (h11) synthetic server with ``service_ms=0`` as the null endpoint;
- ``client``: this tree's client (aiohttp, no wait_for task, no collection in the level)
  against the same uvicorn null server — what the client change alone buys;
- ``after``: this tree's client against this tree's null server (raw asyncio, uvloop when
  installed) — the ceiling the study now measures;
- ``after-2p``: as ``after``, the level sent by 2 generator processes on one schedule
  (:class:`bench.capacity.workers.ProcessPool`).

The variants run in turn, ``--repeats`` rounds, so a slow minute on the shared box lands on
all of them. Run it under the shared lock; it prints one JSON line per child and a Markdown
table (median over the rounds) at the end:

    flock /tmp/bench-cpu.lock python scripts/bench_generator_ceiling.py --repeats 3

``--ceiling`` also runs :func:`bench.capacity.ceiling.measure_ceiling` (the study's own
search, 1 ms bar) in the ``after`` child.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("before", "client", "after", "after-2p")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def child(a: argparse.Namespace) -> None:
    """One variant in this process (its code is whatever ``bench`` imports here)."""
    import asyncio
    import functools

    import numpy as np

    from bench.capacity import servers
    from bench.capacity.driver import run_open
    from bench.capacity.http import HttpTarget
    from bench.capacity.schedule import poisson_arrivals

    tmp = Path(tempfile.mkdtemp())
    served = (servers.synthetic(log_path=tmp / "null.log") if a.server == "uvicorn"
              else servers.null_server(log_path=tmp / "null.log"))  # type: ignore[attr-defined]
    factory = functools.partial(HttpTarget, [served.url], path="/v1/answer",
                                body=_null_body, timeout_s=10.0, name="null")
    out: dict[str, Any] = {"variant": a.variant, "server": a.server,
                           "processes": a.processes, "levels": []}
    with served:
        assert served.proc is not None
        server_pid = served.proc.pid

        async def go() -> None:
            async with factory() as t:
                pool = None
                if a.processes > 1:
                    from bench.capacity.workers import ProcessPool

                    pool = ProcessPool(a.processes, factory).__enter__()

                async def level(rate: float, seed: int) -> tuple[Any, float, float]:
                    n = max(a.min_requests, int(rate * a.seconds))
                    sched = poisson_arrivals(rate_rps=rate, n=n, n_queries=1, seed=seed)
                    c0, s0 = _self_cpu_s(), _cpu_s(server_pid)
                    if pool is not None:
                        run = await pool.run_open(sched, timeout_s=10.0)
                    else:
                        run = await run_open(sched, t, timeout_s=10.0)
                    return run, _self_cpu_s() - c0, _cpu_s(server_pid) - s0

                await level(a.base_rps, 99)  # warm-up: connections, first-call costs
                base, _, _ = await level(a.base_rps, 0)
                b = np.asarray([r.e2el_ms for r in base.records if r.status == "ok"])
                b50, b99 = (float(v) for v in np.percentile(b, [50, 99]))
                out["base"] = {"rate_rps": a.base_rps, "p50_ms": b50, "p99_ms": b99}
                for k, rate in enumerate(a.rates):
                    run, ccpu, scpu = await level(rate, k + 1)
                    ok = [r for r in run.records if r.status == "ok"]
                    e = np.asarray([r.e2el_ms for r in ok]) if ok else np.asarray([np.nan])
                    lag = np.asarray([r.send_lag_ms for r in run.records])
                    p50, p99 = (float(v) for v in np.percentile(e, [50, 99]))
                    n = len(run.records)
                    out["levels"].append({
                        "rate_rps": rate, "sent": n, "ok": len(ok),
                        "sustained_rps": len(ok) / run.duration_s if run.duration_s else 0.0,
                        "p50_ms": p50, "p99_ms": p99, "added_p50_ms": p50 - b50,
                        "added_p99_ms": p99 - b99,
                        "send_lag_p99_ms": float(np.percentile(lag, 99)),
                        # with worker processes their CPU is not this process's: left out
                        "client_cpu_us": None if pool else ccpu / n * 1e6,
                        "server_cpu_us": scpu / n * 1e6})
                if a.ceiling:
                    from bench.capacity.ceiling import measure_ceiling

                    c = await measure_ceiling(t, limit_ms=1.0, seconds=a.seconds)
                    out["ceiling"] = {"rate_rps": c.rate_rps, "base_p99_ms": c.base_p99_ms,
                                      "probes": [[p.rate_rps, p.added_p99_ms, p.failed]
                                                 for p in c.probes]}
                if pool is not None:
                    pool.__exit__(None, None, None)

        asyncio.run(go())
    print(json.dumps(out), flush=True)


def _null_body(q: int) -> dict[str, Any]:
    return {"query": q}


def _before_tree(commit: str, into: Path) -> Path:
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "bench", "kernels"],
                         check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def _table(rows: list[dict[str, Any]], rates: list[float]) -> str:
    import numpy as np

    lines = ["| variant | null server | rate req/s | sustained req/s | added p50 ms | "
             "added p99 ms | send-lag p99 ms | client CPU µs/req | server CPU µs/req |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for v in VARIANTS:
        mine = [r for r in rows if r["variant"] == v]
        if not mine:
            continue
        for rate in rates:
            lv = [lvl for r in mine for lvl in r["levels"] if lvl["rate_rps"] == rate]

            def med(key: str, lv: list[dict[str, Any]] = lv) -> str:
                vals = [x[key] for x in lv if x[key] is not None]
                return f"{float(np.median(vals)):.2f}" if vals else "-"

            sus = float(np.median([x["sustained_rps"] for x in lv]))
            lines.append(f"| {v} | {mine[0]['server']} | {rate:g} | {sus:.0f} | "
                         f"{med('added_p50_ms')} | {med('added_p99_ms')} | "
                         f"{med('send_lag_p99_ms')} | {med('client_cpu_us')} | "
                         f"{med('server_cpu_us')} |")
    base = {v: [r["base"]["p99_ms"] for r in rows if r["variant"] == v] for v in VARIANTS}
    lines.append("")
    lines.append("base p99 at the low rate (ms, median): " + ", ".join(
        f"{v} {float(np.median(b)):.2f}" for v, b in base.items() if b))
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="after", help=argparse.SUPPRESS)
    p.add_argument("--server", default="raw", help=argparse.SUPPRESS)
    p.add_argument("--processes", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--rates", type=float, nargs="+", default=[250, 500, 1000, 1500])
    p.add_argument("--base-rps", type=float, default=20.0)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--min-requests", type=int, default=200)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--before", default="89d6dbd", help="the commit measured as 'before'")
    p.add_argument("--ceiling", action="store_true")
    p.add_argument("--out", type=Path, default=None, help="also write every row as JSONL")
    a = p.parse_args()
    if a.child:
        return child(a)
    rows: list[dict[str, Any]] = []
    common = ["--rates", *map(str, a.rates), "--base-rps", str(a.base_rps), "--seconds",
              str(a.seconds), "--min-requests", str(a.min_requests)]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        before = _before_tree(a.before, Path(tmp))
        for _ in range(a.repeats):
            for v in a.variants:
                tree = before if v == "before" else ROOT
                argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--variant",
                        v, "--server", "uvicorn" if v in ("before", "client") else "raw",
                        "--processes", "2" if v == "after-2p" else "1", *common]
                if a.ceiling and v == "after":
                    argv.append("--ceiling")
                env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'kernels'}"}
                got = subprocess.run(argv, env=env, capture_output=True, text=True,
                                     cwd=str(tree))
                if got.returncode:
                    print(f"{v}: exit {got.returncode}: {got.stderr.strip()[-600:]}",
                          file=sys.stderr)
                    continue
                row = json.loads(got.stdout.strip().splitlines()[-1])
                print(json.dumps(row), flush=True)
                rows.append(row)
    if a.out:
        a.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"\n{len(rows)} runs, wall {time.perf_counter() - t0:.0f} s (shell: this script)\n")
    print(_table(rows, a.rates))


if __name__ == "__main__":
    main()
