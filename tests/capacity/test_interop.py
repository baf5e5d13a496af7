"""AIPerf's per-request export: bench's level written and read back gives the same
metrics; AIPerf's own records (no intended send) read with latency from the actual send."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.capacity.driver import LevelRun, RequestRecord
from bench.capacity.interop import import_aiperf, write_aiperf
from bench.capacity.metrics import summarize, table
from bench.capacity.schedule import Schedule
from bench.errors import InputError


def _run() -> LevelRun:
    sched = Schedule("poisson", np.asarray([0.0, 0.1, 0.2]), np.asarray([0, 1, 0]), 15.0, 1.0,
                     "", np.asarray([False, False, True]))
    recs = (
        # sent 10 ms late (queued): E2EL from intended 110 ms, AIPerf's latency 100 ms
        RequestRecord(0, 0, 0.0, 0.01, 0.11, "ok", 1, 0.05, (20.0, 20.0, 20.0), 4),
        RequestRecord(1, 1, 0.1, 0.1, 0.16, "ok", 1, 0.12, (40.0,), 2),
        RequestRecord(2, 0, 0.2, 0.2, 0.5, "timeout", 1, error="no complete answer"),
    )
    return LevelRun(sched, recs, 0.5)


def test_a_level_written_and_read_back_has_the_same_metrics(tmp_path: Path) -> None:
    run = _run()
    path = write_aiperf(run, tmp_path / "x" / "profile_export.jsonl", 1_700_000_000.0,
                        ["qa", "qb"])
    first = json.loads(path.read_text().splitlines()[0])
    assert first["metadata"]["conversation_id"] == "qa"
    assert first["metrics"]["request_latency"] == {"value": pytest.approx(100.0),
                                                   "unit": "ms"}
    # (100 - 40) / (4 - 1) ms: vLLM's TPOT under AIPerf's name
    assert first["metrics"]["inter_token_latency"]["value"] == pytest.approx(20.0)
    assert json.loads(path.read_text().splitlines()[2])["error"]["type"] == "timeout"
    ours = summarize(run, slo_ms={"e2el": 105})
    back = import_aiperf(path, slo_ms={"e2el": 105})
    assert back.source.startswith("aiperf") and back.extra["latency_origin"] == "intended"
    assert back.statuses == ours.statuses and back.repeats == 1
    for name in ("e2el", "ttft", "tpot", "itl"):
        a, b = getattr(ours, name), getattr(back, name)
        assert a.n == b.n and a.mean == pytest.approx(b.mean, abs=1e-3)
    assert back.good == ours.good == 1  # 60 ms within 105; 110 ms (from intended) not
    assert len(table([ours, back])) == 4


def test_aiperf_own_records_count_from_the_actual_send(tmp_path: Path) -> None:
    rec = {"metadata": {"session_num": 0, "request_start_ns": 1_000_000_000,
                        "request_end_ns": 1_300_000_000, "turn_index": 0},
           "metrics": {"request_latency": {"value": 300.0, "unit": "ms"},
                       "time_to_first_token": {"value": 100.0, "unit": "ms"},
                       "inter_chunk_latency": {"value": [100.0, 100.0], "unit": "ms"},
                       "output_sequence_length": {"value": 3, "unit": "tokens"}},
           "error": None}
    bad = {"metadata": {"session_num": 1, "request_start_ns": 1_100_000_000,
                        "request_end_ns": 1_100_500_000}, "metrics": None,
           "error": {"code": 499, "type": "RequestCancellationError", "message": "x"}}
    p = tmp_path / "profile_export.jsonl"
    p.write_text(json.dumps(rec) + "\n" + json.dumps(bad) + "\n")
    m = import_aiperf(p)
    assert m.extra["latency_origin"] == "send" and m.statuses["ok"] == 1
    assert m.statuses["failed"] == 1
    assert m.e2el.mean == pytest.approx(300.0) and m.ttft.mean == pytest.approx(100.0)
    assert m.tpot.mean == pytest.approx((300 - 100) / (3 - 1))
    p.write_text(json.dumps(rec) + "\n{\"metadata\": 3}\n")
    with pytest.raises(InputError, match=r"profile_export.jsonl:2"):
        import_aiperf(p)


def test_aiperf_records_read_from_the_credit_issue(tmp_path: Path) -> None:
    # AIPerf 0.13 records when its schedule issued the request (credit_issued_ns) and when a
    # worker sent it: from the credit, a 20 ms wait in its credit queue is latency (its
    # effective_latency); from the send (its request_latency) it is not
    rec = {"metadata": {"session_num": 0, "credit_issued_ns": 980_000_000,
                        "request_start_ns": 1_000_000_000, "request_end_ns": 1_300_000_000},
           "metrics": {"time_to_first_token": {"value": 100.0, "unit": "ms"},
                       "output_sequence_length": {"value": 3, "unit": "tokens"}},
           "error": None}
    p = tmp_path / "profile_export.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    credit = import_aiperf(p, origin="credit")
    send = import_aiperf(p, origin="send")
    assert credit.extra["latency_origin"] == "credit_issued"
    assert credit.e2el.mean == pytest.approx(300.0 + 20.0)
    assert credit.ttft.mean == pytest.approx(100.0 + 20.0)
    assert credit.send_lag.mean == pytest.approx(20.0)
    assert send.e2el.mean == pytest.approx(300.0) and send.send_lag.mean == pytest.approx(0.0)
    # TPOT is between tokens: the same from either origin
    assert credit.tpot.mean == pytest.approx(send.tpot.mean) == pytest.approx(200.0 / 2)
    del rec["metadata"]["credit_issued_ns"]
    p.write_text(json.dumps(rec) + "\n")
    with pytest.raises(InputError, match=r"profile_export.jsonl:1.*credit_issued_ns"):
        import_aiperf(p, origin="credit")
