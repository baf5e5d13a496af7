"""Write-back: scores become gen_ai.evaluation.result OTLP log events parented to the
evaluated span; reading the file back gives the same scores on the same spans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trace_fixtures import CORPUS, otlp_file

from bench.traces.__main__ import main
from bench.traces.evaluations import Evaluation, read_events, write_events
from bench.traces.importer import import_traces


def test_scores_round_trip_onto_their_spans(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    otlp_file(tmp_path / "spans.jsonl", [
        {"query": "q one", "docs": [("d1", 0.9)], "answer": "a"},
        {"query": "q two", "docs": [("d2", 0.4)], "answer": "b"}])
    recs, _ = import_traces(tmp_path / "spans.jsonl", corpus=CORPUS)
    scores = tmp_path / "scores.jsonl"
    rows = []
    for i, r in enumerate(recs):
        rows.append({"trace_id": r.trace_id, "span_id": r.span_id, "name": "faithfulness",
                     "value": 0.25 * (i + 1), "label": "pass" if i else "fail",
                     "explanation": f"{i + 1} of 4 claims supported"})
        rows.append({"trace_id": r.trace_id, "span_id": r.answer_span_id,
                     "name": "answer_relevancy", "value": 1.0})
    scores.write_text("".join(json.dumps(x) + "\n" for x in rows))
    events = tmp_path / "events.jsonl"
    assert main(["writeback", str(scores), "--out", str(events)]) == 0
    line = json.loads(events.read_text().splitlines()[0])
    rec0 = line["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert rec0["eventName"] == "gen_ai.evaluation.result"
    assert rec0["traceId"] == recs[0].trace_id and rec0["spanId"] == recs[0].span_id
    back = read_events(events)
    assert [(e.trace_id, e.span_id, e.name, e.value, e.label, e.explanation) for e in back] == [
        (x["trace_id"], x["span_id"], x["name"], x["value"], x.get("label"),
         x.get("explanation")) for x in rows]
    # the evaluated spans are spans of the imported traces
    spans = {(r.trace_id, r.span_id) for r in recs} | {(r.trace_id, r.answer_span_id)
                                                       for r in recs}
    assert {(e.trace_id, e.span_id) for e in back} <= spans
    assert main(["evaluations", str(events)]) == 0
    assert capsys.readouterr().out.strip().endswith("4 gen_ai.evaluation.result events")


def test_append_and_bad_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = Evaluation("ab" * 16, "cd" * 8, "context_relevance", label="relevant")
    assert write_events([ev], tmp_path / "e.jsonl") == 1
    assert write_events([ev], tmp_path / "e.jsonl") == 1
    assert len(read_events(tmp_path / "e.jsonl")) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"trace_id": "zz", "span_id": "cd" * 8, "name": "x",
                               "value": 1}) + "\n")
    assert main(["writeback", str(bad), "--out", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{bad}:1: field 'trace_id' must be 32 hex digits, got 'zz'")
    assert not (tmp_path / "o.jsonl").exists()
