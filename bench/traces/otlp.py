"""OTLP JSON, as the OpenTelemetry collector's file exporter writes it: one
``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) or ``ExportLogsServiceRequest``
(``{"resourceLogs": [...]}``) per line. Ids are hex (the OTLP/JSON rule); base64 ids (protobuf's
generic JSON mapping) are accepted too. Attribute values are ``AnyValue`` objects
(``stringValue``, ``intValue`` as a decimal string, ``doubleValue``, ``boolValue``,
``arrayValue``, ``kvlistValue``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from typing import Any

from bench.errors import InputError
from bench.traces import conventions as C
from bench.traces.record import RetrievedDoc, SpanView


def any_value(v: Any) -> Any:
    """Python value of an OTLP ``AnyValue`` JSON object."""
    if not isinstance(v, Mapping):
        raise ValueError(f"attribute value is not an AnyValue object: {v!r}"[:120])
    if "stringValue" in v:
        return str(v["stringValue"])
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [any_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in v:
        return str(v["bytesValue"])
    return None  # an empty AnyValue is allowed by the protocol


def attributes(kvs: Any) -> dict[str, Any]:
    if not isinstance(kvs, list):
        raise ValueError("attributes is not a list of {key, value}")
    return {str(kv["key"]): any_value(kv.get("value", {})) for kv in kvs}


def norm_id(value: Any, n_bytes: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex; "" for none."""
    if not value:
        return ""
    s = str(value)
    if len(s) == 2 * n_bytes:
        try:
            int(s, 16)
            return s.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"id {s!r} is neither hex nor base64") from None
    if len(raw) != n_bytes:
        raise ValueError(f"id {s!r} is {len(raw)} bytes, expected {n_bytes}")
    return raw.hex()


def kind_of(attrs: Mapping[str, Any]) -> str:
    op = attrs.get(C.OP)
    if op == C.OP_RETRIEVAL:
        return "retrieval"
    if op in C.OP_GENERATION:
        return "generation"
    return "other"


def genai_documents(value: Any) -> tuple[RetrievedDoc, ...]:
    """``gen_ai.retrieval.documents``: a JSON string or a structured list of objects."""
    if value is None:
        return ()
    items = json.loads(value) if isinstance(value, str) else value
    if not isinstance(items, list):
        raise ValueError(f"{C.DOCUMENTS} is not a list")
    out = []
    for i, d in enumerate(items):
        if not isinstance(d, Mapping) or "id" not in d:
            raise ValueError(f"{C.DOCUMENTS}[{i}] has no id")
        score = d.get("score")
        out.append(RetrievedDoc(str(d["id"]), i + 1, None if score is None else float(score),
                                d.get("content") if isinstance(d.get("content"), str)
                                else None))
    return tuple(out)


def genai_answer(value: Any) -> str | None:
    """The text of ``gen_ai.output.messages`` (JSON string or structured): text parts of
    the first message, joined."""
    if value is None:
        return None
    msgs = json.loads(value) if isinstance(value, str) else value
    if not isinstance(msgs, list) or not msgs:
        return None
    first = msgs[0]
    parts = first.get("parts", []) if isinstance(first, Mapping) else []
    texts = [p.get("content", "") for p in parts
             if isinstance(p, Mapping) and p.get("type") == "text"]
    return "".join(str(t) for t in texts) if texts else None


def span_view(span: Mapping[str, Any], resource: Mapping[str, Any], where: str) -> SpanView:
    attrs = {**resource, **attributes(span.get("attributes", []))}
    if C.OI_KIND in attrs:  # OpenInference instrumentation exporting OTLP
        from bench.traces import openinference

        return openinference.view(
            norm_id(span["traceId"], 16), norm_id(span["spanId"], 8),
            norm_id(span.get("parentSpanId"), 8), str(span.get("name", "")),
            int(span["startTimeUnixNano"]), int(span.get("endTimeUnixNano") or 0), attrs,
            where)
    kind = kind_of(attrs)
    ttft = attrs.get(C.TTFT_S)
    return SpanView(
        trace_id=norm_id(span["traceId"], 16), span_id=norm_id(span["spanId"], 8),
        parent_id=norm_id(span.get("parentSpanId"), 8), name=str(span.get("name", "")),
        kind=kind, start_ns=int(span["startTimeUnixNano"]),
        end_ns=int(span.get("endTimeUnixNano") or 0), attrs=attrs, where=where,
        query=attrs.get(C.QUERY) if kind == "retrieval" else None,
        documents=genai_documents(attrs.get(C.DOCUMENTS)) if kind == "retrieval" else (),
        answer=genai_answer(attrs.get(C.OUTPUT_MESSAGES)) if kind == "generation" else None,
        model=attrs.get(C.RESPONSE_MODEL) or attrs.get(C.REQUEST_MODEL),
        input_tokens=attrs.get(C.INPUT_TOKENS), output_tokens=attrs.get(C.OUTPUT_TOKENS),
        ttft_ms=None if ttft is None else float(ttft) * 1e3,
    )


def read_spans(path: str, lines: list[tuple[int, Any]]) -> Iterator[SpanView]:
    """Every span of the OTLP JSON lines ``(line number, parsed object)``."""
    for line, obj in lines:
        if "resourceSpans" not in obj:
            continue  # logs / metrics lines of a shared file
        try:
            for rs in obj["resourceSpans"] or []:
                resource = attributes((rs.get("resource") or {}).get("attributes", []))
                for ss in rs.get("scopeSpans", []) or []:
                    for span in ss.get("spans", []) or []:
                        yield span_view(span, resource, f"{path}:{line}")
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputError(path, line, f"malformed OTLP span: {msg}") from None


def read_log_records(path: str, lines: list[tuple[int, Any]]
                     ) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file:line, record)`` for every OTLP log record, with ``traceId`` / ``spanId`` as
    hex, ``eventName`` and ``attributes`` decoded."""
    for line, obj in lines:
        if "resourceLogs" not in obj:
            continue
        try:
            for rl in obj["resourceLogs"] or []:
                for sl in rl.get("scopeLogs", []) or []:
                    for rec in sl.get("logRecords", []) or []:
                        yield f"{path}:{line}", {
                            "traceId": norm_id(rec.get("traceId"), 16),
                            "spanId": norm_id(rec.get("spanId"), 8),
                            "eventName": str(rec.get("eventName", "")),
                            "timeUnixNano": int(rec.get("timeUnixNano") or 0),
                            "attributes": attributes(rec.get("attributes", [])),
                        }
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(path, line, f"malformed OTLP log record: {exc}") from None
