"""vLLM-named metrics, goodput and quality-goodput by hand; the vLLM result JSON both ways."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.capacity.driver import LevelRun, RequestRecord
from bench.capacity.metrics import check_slo, import_vllm, summarize, table
from bench.capacity.schedule import Schedule
from bench.errors import ConfigError, InputError


def rec(i: int, *, intended: float, sent: float, first: float | None, end: float, tokens: int,
        status: str = "ok", answer: str | None = "x", attempts: int = 1) -> RequestRecord:
    itl = () if first is None or tokens < 2 else tuple([(end - first) * 1000 / (tokens - 1)]
                                                        * (tokens - 1))
    return RequestRecord(i, i % 2, intended, sent, end, status, attempts,  # type: ignore[arg-type]
                         first, itl, tokens, answer)


def level() -> LevelRun:
    recs = (
        # waited 0.1 s for a slot: TTFT 0.2 s and E2EL 0.5 s count from the intended 0.0
        rec(0, intended=0.0, sent=0.1, first=0.2, end=0.5, tokens=4, answer="right"),
        rec(1, intended=0.5, sent=0.5, first=0.6, end=0.7, tokens=3, answer="wrong"),
        rec(2, intended=1.0, sent=1.0, first=1.1, end=1.2, tokens=1, answer="right"),
        rec(3, intended=1.5, sent=1.5, first=None, end=3.5, tokens=0, status="timeout",
            answer=None),
        rec(4, intended=2.0, sent=2.3, first=None, end=2.4, tokens=0, status="rate_limited",
            answer=None, attempts=3),
    )
    sched = Schedule("poisson", np.array([r.intended_s for r in recs]),
                     np.array([r.query for r in recs]), 2.5, 1.0, "poisson 2.5 req/s")
    return LevelRun(sched, recs, 3.5)


def test_vllm_definitions_and_goodput() -> None:
    m = summarize(level(), slo_ms={"ttft": 150, "e2el": 400},
                  score=lambda q, a: 1.0 if a == "right" else 0.25)
    assert m.n_requests == 5 and m.completed == 3
    assert m.statuses == {"ok": 3, "timeout": 1, "failed": 0, "rate_limited": 1,
                          "invalid": 0}
    assert m.offered_rps == pytest.approx(5 / 2.0) and m.achieved_rps == pytest.approx(3 / 3.5)
    assert m.ttft.mean == pytest.approx((200 + 100 + 100) / 3)
    # TPOT: (e2el - ttft) / (tokens - 1) for >= 2 tokens: 300 / 3 and 100 / 2
    assert m.tpot.mean == pytest.approx((100 + 50) / 2) and m.tpot.n == 2
    assert m.itl.n == 3 + 2  # every gap, pooled
    assert m.e2el.median == pytest.approx(200) and m.e2el.std == pytest.approx(
        np.std([500, 200, 200]))
    assert m.e2el.percentiles["p90"] == pytest.approx(np.percentile([500, 200, 200], 90))
    # good: ok, TTFT <= 150 and E2EL <= 400 -> requests 1 and 2 (0 queued too long)
    assert m.good == 2 and m.goodput_rps == pytest.approx(2 / 3.5)
    assert m.goodput_fraction == pytest.approx(2 / 5)  # failures count against the share
    # quality-goodput: good AND correct -> request 2 only
    assert (m.correct, m.quality_good) == (2, 1)
    assert m.quality_goodput_rps == pytest.approx(1 / 3.5)
    # delivered quality: 1 + 0.25 + 1 over the 3 answered, 0 for the 2 without an answer
    assert m.quality_mean == pytest.approx(2.25 / 5)
    assert m.quality_by_query == {0: pytest.approx((1 + 1 + 0) / 3), 1: pytest.approx(0.25 / 2)}
    assert m.retries == 2 and m.send_lag.percentiles["p99"] is not None
    assert "| poisson 2.5 req/s | bench |" in "\n".join(table([m]))


def test_tpot_slo_treats_one_token_as_zero() -> None:
    m = summarize(level(), slo_ms={"tpot": 60})
    assert m.good == 2  # request 1 (50 ms) and request 2 (1 token: TPOT 0, vLLM's rule)


def test_vllm_json_round_trip_and_import(tmp_path: Path) -> None:
    m = summarize(level(), slo_ms={"e2el": 400})
    js = m.to_vllm()
    for key in ("request_throughput", "request_goodput", "mean_ttft_ms", "median_tpot_ms",
                "std_itl_ms", "p99_e2el_ms", "p95_e2el_ms", "completed", "duration"):
        assert key in js
    assert js["bench"]["latency_origin"] == "intended"
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(js))
    back = import_vllm(p)
    assert back.e2el.percentiles["p99"] == pytest.approx(m.e2el.percentiles["p99"])
    assert back.achieved_rps == pytest.approx(m.achieved_rps)
    # a vLLM --save-result file as vLLM writes it (metric-percentiles 50,90,99)
    v = {"date": "20261201-120000", "backend": "vllm", "label": None, "model_id": "Qwen/Q",
         "num_prompts": 100, "request_rate": 4.0, "burstiness": 1.0, "max_concurrency": None,
         "duration": 26.5, "completed": 98, "failed": 2, "total_input_tokens": 10000,
         "total_output_tokens": 12000, "request_throughput": 3.7, "request_goodput": 3.1,
         "output_throughput": 452.8, "total_token_throughput": 830.2,
         "mean_ttft_ms": 41.0, "median_ttft_ms": 38.0, "std_ttft_ms": 9.0, "p50_ttft_ms": 38.0,
         "p90_ttft_ms": 55.0, "p99_ttft_ms": 80.0, "mean_tpot_ms": 12.0,
         "median_tpot_ms": 11.5, "std_tpot_ms": 2.0, "p99_tpot_ms": 20.0}
    p2 = tmp_path / "vllm.json"
    p2.write_text(json.dumps(v))
    lv = import_vllm(p2)
    assert (lv.n_requests, lv.completed, lv.statuses["failed"]) == (100, 98, 2)
    assert lv.ttft.percentiles["p99"] == 80.0 and lv.ttft.percentiles["p95"] is None
    assert lv.e2el.mean is None  # vLLM was not asked for e2el percentiles
    assert lv.goodput_rps == 3.1 and lv.source == "vllm (vllm.json)"
    assert "| Qwen/Q | vllm (vllm.json) | 4.00 / 3.70 |" in "\n".join(table([m, lv]))
    p2.write_text("{}")
    with pytest.raises(InputError, match=r"vllm\.json: not a vLLM bench serve result"):
        import_vllm(p2)


def test_slo_keys_are_checked() -> None:
    assert check_slo({"ttft": 100}) == {"ttft": 100.0}
    with pytest.raises(ConfigError, match=r"capacity.slo_ms.ttfb"):
        check_slo({"ttfb": 1})
    with pytest.raises(ConfigError, match=r"capacity.slo_ms.e2el"):
        check_slo({"e2el": 0})


def test_tail_ci_only_where_the_level_has_the_samples() -> None:
    from bench.capacity.metrics import tail_ci

    assert tail_ci(list(range(50)), 0.99) is None  # 50 < 1 / 0.01: no sample beyond p99
    t = tail_ci([float(v) for v in range(1, 1001)], 0.99)
    assert t is not None and t["n"] == 1000
    # ranks 990 -/+ 1.96 sqrt(1000 x 0.99 x 0.01) = 990 -/+ 6.17 -> 983 and 997 + 1
    assert t["ci_low"] == 983.0 and t["ci_high"] == 998.0
    t9 = tail_ci([float(v) for v in range(1, 1001)], 0.999)
    assert t9 is not None and t9["ci_high"] is None  # the rank falls past the largest sample


def test_repeats_are_reported_apart_from_first_seen_queries() -> None:
    from bench.capacity.driver import LevelRun, RequestRecord
    from bench.capacity.metrics import summarize
    from bench.capacity.schedule import Schedule

    sched = Schedule("poisson", np.asarray([0.0, 0.1, 0.2, 0.3]), np.asarray([0, 1, 0, 1]),
                     10.0, 1.0, "", np.asarray([False, False, True, True]))
    # first asks take 100 ms, repeats 1 ms (a server cache)
    recs = tuple(RequestRecord(i, int(sched.query[i]), float(sched.send_s[i]),
                               float(sched.send_s[i]),
                               float(sched.send_s[i]) + (0.001 if i >= 2 else 0.1), "ok", 1)
                 for i in range(4))
    m = summarize(LevelRun(sched, recs, 0.4), slo_ms={"e2el": 50},
                  score=lambda q, a: 1.0)
    assert m.repeats == 2 and m.e2el_fresh.n == 2 and m.e2el_repeat.n == 2
    assert abs(m.e2el_fresh.mean - 100.0) < 1e-6 and abs(m.e2el_repeat.mean - 1.0) < 1e-6
    # 2 of 4 good (the repeats) and correct: Wilson 95 % interval of 2 / 4
    assert m.quality_good == 2 and m.quality_goodput_ci is not None
    lo, hi = m.quality_goodput_ci
    assert 0.0 < lo < 0.5 < hi < 1.0
