"""End-to-end arithmetic on hand-made timing samples (no pipeline run): a stage run twice for
one query adds up, batch samples never count, and configs.parquet's e2e columns come from
the interleaved pass when it timed the config, else from the per-query sums with CIs. (The
chain sums and whole-request samples are tested in tests/pipeline/test_gates.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from bench.metrics.stats import PercentileCI
from bench.pipeline.e2e import STAGE_SUM_SOURCE, end_to_end_ms, stage_ms_by_query
from bench.pipeline.latency import LatencyEstimate, LatencySettings
from bench.pipeline.record import e2e_columns
from bench.telemetry.base import StageTiming

SETTINGS = LatencySettings(interleave=False, queries=0, warmup=0, seed=0, resamples=200,
                           confidence=0.95)


def q(stage: str, qid: str, ms: float, kind: str = "query") -> StageTiming:
    return StageTiming(stage, kind, 1, ms, query_id=qid)


def test_per_query_samples_add_up_along_the_chain_and_a_repeated_stage_adds() -> None:
    timings = (q("embed_query", "a", 2.0), q("embed_query", "b", 3.0),
               q("retrieve", "a", 5.0), q("retrieve", "b", 7.0),
               q("retrieve", "a", 1.0),  # a second search for query a (after a rewrite)
               q("rerank", "a", 100.0))  # not a stage of this config's chain
    qids, per = stage_ms_by_query(timings, ("embed_query", "retrieve"))
    assert qids == ["a", "b"]
    assert per["retrieve"].tolist() == [6.0, 7.0]
    assert end_to_end_ms(timings, ("embed_query", "retrieve")) == [8.0, 10.0]


def test_whole_stage_samples_are_shared_evenly_and_batch_samples_never_count() -> None:
    timings = (q("retrieve", "a", 5.0), q("retrieve", "b", 7.0),
               StageTiming("fusion", "total", 4, 8.0),  # 2 ms per item
               StageTiming("retrieve", "batch", 2, 1000.0),  # the batch pass: not latency
               StageTiming("fusion", "total", 0, 50.0))  # no items: nothing to share
    assert end_to_end_ms(timings, ("retrieve", "fusion")) == [7.0, 9.0]


def test_e2e_columns_from_samples_with_cis_and_from_the_measured_pass() -> None:
    e2e = [float(x) for x in np.linspace(1.0, 100.0, 100)]
    cols = e2e_columns(e2e, None, SETTINGS)
    assert cols["n_e2e_samples"] == 100 and cols["latency_source"] == STAGE_SUM_SOURCE
    assert cols["e2e_p50_ms"] == pytest.approx(float(np.percentile(e2e, 50)))
    for name in ("p50", "p95", "p99"):
        lo, v, hi = (cols[f"e2e_{name}_ci_low"], cols[f"e2e_{name}_ms"],
                     cols[f"e2e_{name}_ci_high"])
        assert lo <= v <= hi
    assert cols["e2e_p50_ci_low"] < cols["e2e_p50_ci_high"]
    measured = LatencyEstimate("c1", 40, 5, PercentileCI(50, 3.0, 2.0, 4.0, 40),
                               PercentileCI(95, 9.0, 8.0, 10.0, 40),
                               PercentileCI(99, 12.0, 11.0, 13.0, 40), "interleaved pass")
    cols = e2e_columns(e2e, measured, SETTINGS)  # the pass wins over the samples
    assert (cols["n_e2e_samples"], cols["n_latency_warmup"], cols["latency_source"]) == (
        40, 5, "interleaved pass")
    assert (cols["e2e_p95_ms"], cols["e2e_p95_ci_low"], cols["e2e_p95_ci_high"]) == (
        9.0, 8.0, 10.0)
    assert e2e_columns([], None, SETTINGS) == {
        "n_e2e_samples": 0, "e2e_p50_ms": None, "e2e_p95_ms": None, "e2e_p99_ms": None}
