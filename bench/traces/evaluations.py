"""Scores back to the user's observability stack: ``gen_ai.evaluation.result`` events.

An evaluation event (GenAI semantic conventions) is an OTLP log record with
``event_name = gen_ai.evaluation.result``, the trace id and span id of the evaluated span (so
backends show it on that span), and ``gen_ai.evaluation.name``,
``gen_ai.evaluation.score.value`` and / or ``gen_ai.evaluation.score.label``, optionally
``gen_ai.evaluation.explanation``. ``write_events`` builds the ``ExportLogsServiceRequest``
with opentelemetry-proto's classes and writes it as one OTLP JSON line (hex ids, the
collector file exporter's form); ``read_events`` reads such a file back (or the collector's
own output). Input scores: JSONL rows ``{"trace_id", "span_id", "name", "value" and/or
"label", "explanation"?}``, e.g. from a judge run over imported records.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.data.jsonl import iter_jsonl
from bench.errors import InputError
from bench.traces import conventions as C
from bench.traces.export import Delivery, Endpoint, open_client, post


@dataclass(frozen=True)
class Evaluation:
    trace_id: str
    span_id: str
    name: str
    value: float | None = None
    label: str | None = None
    explanation: str | None = None
    time_ns: int = 0


def _hex(value: object, n_bytes: int, key: str, where: Any) -> str:
    s = str(value or "")
    try:
        ok = len(s) == 2 * n_bytes and int(s, 16) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise where.error(f"field '{key}' must be {2 * n_bytes} hex digits, got {s!r}")
    return s.lower()


def read_scores(path: str | Path) -> list[Evaluation]:
    out = []
    for where, obj in iter_jsonl(path):
        extra = set(obj) - {"trace_id", "span_id", "name", "value", "label", "explanation"}
        if extra:
            raise where.error(f"unknown field(s) {sorted(extra)}")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise where.error("field 'name' (the metric) is required")
        value, label = obj.get("value"), obj.get("label")
        if value is None and label is None:
            raise where.error("give 'value' and/or 'label' (the conventions need one)")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not math.isfinite(value)):
            raise where.error(f"field 'value' must be a finite number, got {value!r}")
        out.append(Evaluation(_hex(obj.get("trace_id"), 16, "trace_id", where),
                              _hex(obj.get("span_id"), 8, "span_id", where), name,
                              None if value is None else float(value),
                              None if label is None else str(label),
                              obj.get("explanation")))
    return out


def _kv(key: str, value: Any) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    if isinstance(value, bool):
        v = AnyValue(bool_value=value)
    elif isinstance(value, int):
        v = AnyValue(int_value=value)
    elif isinstance(value, float):
        v = AnyValue(double_value=value)
    else:
        v = AnyValue(string_value=str(value))
    return KeyValue(key=key, value=v)


def events_request(evals: Sequence[Evaluation], *, resource: Mapping[str, Any]) -> Any:
    """The ``ExportLogsServiceRequest`` of the evaluations."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    now = time.time_ns()
    records = []
    for e in evals:
        attrs = [_kv(C.EVAL_NAME, e.name)]
        if e.value is not None:
            attrs.append(_kv(C.EVAL_SCORE, float(e.value)))
        if e.label is not None:
            attrs.append(_kv(C.EVAL_LABEL, e.label))
        if e.explanation:
            attrs.append(_kv(C.EVAL_EXPLANATION, e.explanation))
        t = e.time_ns or now
        records.append(LogRecord(time_unix_nano=t, observed_time_unix_nano=t,
                                 event_name=C.EVAL_EVENT, trace_id=bytes.fromhex(e.trace_id),
                                 span_id=bytes.fromhex(e.span_id), attributes=attrs))
    return ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource=Resource(attributes=[_kv(k, v) for k, v in resource.items()]),
        scope_logs=[ScopeLogs(scope=InstrumentationScope(name="bench.traces"),
                              log_records=records)])])


def write_events(evals: Sequence[Evaluation], path: str | Path, *,
                 resource: Mapping[str, Any] | None = None) -> int:
    """Append the evaluations to ``path`` as one OTLP JSON line; returns how many."""
    from bench.traces.otel import message_line

    if not evals:
        return 0
    line = message_line(events_request(evals, resource=resource or {
        "service.name": "bench.traces"}))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    return len(evals)


