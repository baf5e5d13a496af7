"""Arrival schedules: vLLM's gamma parameterisation, normalisation, ramps, trace replay."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.capacity.schedule import (
    gamma_arrivals,
    poisson_arrivals,
    ramp_arrivals,
    trace_arrivals,
)
from bench.errors import InputError


def test_poisson_rate_is_exact_and_gaps_exponential() -> None:
    s = poisson_arrivals(rate_rps=20.0, n=4000, n_queries=7, seed=3)
    assert s.kind == "poisson" and len(s) == 4000
    assert s.send_s[-1] == pytest.approx(4000 / 20.0)  # vLLM rescales: last at n / rate
    gaps = np.diff(np.concatenate([[0.0], s.send_s]))
    assert gaps.mean() == pytest.approx(1 / 20.0, rel=1e-9)
    # exponential: coefficient of variation 1
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.06)
    # every query equally often
    assert sorted(np.bincount(s.query, minlength=7).tolist()) == [571] * 4 + [572] * 3


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness_is_shape_with_the_same_mean(burstiness: float) -> None:
    # Gamma(k, 1 / (rate k)): mean 1 / rate, CV 1 / sqrt(k) — vLLM's --burstiness
    s = gamma_arrivals(rate_rps=10.0, n=6000, n_queries=3, burstiness=burstiness, seed=1)
    gaps = np.diff(np.concatenate([[0.0], s.send_s]))
    assert gaps.mean() == pytest.approx(0.1, rel=1e-9)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)
    assert s.kind == "gamma"


def test_constant_and_seeds() -> None:
    s = gamma_arrivals(rate_rps=4.0, n=8, n_queries=2, burstiness=math.inf)
    assert np.allclose(s.send_s, np.arange(1, 9) / 4.0)
    a = poisson_arrivals(rate_rps=5, n=50, n_queries=5, seed=9)
    b = poisson_arrivals(rate_rps=5, n=50, n_queries=5, seed=9)
    c = poisson_arrivals(rate_rps=5, n=50, n_queries=5, seed=10)
    assert np.array_equal(a.send_s, b.send_s) and not np.array_equal(a.send_s, c.send_s)


def test_ramps() -> None:
    lin = ramp_arrivals(start_rps=10, end_rps=50, n=3000, n_queries=4, seed=0)
    gaps = np.diff(lin.send_s)
    first, last = gaps[:300].mean(), gaps[-300:].mean()
    assert 1 / first == pytest.approx(10 + 40 * 0.05, rel=0.15)
    assert 1 / last == pytest.approx(50 - 40 * 0.05, rel=0.15)
    step = ramp_arrivals(start_rps=10, end_rps=40, n=4000, n_queries=4, strategy="step",
                         steps=4, burstiness=math.inf)
    rates = np.round(1 / np.diff(step.send_s)).astype(int)
    assert sorted(set(rates.tolist())) == [10, 20, 30, 40]
    exp = ramp_arrivals(start_rps=1, end_rps=100, n=3, n_queries=1, strategy="exponential",
                        burstiness=math.inf)
    assert np.allclose(np.diff(np.concatenate([[0], exp.send_s])), [1, 0.1, 0.01])
    with pytest.raises(ValueError, match="strategy"):
        ramp_arrivals(start_rps=1, end_rps=2, n=3, n_queries=1, strategy="sine")  # type: ignore[arg-type]


def test_trace_replay_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("timestamp_s,query_id\n10.0,b\n10.5,a\n12.0,b\n")
    s = trace_arrivals(p, ["a", "b"])
    assert s.send_s.tolist() == [0.0, 0.5, 2.0] and s.query.tolist() == [1, 0, 1]
    assert s.rate_rps == pytest.approx(1.5)
    j = tmp_path / "t.jsonl"
    j.write_text('{"timestamp_s": 1, "query_id": "a"}\n{"timestamp_s": 0.5, "query_id": "a"}\n')
    with pytest.raises(InputError, match=r"t.jsonl:2: timestamps"):
        trace_arrivals(j, ["a"])
    p.write_text("timestamp_s,query_id\n1,zz\n")
    with pytest.raises(InputError, match=r"t.csv:2: unknown query_id 'zz'"):
        trace_arrivals(p, ["a"])
    p.write_text("time,q\n")
    with pytest.raises(InputError, match=r"t.csv:1"):
        trace_arrivals(p, ["a"])


def test_a_trace_with_invalid_utf8_is_the_one_line_input_error(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_bytes(b"timestamp_s,query_id\n0,a\n1,\xe9b\n")
    with pytest.raises(InputError) as err:
        trace_arrivals(p, ["a", "b"])
    assert str(err.value).startswith(f"{p}:3: invalid UTF-8 (byte 0xe9")
    p.write_bytes(b"\xef\xbb\xbftimestamp_s,query_id\n0,a\n")  # a BOM is not the header
    assert trace_arrivals(p, ["a"]).query.tolist() == [0]


def test_shares_partition_the_schedule() -> None:
    s = poisson_arrivals(rate_rps=10, n=11, n_queries=3)
    a, b = s.part(0, 2), s.part(1, 2)
    assert sorted(np.concatenate([a.send_s, b.send_s]).tolist()) == s.send_s.tolist()
    assert len(a) == 6 and len(b) == 5


def test_query_stream_draws_unused_queries_first_and_flags_repeats() -> None:
    from bench.capacity.schedule import QueryStream

    s = QueryStream(5, seed=3)
    s.mark(np.asarray([0, 1]))  # an earlier pass asked queries 0 and 1
    q, seen = s.draw(3)
    assert sorted(q.tolist()) == [2, 3, 4] and not seen.any()  # the 3 unused ones first
    q2, seen2 = s.draw(7)
    # every query once more before any a third time; all seen before; within the level
    # the 6th and 7th requests are second asks
    assert sorted(q2[:5].tolist()) == [0, 1, 2, 3, 4] and seen2.all()
    assert len(set(q2[:5].tolist())) == 5 and s.counts.sum() == 2 + 3 + 7
    again = QueryStream(5, seed=3)
    again.mark(np.asarray([0, 1]))
    assert again.draw(3)[0].tolist() == q.tolist()  # a resumed study draws the same


def test_a_fresh_schedule_keeps_its_send_times() -> None:
    from bench.capacity.schedule import QueryStream

    sched = poisson_arrivals(rate_rps=10, n=4, n_queries=2, seed=0)
    f = QueryStream(3).fresh(sched)
    assert np.array_equal(f.send_s, sched.send_s) and sorted(f.query[:3].tolist()) == [0, 1, 2]
    assert f.seen is not None and f.seen.tolist() == [False, False, False, True]
    assert f.part(1, 2).seen.tolist() == [False, True]
