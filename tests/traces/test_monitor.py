"""Guardrails: each rule passes / alerts on a window built to sit on either side of its
bound, alerts say whether a deploy fell in the window, exit codes 0 / 3 / 2."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.monitor.__main__ import main
from bench.monitor.rules import control_band
from bench.traces.evaluations import Evaluation, write_events
from bench.traces.record import RetrievedDoc, TraceRecord, record_to_json

T0 = 1_796_000_000_000_000_000  # ns


def _records(n: int, *, slow_every: int = 0, regen_every: int = 0) -> list[TraceRecord]:
    out = []
    for i in range(n):
        out.append(TraceRecord(
            trace_id=f"{i:032x}", span_id=f"{i:016x}", source_format="otlp", source=f"f:{i}",
            timestamp_ns=T0 + i * 1_000_000_000, query=f"q{i}",
            documents=(RetrievedDoc("d1", 1, 0.5),),
            total_ms=2000.0 if slow_every and i % slow_every == 0 else 100.0,
            input_tokens=1000, output_tokens=100,
            regenerated=bool(regen_every and i % regen_every == 0)))
    return out


def _write(tmp: Path, records: list[TraceRecord], rules: str) -> tuple[Path, Path]:
    (tmp / "records.jsonl").write_text("".join(json.dumps(record_to_json(r)) + "\n"
                                               for r in records))
    (tmp / "rules.yaml").write_text(rules)
    return tmp / "rules.yaml", tmp / "records.jsonl"


RULES = """\
deploys:
  - {{at: "{deploy}", version: v42}}
rules:
  faithfulness: {{floor: 0.7, sample: 20, events: evals.jsonl}}
  p95_latency_ms: {{slo: 1500}}
  regeneration_rate: {{baseline: 0.05, z: 3}}
  cost_per_query_usd: {{budget: {budget}, price_per_1k_input_tokens: 0.0005,
                       price_per_1k_output_tokens: 0.0015}}
"""


def _evals(tmp: Path, records: list[TraceRecord], value: float) -> None:
    write_events([Evaluation(r.trace_id, r.span_id, "faithfulness", value)
                  for r in records[-30:]], tmp / "evals.jsonl")


def test_all_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = _records(100, regen_every=20)  # 5 % regenerated, nothing slow
    _evals(tmp_path, recs, 0.9)
    # cost 1000/1e3 * 0.0005 + 100/1e3 * 0.0015 = 0.00065 per query
    rules, window = _write(tmp_path, recs, RULES.format(deploy="2020-01-01T00:00:00Z",
                                                        budget=0.001))
    assert main([str(rules), str(window), "--out", str(tmp_path / "m.json")]) == 0
    rep = json.loads((tmp_path / "m.json").read_text())
    got = {o["rule"]: o for o in rep["outcomes"]}
    assert {o["status"] for o in got.values()} == {"pass"}
    assert got["cost_per_query_usd"]["value"] == pytest.approx(0.0005 + 0.00015)
    assert got["faithfulness"]["value"] == pytest.approx(0.9)
    assert got["faithfulness"]["n"] == 20  # the rolling sample: last 20 scored requests
    assert got["regeneration_rate"]["value"] == pytest.approx(0.05)


def test_alerts_and_deploy_markers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = _records(100, slow_every=10, regen_every=4)  # 10 % at 2 s; 25 % regenerated
    _evals(tmp_path, recs, 0.5)
    inside = datetime.fromtimestamp(T0 / 1e9 + 30, tz=UTC).isoformat()  # window: T0..T0+99s
    rules, window = _write(tmp_path, recs, RULES.format(deploy=inside, budget=0.0005))
    assert main([str(rules), str(window), "--out", str(tmp_path / "m.json")]) == 3
    rep = json.loads((tmp_path / "m.json").read_text())
    assert rep["alerts"] == 4
    for o in rep["outcomes"]:
        assert o["status"] == "alert" and o["deploy_in_window"] and o["deploys"] == ["v42"]
        assert "regression" in o["triage"]
    out = capsys.readouterr().out
    assert out.count("bench.monitor: alert:") == 4
    # the same window with the deploy a day earlier: the alerts point at drift
    rules, window = _write(tmp_path, recs, RULES.format(
        deploy=datetime.fromtimestamp(T0 / 1e9 - 86400, tz=UTC).isoformat(), budget=0.0005))
    assert main([str(rules), str(window), "--out", str(tmp_path / "m.json")]) == 3
    rep = json.loads((tmp_path / "m.json").read_text())
    assert all(not o["deploy_in_window"] and "drift" in o["triage"] for o in rep["outcomes"])


def test_control_band_follows_window_size() -> None:
    lo, hi = control_band(0.05, 100, 3.0)
    half = 3.0 * math.sqrt(0.05 * 0.95 / 100)
    assert (lo, hi) == pytest.approx((0.0, 0.05 + half))
    lo4, hi4 = control_band(0.05, 10_000, 3.0)
    assert hi4 - lo4 == pytest.approx(2 * 3.0 * math.sqrt(0.05 * 0.95 / 10_000))
    # 8 % regenerations: inside the band of 100 requests, outside the band of 10 000
    assert lo <= 0.08 <= hi and not lo4 <= 0.08 <= hi4


@pytest.mark.parametrize(("text", "line", "msg"), [
    ("rules:\n  p95_latency_ms: {slo: fast}\n", 2, "rules.p95_latency_ms.slo: must be a number"),
    ("rules:\n  p99: {slo: 1}\n", 2, "rules.p99: unknown rule"),
    ("rules:\n  regeneration_rate:\n    baseline: 0.05\n    zz: 3\n", 4,
     "rules.regeneration_rate.zz: unknown setting"),
    ("rules:\n  faithfulness: {floor: 0.5, events: nope.jsonl}\n", 2,
     "rules.faithfulness.events: file not found"),
    ("rules: [\n", 2, "malformed YAML"),
])
def test_bad_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int,
                   msg: str) -> None:
    rules, window = _write(tmp_path, _records(3), text)
    assert main([str(rules), str(window)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{rules}:{line}: {msg}"), err
