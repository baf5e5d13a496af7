"""The load generator's own ceiling against a null endpoint on this machine: the highest
Poisson rate at which E2EL p99 (from the intended send) rises by less than ``--limit-ms``
over a low rate (``bench.capacity.ceiling.measure_ceiling``), against the synthetic null
server (``bench.capacity.servers``, ``service_ms=0``) over real HTTP on 127.0.0.1.

    flock /tmp/bench-cpu.lock python scripts/bench_generator_ceiling.py --limit-ms 1

``--processes N`` sends each level from N generator processes on one schedule
(:class:`bench.capacity.workers.ProcessPool`). Prints one JSON line: the ceiling, the base
p99 and every probe.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.capacity.ceiling import measure_ceiling
from bench.capacity.http import HttpTarget
from bench.capacity.servers import synthetic


def null_body(q: int) -> dict[str, Any]:
    return {"query": q}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--limit-ms", type=float, default=1.0)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--max-rps", type=float, default=20000.0)
    p.add_argument("--label", default="")
    p.add_argument("--processes", type=int, default=0,
                   help="generator processes on one schedule (0: one event loop, in process)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, synthetic(log_path=Path(tmp) / "null.log") as null:
        factory = functools.partial(HttpTarget, [null.url], path="/v1/answer", body=null_body,
                                    name="null HTTP server")

        async def go():  # type: ignore[no-untyped-def]
            async with factory() as t:
                if not a.processes:
                    return await measure_ceiling(t, limit_ms=a.limit_ms, seconds=a.seconds,
                                                 max_rps=a.max_rps)
                from bench.capacity.workers import ProcessPool

                with ProcessPool(a.processes, factory) as pool:
                    return await measure_ceiling(
                        t, limit_ms=a.limit_ms, seconds=a.seconds, max_rps=a.max_rps,
                        runner=lambda sched, timeout: pool.run_open(sched, timeout_s=timeout))

        t0 = time.perf_counter()
        c = asyncio.run(go())
    print(json.dumps({"label": a.label, "processes": a.processes, "ceiling_rps": c.rate_rps,
                      "limit_ms": c.limit_ms,
                      "base_p99_ms": c.base_p99_ms, "wall_s": time.perf_counter() - t0,
                      "probes": [asdict(x) for x in c.probes]}))


if __name__ == "__main__":
    main()
