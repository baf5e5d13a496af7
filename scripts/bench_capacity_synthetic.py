"""The capacity study against a served system of KNOWN capacity: the synthetic service
(bench.capacity.servers; 2 slots x 200 ms, 4 streamed chunks -> 10 req/s per replica; a request
queued over ``--degrade-after-ms`` gets a truncated answer, so quality falls under load).

It checks the generator's machinery on this machine where a served RAG chain's own latency
would drown it: the ceiling, the closed- vs open-loop latency at one load, the knee and its
CI, goodput and quality-goodput at 0.5 / 1 / 1.5 x the knee, the 2-replica scale-out
prediction error, and every fault.

    python scripts/bench_capacity_synthetic.py --out runs/capacity_synthetic
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from pathlib import Path

from bench.capacity.backends import HttpBackend
from bench.capacity.faults import FAULTS, Fault
from bench.capacity.report import write_study
from bench.capacity.servers import synthetic
from bench.capacity.study import LevelStore, StudySettings, run_study, study_key


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ceiling-limit-ms", type=float, default=1.0)
    p.add_argument("--service-ms", type=float, default=200.0)
    p.add_argument("--degrade-after-ms", type=float, default=300.0)
    p.add_argument("--e2el-slo-ms", type=float, default=1000.0)
    p.add_argument("--knee-start-rps", type=float, default=2.0)
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    a.out.mkdir(parents=True, exist_ok=True)
    n_queries = 10

    def start(i: int):  # type: ignore[no-untyped-def]
        return synthetic(slots=2, service_ms=a.service_ms, tokens=4,
                         degrade_after_ms=a.degrade_after_ms,
                         log_path=a.out / f"replica{i}.log").start()

    be = HttpBackend(start, path="/v1/answer", body=lambda q: {"query": q}, n_queries=n_queries,
                     name=f"synthetic service (2 slots x {a.service_ms:g} ms)", work_dir=a.out)
    s = StudySettings(slo_ms={"e2el": a.e2el_slo_ms}, level_seconds=3.0,
                      level_min_requests=60,
                      knee_start_rps=a.knee_start_rps, knee_max_levels=10,
                      knee_max_seconds=150,
                      ceiling_limit_ms=a.ceiling_limit_ms, ceiling_max_rps=2000, closed_users=4,
                      faults=tuple(Fault(k) for k in FAULTS), price_per_hour=0.10,
                      unloaded_queries=n_queries, scale_knee_max_levels=6)
    t0 = time.perf_counter()
    try:
        st = asyncio.run(run_study(be, s, score=lambda q, ans: float(ans == f"answer {q}"),
                                   store=LevelStore(a.out / "levels", study_key(be.name, s))))
    finally:
        be.close()
    write_study(st, a.out / "capacity")
    print(f"wall {time.perf_counter() - t0:.0f} s; report {a.out / 'capacity' / 'capacity.md'}")


if __name__ == "__main__":
    main()
