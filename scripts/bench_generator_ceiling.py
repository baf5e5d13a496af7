"""The load generator's own ceiling against a null endpoint on this machine: the highest
Poisson rate at which E2EL p99 (from the intended send) rises by less than ``--limit-ms``
over a low rate (``bench.capacity.ceiling.measure_ceiling``), against the synthetic null
server (``bench.capacity.servers``, ``service_ms=0``) over real HTTP on 127.0.0.1.

    flock /tmp/bench-cpu.lock python scripts/bench_generator_ceiling.py --limit-ms 1

Prints one JSON line: the ceiling, the base p99 and every probe.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from bench.capacity.ceiling import measure_ceiling
from bench.capacity.http import HttpTarget
from bench.capacity.servers import synthetic


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--limit-ms", type=float, default=1.0)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--max-rps", type=float, default=20000.0)
    p.add_argument("--label", default="")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, synthetic(log_path=Path(tmp) / "null.log") as null:
        async def go():  # type: ignore[no-untyped-def]
            async with HttpTarget([null.url], path="/v1/answer", body=lambda q: {"query": q},
                                  name="null HTTP server") as t:
                return await measure_ceiling(t, limit_ms=a.limit_ms, seconds=a.seconds,
                                             max_rps=a.max_rps)

        t0 = time.perf_counter()
        c = asyncio.run(go())
    print(json.dumps({"label": a.label, "ceiling_rps": c.rate_rps, "limit_ms": c.limit_ms,
                      "base_p99_ms": c.base_p99_ms, "wall_s": time.perf_counter() - t0,
                      "probes": [asdict(x) for x in c.probes]}))


if __name__ == "__main__":
    main()
