"""The schedule split over 2 local Ray workers against a real server: one merged level, each
request once, latency from the intended time."""

from __future__ import annotations

import numpy as np
import pytest

from bench.capacity.metrics import summarize
from bench.capacity.schedule import poisson_arrivals
from bench.capacity.servers import Served

pytest.importorskip("ray")


@pytest.mark.slow
def test_two_ray_workers_share_one_schedule(service: Served) -> None:
    import ray

    from bench.capacity.distributed import run_distributed, start_local_ray

    start_local_ray()  # the small local node run_distributed starts itself
    sched = poisson_arrivals(rate_rps=20, n=40, n_queries=5, seed=4)
    try:
        run = run_distributed(sched, urls=[service.url], path="/v1/answer",
                              bodies=[{"query": q} for q in range(5)], workers=2)
    finally:
        ray.shutdown()
    assert [r.index for r in run.records] == list(range(40))
    assert [r.query for r in run.records] == sched.query.tolist()
    assert np.allclose([r.intended_s for r in run.records], sched.send_s)
    assert all(r.status == "ok" for r in run.records)
    m = summarize(run, slo_ms={"e2el": 5000})
    assert m.completed == 40 and m.offered_rps == pytest.approx(20)
    assert run.meta["engine"] == "ray, 2 workers"
    # every request left close to its intended time: the two workers kept one clock
    assert m.send_lag.percentiles["p50"] < 200