def read_events(path: str | Path) -> list[Evaluation]:
    """Every ``gen_ai.evaluation.result`` event of an OTLP JSON logs file."""
    from bench.data.jsonl import iter_jsonl as rows
    from bench.traces.otlp import read_log_records

    lines = [(w.line, obj) for w, obj in rows(path)]
    out = []
    for where, rec in read_log_records(str(path), lines):
        if rec["eventName"] != C.EVAL_EVENT:
            continue
        a = rec["attributes"]
        if C.EVAL_NAME not in a:
            p, _, line = where.rpartition(":")
            raise InputError(p, int(line), f"{C.EVAL_EVENT} event without {C.EVAL_NAME}")
        out.append(Evaluation(rec["traceId"], rec["spanId"], str(a[C.EVAL_NAME]),
                              None if a.get(C.EVAL_SCORE) is None else float(a[C.EVAL_SCORE]),
                              a.get(C.EVAL_LABEL), a.get(C.EVAL_EXPLANATION),
                              rec["timeUnixNano"]))
    return out


def send_evaluations(evals: Sequence[Any], ep: Endpoint, *,
                     resource: dict[str, Any] | None = None) -> list[tuple[Any, Delivery]]:
    """Each evaluation with the delivery of the request that carried it (``ep.batch`` per
    request, in order)."""
    out: list[tuple[Any, Delivery]] = []
    with open_client(ep) as client:
        for i in range(0, len(evals), ep.batch):
            chunk = list(evals[i:i + ep.batch])
            msg = events_request(chunk, resource=resource or {"service.name": "bench.traces"})
            d = post(client, ep, "logs", msg, len(chunk))
            out += [(e, d) for e in chunk]
    return out


def _endpoint(a: argparse.Namespace, signals: Sequence[str] = ("logs",)) -> Any:
    """The checked, reachable endpoint of the CLI flags (each signal probed with an empty
    request), or None without ``--endpoint``."""
    if getattr(a, "endpoint", None) is None:
        return None
    from bench.traces.export import check_reachable, parse_headers, probe

    ep = Endpoint(a.endpoint, parse_headers(a.header or []), a.timeout_s, a.batch).check()
    check_reachable(ep)
    for signal in signals:
        probe(ep, signal)
    return ep


def _deliver(evals: Sequence[Evaluation], ep: Any, kept: str | Path,
             report: Path | None) -> int:
    """Send; one status per event (to ``report`` as JSONL); 0 all sent, 3 some not."""
    from collections import Counter

    from bench.data.jsonl import write_jsonl
    sent = send_evaluations(evals, ep)
    by = Counter(d.status for _, d in sent)
    if report is not None:
        write_jsonl(report, ({"trace_id": e.trace_id, "span_id": e.span_id, "name": e.name,
                              "status": d.status, "detail": d.detail} for e, d in sent))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
    print(f"{ep.url_for('logs')}: {len(sent)} events: {counts}")
    failed = [d for _, d in sent if d.status != "sent"]
    if failed:
        print(f"bench.traces: {len(failed)} of {len(sent)} events not delivered "
              f"({failed[0].status}: {failed[0].detail}); they are kept in {kept}, send it "
              "again with `python -m bench.traces send`", file=sys.stderr)
        return 3
    return 0


def cli(a: argparse.Namespace) -> int:
    if a.command == "writeback":
        evals = read_scores(a.scores)
        ep = _endpoint(a)  # refused before anything is written
        n = write_events(evals, a.out)
        print(f"{a.out}: {n} {C.EVAL_EVENT} events")
        return 0 if ep is None else _deliver(evals, ep, a.out, a.delivery)
    if a.command == "send":
        return _send(a)
    evs = read_events(a.events)
    for e in evs:
        score = "" if e.value is None else f" {e.value:.4f}"
        label = "" if e.label is None else f" [{e.label}]"
        print(f"{e.trace_id} {e.span_id} {e.name}{score}{label}")
    print(f"{a.events}: {len(evs)} {C.EVAL_EVENT} events")
    return 0


def _send(a: argparse.Namespace) -> int:
    """An OTLP JSON file's evaluation events and spans to the endpoint."""
    from bench.traces.export import send_spans, trace_requests

    evals = read_events(a.file)
    n_span_lines = len(trace_requests(a.file))  # malformed lines refused before sending
    if not evals and not n_span_lines:
        raise InputError(a.file, 0, "no evaluation events and no spans to send")
    ep = _endpoint(a, [s for s, n in (("logs", len(evals)), ("traces", n_span_lines)) if n])
    rc = _deliver(evals, ep, a.file, a.delivery) if evals else 0
    if n_span_lines:
        lines = send_spans(a.file, ep)
        bad = [(line, d) for line, d in lines if d.status != "sent"]
        n = sum(d.items for _, d in lines)
        print(f"{ep.url_for('traces')}: {n} spans in {len(lines)} requests, "
              f"{sum(d.items for _, d in bad)} not delivered")
        for line, d in bad:
            print(f"bench.traces: {a.file}:{line}: {d.items} spans {d.status}: {d.detail}",
                  file=sys.stderr)
        rc = rc or (3 if bad else 0)
    return rc
