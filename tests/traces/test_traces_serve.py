"""``bench.serve`` with ``serve.traces`` set: a real server process writes OpenTelemetry GenAI
spans through the SDK, and ``bench.traces import`` reads them back into records that match
what the server answered (same documents, scores, ranks; the corpus fingerprint on the spans
is the served corpus's)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
from server_fixture import SMALL, in_process, served

from bench.errors import InputError
from bench.traces.importer import corpus_fingerprint, import_traces
from bench.traces.replay import replay


def _imported(spans: Path, docs: Any, n: int) -> Any:
    """The spans of a running server's ``n`` requests (its batch processor flushes every
    200 ms)."""
    deadline = time.monotonic() + 30
    while True:
        if spans.exists():
            try:
                recs, rep = import_traces(spans, corpus=docs)
            except InputError:  # a line being written as we read
                recs, rep = [], None
            if (rep is not None and rep.records >= n) or time.monotonic() > deadline:
                return recs, rep
        elif time.monotonic() > deadline:
            raise AssertionError(f"no spans in {spans}")
        time.sleep(0.2)


@pytest.mark.slow  # two processes load the synthetic run's embedder (~20 s on 2 busy cores)
def test_served_requests_become_records(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    p = in_process(list(SMALL), cache)
    spec = p.plan.configs[0]
    p.executor.value(spec.pool_node)
    spans = tmp_path / "spans.jsonl"
    answers: list[dict[str, Any]] = []
    queries = p.dataset.queries[:6]
    with (served([*SMALL, f"config={spec.config_id}", f"serve.traces={spans}"], cache) as srv,
          httpx.Client(base_url=srv.base_url, timeout=120) as c):
        for i, q in enumerate(queries):
            r = c.post("/v1/retrieve", json={
                "query": q.text + (" write to me at x@y.org" if i == 0 else ""), "k": 3,
                "tenant": "", "trace_attributes": {"user.id": f"u{i}", "bench.route": "faq",
                                                   "bench.feedback.thumbs": -1 if i == 1
                                                   else 1}})
            assert r.status_code == 200, r.text
            answers.append(r.json())
        recs, rep = _imported(spans, p.dataset.documents, len(queries))
        # shadow replay of production's queries through the same config: full agreement
        # (the record whose e-mail address was scrubbed asks another question than the one
        # production answered, so it is left out of the agreement check)
        rows = replay([r for r in recs if not r.pii_scrubbed], "same", srv.base_url)
        assert [r.status for r in rows] == ["ok"] * (len(queries) - 1)
        assert all(r.overlap == 1.0 and r.rbo == pytest.approx(1.0) for r in rows)
        assert all(r.latency_ms is not None and r.latency_ms > 0 for r in rows)
    assert rep.format == "otlp" and rep.records == len(queries)
    assert rep.partial == {"no_generation_span": len(queries)}  # retrieve-only requests
    assert rep.docs_unknown == 0 and rep.docs_resolved == 3 * len(queries)
    assert rep.fingerprint_mismatch == 0
    assert rep.trace_fingerprints == (corpus_fingerprint(p.dataset.documents),)
    by_user = {r.user: r for r in recs}
    for i, (q, body) in enumerate(zip(queries, answers, strict=True)):
        rec = by_user[f"u{i}"]
        assert rec.query == q.text + (" write to me at <EMAIL>" if i == 0 else "")
        assert [(d.doc_id, d.rank) for d in rec.documents] == [
            (h["doc_id"], h["rank"]) for h in body["hits"]]
        assert [d.score for d in rec.documents] == pytest.approx(
            [h["score"] for h in body["hits"]])
        assert rec.thumbs == (-1 if i == 1 else 1) and rec.route == "faq"
        stages = dict(rec.stage_ms)
        served_stages = {k: v for k, v in body["timings_ms"].items()
                         if k not in ("queue", "total")}
        for name, ms in served_stages.items():
            assert stages[name] == pytest.approx(ms, abs=0.01)
        assert rec.total_ms is not None and rec.total_ms >= sum(served_stages.values())


@pytest.mark.slow  # the packaged SmolLM2-135M answers on the CPU (~1-2 min with the load)
def test_served_answers_carry_a_generation_span(tmp_path: Path) -> None:
    over = [*SMALL, "generator=transformers_cpu", "generator.batch_size=1",
            "generation.max_queries=2", "generation.max_tokens=8", "context.top_k=2"]
    cache = tmp_path / "cache"
    p = in_process(over, cache)
    spec = next(c for c in p.plan.configs if c.kind == "generated")
    p.executor.value(spec.pool_node)
    p.comps.generator.close()
    spans = tmp_path / "spans.jsonl"
    q = p.dataset.queries[0]
    with (served([*over, f"config={spec.config_id}", f"serve.traces={spans}"], cache) as srv,
          httpx.Client(base_url=srv.base_url, timeout=300) as c):
        r = c.post("/v1/answer", json={"query": q.text, "stream": False, "k": 2})
        assert r.status_code == 200, r.text
        body = r.json()
    (rec,), rep = import_traces(spans, corpus=p.dataset.documents)
    assert rep.partial == {} and rep.docs_unknown == 0
    assert rec.answer == body["answer"] and rec.answer_span_id
    gen = body["generation"]
    assert (rec.input_tokens, rec.output_tokens) == (gen["prompt_tokens"],
                                                     gen["output_tokens"])
    assert rec.ttft_ms == pytest.approx(gen["ttft_ms"], abs=1e-6)
    assert rec.model and dict(rec.stage_ms)[f"chat {rec.model}"] == pytest.approx(
        gen["generate_ms"], abs=0.01)
