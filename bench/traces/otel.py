"""OpenTelemetry GenAI spans of ``bench.serve`` requests, written as OTLP JSON lines.

The spans are made by the real ``opentelemetry-sdk`` (a ``TracerProvider`` with a batch
processor); the exporter encodes each batch with ``opentelemetry-exporter-otlp-proto-common``'s
``encode_spans`` (the protobuf ``ExportTraceServiceRequest`` the OTLP exporters send) and writes
it with protobuf's ``json_format``, ids as hex (the OTLP/JSON rule the collector's file
exporter follows; protobuf's generic mapping would write base64). One line per batch, so a
collector ``file`` receiver, ``bench.traces import`` and ``otlp.read_spans`` read it.

A request is a root span (``POST /v1/answer``, kind SERVER) with a ``retrieval`` child
(GenAI retrieval attributes; one grandchild per latency stage of the chain, laid out from
the stage milliseconds) and, for answers, a ``chat {model}`` child (GenAI inference
attributes, TTFT, tokens). Spans are built after the work, with explicit start / end times,
so tracing adds nothing to the measured stages.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import MissingDependencyError
from bench.traces import conventions as C

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter as _ExporterBase
else:
    try:  # the SDK is the `traces` extra: without it, GenAITracer says which extra
        from opentelemetry.sdk.trace.export import SpanExporter as _ExporterBase
    except ImportError:
        _ExporterBase = object


def _require() -> None:
    try:
        import opentelemetry.exporter.otlp.proto.common
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "opentelemetry-sdk", "traces",
                                     "serve.traces (OpenTelemetry spans)") from None


def hex_ids(node: Any) -> Any:
    """protobuf JSON (base64 bytes ids) -> OTLP/JSON (hex ids), recursively."""
    import base64

    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in _ID_FIELDS and isinstance(v, str):
                out[k] = base64.b64decode(v).hex() if v else ""
            else:
                out[k] = hex_ids(v)
        return out
    if isinstance(node, list):
        return [hex_ids(x) for x in node]
    return node


def message_line(message: Any) -> str:
    """One OTLP JSON line of a protobuf export request."""
    from google.protobuf import json_format

    return json.dumps(hex_ids(json_format.MessageToDict(message)), separators=(",", ":"))


class OtlpJsonFileSpanExporter(_ExporterBase):
    """A ``SpanExporter`` appending one OTLP JSON line per exported batch to ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh = self.path.open("a", encoding="utf-8")

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        if not spans:
            return SpanExportResult.SUCCESS
        line = message_line(encode_spans(spans))
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass(frozen=True)
class SpanDoc:
    doc_id: str
    score: float
    content: str | None = None


@dataclass(frozen=True)
class RequestSpans:
    """What one served request did, for ``GenAITracer.record`` (times in unix ns)."""

    endpoint: str
    request_id: str
    start_ns: int
    end_ns: int
    query: str
    documents: tuple[SpanDoc, ...]
    retrieval_start_ns: int
    stage_ms: tuple[tuple[str, float], ...]
    top_k: int | None = None
    tenant: str = ""
    attributes: Mapping[str, Any] | None = None
    model: str | None = None
    answer: str | None = None
    generate_start_ns: int | None = None
    generate_end_ns: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    error: str | None = None


class GenAITracer:
    """The tracer of one ``bench.serve`` process; ``record`` emits one request's spans."""

    def __init__(self, path: str | Path, *, resource: Mapping[str, Any],
                 capture_content: bool = True, batch: bool = True) -> None:
        _require()
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        self.path = Path(path)
        self.capture_content = capture_content
        self.exporter = OtlpJsonFileSpanExporter(path)
        self.provider = TracerProvider(resource=Resource.create(dict(resource)))
        proc = (BatchSpanProcessor(self.exporter, schedule_delay_millis=200) if batch
                else SimpleSpanProcessor(self.exporter))
        self.provider.add_span_processor(proc)
        self.tracer = self.provider.get_tracer("bench.serve")

    def record(self, r: RequestSpans) -> tuple[str, str]:
        """Emit the request's spans; returns (trace id, retrieval span id) as hex."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        extra = dict(r.attributes or {})
        root = self.tracer.start_span(f"POST {r.endpoint}", kind=SpanKind.SERVER,
                                      start_time=r.start_ns,
                                      attributes={"http.request.method": "POST",
                                                  "http.route": r.endpoint,
                                                  "bench.request_id": r.request_id,
                                                  **({C.TENANT: r.tenant} if r.tenant else {}),
                                                  **extra})
        ctx = trace.set_span_in_context(root)
        ret_attrs: dict[str, Any] = {C.OP: C.OP_RETRIEVAL}
        if r.top_k is not None:
            ret_attrs[C.TOP_K] = r.top_k
        if self.capture_content:
            ret_attrs[C.QUERY] = r.query
            ret_attrs[C.DOCUMENTS] = json.dumps(
                [{"id": d.doc_id, "score": d.score,
                  **({"content": d.content} if d.content is not None else {})}
                 for d in r.documents])
        ret_ms = sum(ms for _, ms in r.stage_ms)
        ret_end = r.retrieval_start_ns + int(ret_ms * 1e6)
        ret = self.tracer.start_span(C.OP_RETRIEVAL, context=ctx, kind=SpanKind.INTERNAL,
                                     start_time=r.retrieval_start_ns, attributes=ret_attrs)
        rctx = trace.set_span_in_context(ret)
        t = r.retrieval_start_ns
        for name, ms in r.stage_ms:
            stage = self.tracer.start_span(name, context=rctx, start_time=t,
                                           attributes={"bench.stage": name})
            t += int(ms * 1e6)
            stage.end(end_time=t)
        ret.end(end_time=ret_end)
        if r.generate_start_ns is not None and r.generate_end_ns is not None:
            gen_attrs: dict[str, Any] = {C.OP: "chat", C.PROVIDER: "bench"}
            if r.model:
                gen_attrs[C.REQUEST_MODEL] = r.model
            if r.input_tokens is not None:
                gen_attrs[C.INPUT_TOKENS] = r.input_tokens
            if r.output_tokens is not None:
                gen_attrs[C.OUTPUT_TOKENS] = r.output_tokens
            if r.ttft_ms is not None:
                gen_attrs[C.TTFT_S] = r.ttft_ms / 1e3
            if self.capture_content and r.answer is not None:
                gen_attrs[C.OUTPUT_MESSAGES] = json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": r.answer}],
                      "finish_reason": "stop"}])
            gen = self.tracer.start_span(f"chat {r.model or ''}".strip(), context=ctx,
                                         kind=SpanKind.CLIENT, start_time=r.generate_start_ns,
                                         attributes=gen_attrs)
            gen.end(end_time=r.generate_end_ns)
        if r.error:
            root.set_status(Status(StatusCode.ERROR, r.error))
        root.end(end_time=r.end_ns)
        sc = ret.get_span_context()
        return format(sc.trace_id, "032x"), format(sc.span_id, "016x")

    def flush(self) -> None:
        self.provider.force_flush()

    def shutdown(self) -> None:
        self.provider.shutdown()
