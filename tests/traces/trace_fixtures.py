"""Trace exports for the tests, written by real exporters where one exists offline: OTLP JSON
by the OpenTelemetry SDK through ``bench.traces.otel`` (GenAI spans the way ``bench.serve``
emits them, and OpenInference-attributed spans through the same SDK), Phoenix's span
dataframe by pandas (Parquet / JSON lines with Phoenix's column names), Langfuse observations
as its export writes them (no Langfuse package runs offline)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.data.base import Document
from bench.traces.otel import GenAITracer, RequestSpans, SpanDoc

CORPUS = tuple(Document(f"d{i}", f"text of document {i}", title=f"doc {i}") for i in range(6))


def write_corpus(path: Path, docs: Sequence[Document] = CORPUS) -> Path:
    from bench.data.golden import document_to_json

    path.write_text("".join(json.dumps(document_to_json(d)) + "\n" for d in docs))
    return path


def otlp_file(path: Path, requests: Sequence[dict[str, Any]], *,
              fingerprint: str = "") -> list[tuple[str, str]]:
    """One answered request per dict (keys: query, docs [(id, score)], answer, tenant,
    attributes); returns (trace id, retrieval span id) per request."""
    res = {"service.name": "test"}
    if fingerprint:
        res["bench.corpus.fingerprint"] = fingerprint
    tracer = GenAITracer(path, resource=res, batch=False)
    ids = []
    t = time.time_ns()
    for i, r in enumerate(requests):
        start = t + i * 1_000_000_000
        answered = r.get("answer") is not None
        ids.append(tracer.record(RequestSpans(
            "/v1/answer" if answered else "/v1/retrieve", f"req{i}", start,
            start + 80_000_000, r["query"],
            tuple(SpanDoc(d, s, f"content of {d}") for d, s in r["docs"]),
            start + 1_000_000, (("embed", 4.0), ("search", 6.0)), top_k=len(r["docs"]),
            tenant=r.get("tenant", ""), attributes=r.get("attributes"),
            model="smollm2" if answered else None, answer=r.get("answer"),
            generate_start_ns=start + 20_000_000 if answered else None,
            generate_end_ns=start + 70_000_000 if answered else None,
            input_tokens=100 if answered else None, output_tokens=20 if answered else None,
            ttft_ms=12.5 if answered else None)))
    tracer.shutdown()
    return ids


def openinference_otlp_file(path: Path) -> None:
    """A RETRIEVER + LLM span pair with OpenInference attributes, through the real SDK."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from bench.traces.otel import OtlpJsonFileSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "oi"}))
    exporter = OtlpJsonFileSpanExporter(path)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("oi-test")
    with tracer.start_as_current_span("chain", attributes={
            "openinference.span.kind": "CHAIN", "metadata": json.dumps({"tenant": "acme"})}):
        with tracer.start_as_current_span("retrieve", attributes={
                "openinference.span.kind": "RETRIEVER", "input.value": "where is d1?",
                "retrieval.documents.0.document.id": "d1",
                "retrieval.documents.0.document.score": 0.8,
                "retrieval.documents.0.document.content": "text of document 1",
                "retrieval.documents.1.document.id": "d2",
                "retrieval.documents.1.document.score": 0.4}):
            time.sleep(0.001)
        with tracer.start_as_current_span("llm", attributes={
                "openinference.span.kind": "LLM", "llm.model_name": "gpt-x",
                "output.value": "d1 is here", "llm.token_count.prompt": 30,
                "llm.token_count.completion": 4}):
            pass
    provider.shutdown()
    _ = trace


def phoenix_frame(n: int = 3) -> Any:
    """Phoenix's span dataframe columns: one RETRIEVER and one LLM span per trace."""
    import pandas as pd

    rows = []
    t0 = pd.Timestamp("2026-11-30T10:00:00Z")
    for i in range(n):
        tid = f"{i:032x}"
        rows.append({"name": "retrieve", "span_kind": "RETRIEVER", "parent_id": None,
                     "start_time": t0 + pd.Timedelta(seconds=i),
                     "end_time": t0 + pd.Timedelta(seconds=i, milliseconds=20),
                     "context.trace_id": tid, "context.span_id": f"{2 * i + 1:016x}",
                     "attributes.openinference.span.kind": "RETRIEVER",
                     "attributes.input.value": f"question {i} from bob@example.com",
                     "attributes.retrieval.documents": [
                         {"document.id": f"d{i}", "document.score": 0.9,
                          "document.content": f"text of document {i}"},
                         {"document.id": "missing", "document.score": 0.1,
                          "document.content": "?"}],
                     "attributes.metadata": json.dumps({"tenant": "t1", "thumbs": -1
                                                        if i == 0 else 1}),
                     "attributes.llm.model_name": None, "attributes.output.value": None,
                     "attributes.llm.token_count.prompt": None,
                     "attributes.llm.token_count.completion": None})
        rows.append({"name": "llm", "span_kind": "LLM", "parent_id": None,
                     "start_time": t0 + pd.Timedelta(seconds=i, milliseconds=30),
                     "end_time": t0 + pd.Timedelta(seconds=i, milliseconds=90),
                     "context.trace_id": tid, "context.span_id": f"{2 * i + 2:016x}",
                     "attributes.openinference.span.kind": "LLM",
                     "attributes.input.value": None, "attributes.retrieval.documents": None,
                     "attributes.metadata": None, "attributes.llm.model_name": "gpt-x",
                     "attributes.output.value": f"answer {i}",
                     "attributes.llm.token_count.prompt": 50.0,
                     "attributes.llm.token_count.completion": 5.0})
    return pd.DataFrame(rows)


def langfuse_file(path: Path, n: int = 2) -> None:
    obs = []
    for i in range(n):
        tid = f"lf-trace-{i}"
        obs.append({"id": f"r{i}", "traceId": tid, "type": "RETRIEVER", "name": "retriever",
                    "startTime": f"2026-11-30T10:00:0{i}.000Z",
                    "endTime": f"2026-11-30T10:00:0{i}.030Z", "parentObservationId": None,
                    "input": {"query": f"lookup {i}, call +44 20 7946 0958"},
                    "output": [{"id": f"d{i}", "score": 0.7, "content": "c"},
                               {"id": f"d{i + 1}", "score": 0.6}],
                    "metadata": {"tenant": "t2", "route": "faq", "regenerated": i == 1},
                    "model": None, "usage": None})
        obs.append({"id": f"g{i}", "traceId": tid, "type": "GENERATION", "name": "answer",
                    "startTime": f"2026-11-30T10:00:0{i}.040Z",
                    "endTime": f"2026-11-30T10:00:0{i}.240Z",
                    "completionStartTime": f"2026-11-30T10:00:0{i}.090Z",
                    "parentObservationId": None, "input": [], "output": {
                        "role": "assistant", "content": f"answer {i}"},
                    "metadata": {}, "model": "claude-x",
                    "usageDetails": {"input": 70, "output": 9}, "calculatedTotalCost": 0.0004})
    path.write_text(json.dumps(obs))
