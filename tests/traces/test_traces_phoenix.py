"""A round trip through a real Arize Phoenix server (``phoenix serve`` from its own venv,
offline): a real ``bench.serve`` writes GenAI spans, bench sends them to Phoenix's OTLP/HTTP
endpoint and its evaluations as span annotations; Phoenix's REST API gives back the same ids,
parents, documents and scores, and Phoenix's own span export (its client's dataframe)
imports into bench as OpenInference with the same records. Skipped without the venv."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
from server_fixture import SMALL, in_process, served
from test_traces_serve import _imported

from bench.traces.__main__ import main
from bench.traces.evaluations import Evaluation, read_events, send_evaluations, write_events
from bench.traces.export import Endpoint, send_spans, trace_requests
from bench.traces.importer import import_traces
from bench.traces.phoenix import (
    PhoenixServer,
    annotate,
    export_dataframe,
    phoenix_venv,
    read_annotations,
    read_spans,
)

pytestmark = pytest.mark.skipif(
    not (phoenix_venv() / "bin" / "phoenix").is_file(),
    reason=f"no Phoenix venv at {phoenix_venv()} (PHOENIX_VENV; docs/traces.md says how to "
           "make one: arize-phoenix conflicts with bench's own dependencies)")


@pytest.mark.slow  # bench.serve + phoenix serve on 2 busy cores (~1 min)
def test_spans_and_evaluations_round_trip_through_phoenix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    p = in_process(list(SMALL), cache)
    spec = p.plan.configs[0]
    p.executor.value(spec.pool_node)
    spans = tmp_path / "spans.jsonl"
    queries = p.dataset.queries[:5]
    with (served([*SMALL, f"config={spec.config_id}", f"serve.traces={spans}"], cache) as srv,
          httpx.Client(base_url=srv.base_url, timeout=120) as c):
        for i, q in enumerate(queries):
            r = c.post("/v1/retrieve", json={"query": q.text, "k": 4, "tenant": "",
                                             "trace_attributes": {"user.id": f"u{i}"}})
            assert r.status_code == 200, r.text
        local, _ = _imported(spans, p.dataset.documents, len(queries))
    assert len(local) == len(queries)
    sent_spans = [s for _, msg, _ in trace_requests(spans) for rs in msg.resource_spans
                  for ss in rs.scope_spans for s in ss.spans]
    evals = [Evaluation(r.trace_id, r.span_id, "top_score", r.documents[0].score,
                        "high" if (r.documents[0].score or 0) > 0.5 else "low", f"u{i}")
             for i, r in enumerate(local)]
    events = tmp_path / "evals.otlp.jsonl"
    write_events(evals, events)

    with PhoenixServer(tmp_path / "phoenix") as px:
        ep = Endpoint(px.base_url).check()
        assert {d.status for _, d in send_spans(spans, ep)} == {"sent"}
        # Phoenix has no OTLP logs receiver: the CLI refuses it before work (its empty probe
        # is answered 405); sent anyway, every event gets that status and stays in the file
        assert main(["send", str(events), "--endpoint", px.base_url]) == 2
        assert "answered 405" in capsys.readouterr().err
        assert {d.status for _, d in send_evaluations(read_events(events), ep)} == {"http_405"}
        # Phoenix ingests spans asynchronously: annotate them once they are stored (a span
        # not stored yet is a 404 for its annotation)
        deadline = time.monotonic() + 60
        while len(got := read_spans(px.base_url)) < len(sent_spans) \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert annotate(px.base_url, evals) == 200
        by_id = {s["context"]["span_id"]: s for s in got}
        assert set(by_id) == {s.span_id.hex() for s in sent_spans}
        for s in sent_spans:
            back = by_id[s.span_id.hex()]
            assert back["context"]["trace_id"] == s.trace_id.hex()
            assert (back["parent_id"] or "") == s.parent_span_id.hex()
            assert back["name"] == s.name
        for r in local:
            back = by_id[r.span_id]
            assert back["span_kind"] == "RETRIEVER"  # GenAI retrieval read as OpenInference
            assert back["attributes"]["input.value"] == r.query

        notes = {a["span_id"]: a for a in read_annotations(px.base_url,
                                                           [e.span_id for e in evals])}
        assert set(notes) == {e.span_id for e in evals}
        for e in evals:
            res = notes[e.span_id]["result"]
            assert notes[e.span_id]["name"] == "top_score"
            assert res["score"] == pytest.approx(e.value)
            assert (res["label"], res["explanation"]) == (e.label, e.explanation)

        frame = tmp_path / "phoenix_spans.parquet"
        assert export_dataframe(px, frame) == len(sent_spans)
    back_recs, rep = import_traces(frame, corpus=p.dataset.documents)
    assert rep.format == "openinference" and rep.records == len(local)
    assert rep.docs_unknown == 0
    mine = {r.trace_id: r for r in local}
    for b in back_recs:
        r = mine[b.trace_id]
        assert (b.span_id, b.query, b.user) == (r.span_id, r.query, r.user)
        assert [(d.doc_id, d.rank) for d in b.documents] == \
            [(d.doc_id, d.rank) for d in r.documents]
        # Phoenix keeps scores to 10 decimals
        assert [d.score for d in b.documents] == pytest.approx(
            [d.score for d in r.documents], abs=1e-9)
        assert b.total_ms == pytest.approx(r.total_ms, abs=1e-3)
