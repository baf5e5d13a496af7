"""Trace import: a trace export in any supported format -> one ``TraceRecord`` per request.

``detect`` names the format from the file (Parquet: Phoenix's span dataframe; JSON / JSON
lines: the keys of the first object: ``resourceSpans`` / ``resourceLogs`` -> OTLP,
``context.span_id`` / ``span_kind`` -> OpenInference, ``traceId`` + ``type`` + ``startTime``
-> Langfuse). A file in none of them, a retrieval span without a query and a malformed span
are ``InputError`` naming ``file:line`` before any record is written.

``import_traces`` groups spans by trace; a trace is one request: its first retrieval span
(the record's ``span_id``), the first generation span that starts after it, its root span
(total latency). Traces without a retrieval span are skipped and counted
(``no_retrieval_span``); records without a generation span, with a retrieval span that
returned nothing, or with more than one retrieval span are kept and counted in ``partial``.
Query and answer texts are scrubbed (``bench.traces.pii``) before the record exists.
Retrieved ids are resolved against ``corpus`` (golden corpus JSONL): counted per record; an
import where NO id resolves is refused as a whole; a corpus fingerprint that differs from
the one the traces name is said in the report.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.data.base import Document
from bench.data.base import corpus_fingerprint as base_corpus_fingerprint
from bench.data.jsonl import iter_jsonl, loads_strict, read_text, require_file
from bench.errors import InputError
from bench.traces import conventions as C
from bench.traces import langfuse, openinference, otlp
from bench.traces.pii import scrub
from bench.traces.record import SpanView, TraceRecord

FORMATS = ("otlp", "openinference", "langfuse")


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """The corpus part of a dataset fingerprint (what ``bench.serve`` puts on its spans)."""
    return base_corpus_fingerprint(tuple(documents))


@dataclass
class ImportReport:
    """What an import read and kept, by reason; ``to_json`` is ``import.json``."""

    path: str
    format: str
    spans: int = 0
    traces: int = 0
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    partial: Counter[str] = field(default_factory=Counter)
    docs_resolved: int = 0
    docs_unknown: int = 0
    records_with_unknown: int = 0
    fingerprint_mismatch: int = 0
    trace_fingerprints: tuple[str, ...] = ()
    corpus_fingerprint: str = ""
    pii_replacements: int = 0
    records_with_pii: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "spans": self.spans,
                "traces": self.traces, "records": self.records, "skipped": dict(self.skipped),
                "partial": dict(self.partial), "docs_resolved": self.docs_resolved,
                "docs_unknown": self.docs_unknown,
                "records_with_unknown": self.records_with_unknown,
                "fingerprint_mismatch": self.fingerprint_mismatch,
                "trace_fingerprints": list(self.trace_fingerprints),
                "corpus_fingerprint": self.corpus_fingerprint,
                "pii_replacements": self.pii_replacements,
                "records_with_pii": self.records_with_pii}

    def lines(self) -> list[str]:
        out = [f"{self.path}: {self.format}, {self.spans} spans, {self.traces} traces -> "
               f"{self.records} records"]
        if self.skipped:
            out.append("  skipped: " + ", ".join(f"{k} {v}" for k, v in
                                                 sorted(self.skipped.items())))
        if self.partial:
            out.append("  partial: " + ", ".join(f"{k} {v}" for k, v in
                                                 sorted(self.partial.items())))
        if self.corpus_fingerprint:
            out.append(f"  documents: {self.docs_resolved} resolved, {self.docs_unknown} "
                       f"unknown ({self.records_with_unknown} records name unknown ids)")
        if self.fingerprint_mismatch:
            out.append(f"  corpus fingerprint differs: {self.fingerprint_mismatch} records "
                       f"name {', '.join(f[:12] for f in self.trace_fingerprints)}, the "
                       f"corpus is {self.corpus_fingerprint[:12]}")
        out.append(f"  PII: {self.pii_replacements} spans scrubbed in "
                   f"{self.records_with_pii} records")
        return out


# -- reading ---------------------------------------------------------------------------------
def _json_rows(path: Path) -> list[tuple[int, Any]]:
    """(line, object) of a JSON-lines file, or of a JSON array / ``{"data": [...]}`` file
    (line = the 1-based item number then)."""
    text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = loads_strict(text)
        except ValueError as exc:
            raise InputError(path, 0, f"malformed JSON: {exc}") from None
        return list(enumerate(items, start=1))
    rows = list((w.line, obj) for w, obj in iter_jsonl(path))
    if len(rows) == 1 and isinstance(rows[0][1].get("data"), list):
        return list(enumerate(rows[0][1]["data"], start=1))
    return rows


def detect(path: str | Path) -> tuple[str, list[tuple[int, Any]]]:
    """The file's format and its rows (see the module docstring)."""
    p = require_file(path)
    if p.suffix == ".parquet":
        return "openinference", openinference.parquet_rows(str(p))
    rows = _json_rows(p)
    if not rows:
        raise InputError(p, 0, "no spans: the file is empty")
    line, first = rows[0]
    if not isinstance(first, Mapping):
        raise InputError(p, line, f"not a trace export: a {type(first).__name__}, not a "
                                  "JSON object")
    if "resourceSpans" in first or "resourceLogs" in first:
        return "otlp", rows
    if "context.span_id" in first or "span_kind" in first or isinstance(
            first.get("context"), Mapping):
        return "openinference", rows
    if "traceId" in first and "type" in first and "startTime" in first:
        return "langfuse", rows
    keys = ", ".join(sorted(first)[:6])
    raise InputError(p, line, f"not a trace export in any supported format ({', '.join(FORMATS)}"
                              f"): first object has keys {keys}")


def read_views(path: str | Path) -> tuple[str, list[SpanView]]:
    fmt, rows = detect(path)
    for line, row in rows:
        if not isinstance(row, Mapping):
            raise InputError(path, line, f"expected a JSON object, got {type(row).__name__}")
    if fmt == "otlp":
        views = list(otlp.read_spans(str(path), rows))
    elif fmt == "openinference":
        views = list(openinference.read_rows(str(path), rows))
    else:
        views = list(langfuse.read_observations(str(path), rows))
    return fmt, views


# -- assembling ------------------------------------------------------------------------------
def _lookup(views: Sequence[SpanView], key: str) -> Any:
    for v in views:
        if key in v.attrs and v.attrs[key] is not None:
            return v.attrs[key]
    return None


def _thumbs(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, bool):
        return 1 if v else -1
    if isinstance(v, int | float):
        return 1 if v > 0 else (-1 if v < 0 else 0)
    s = str(v).strip().lower()
    return {"up": 1, "down": -1, "+1": 1, "-1": -1, "1": 1, "positive": 1,
            "negative": -1}.get(s, 0)


def _tags(v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    items = v.split(",") if isinstance(v, str) else [str(x) for x in v]
    return tuple(sorted({t.strip() for t in items if t.strip()}))


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def assemble(views: Sequence[SpanView], fmt: str) -> tuple[TraceRecord | None, list[str]]:
    """One trace's spans -> its record (None when it has no retrieval span) and the reasons
    it is partial."""
    ordered = sorted(views, key=lambda v: (v.start_ns, v.span_id))
    retrievals = [v for v in ordered if v.kind == "retrieval"]
    if not retrievals:
        return None, ["no_retrieval_span"]
    ret = retrievals[0]
    if ret.query is None or not str(ret.query).strip():
        path, _, line = ret.where.rpartition(":")
        raise InputError(path, int(line) if line.isdigit() else 0,
                         f"retrieval span {ret.span_id} of trace {ret.trace_id} has no query "
                         f"attribute ({C.QUERY} or {C.OI_INPUT})")
    partial: list[str] = []
    if len(retrievals) > 1:
        partial.append("several_retrieval_spans")
    if not ret.documents:
        partial.append("no_documents")
    gens = [v for v in ordered if v.kind == "generation" and v.start_ns >= ret.start_ns]
    gen = gens[0] if gens else None
    if gen is None:
        partial.append("no_generation_span")
    ids = {v.span_id for v in ordered}
    roots = [v for v in ordered if not v.parent_id or v.parent_id not in ids]
    root = roots[0] if len(roots) == 1 else None
    if any(v.end_ns == 0 for v in ordered):
        partial.append("unfinished_span")
    if root is not None and root.end_ns:
        total: float | None = (root.end_ns - root.start_ns) / 1e6
    else:
        ends = [v.end_ns for v in ordered if v.end_ns]
        total = (max(ends) - ordered[0].start_ns) / 1e6 if ends else None
    stage: dict[str, float] = {}
    for v in ordered:
        if v is root or not v.end_ns:
            continue
        name = v.name or v.kind
        key, n = name, 2
        while key in stage:
            key, n = f"{name}#{n}", n + 1
        stage[key] = (v.end_ns - v.start_ns) / 1e6
    look = [ret, *([gen] if gen else []), *([root] if root else []), *ordered]
    query, n_q = scrub(str(ret.query))
    answer, n_a = (None, 0) if gen is None or gen.answer is None else scrub(gen.answer)
    return TraceRecord(
        trace_id=ret.trace_id, span_id=ret.span_id, source_format=fmt, source=ret.where,
        timestamp_ns=ordered[0].start_ns, query=query, documents=ret.documents,
        answer=answer, answer_span_id=gen.span_id if gen else "", stage_ms=tuple(stage.items()),
        total_ms=total, model=gen.model if gen else None,
        input_tokens=gen.input_tokens if gen else None,
        output_tokens=gen.output_tokens if gen else None,
        ttft_ms=gen.ttft_ms if gen else None,
        tenant=str(_lookup(look, C.TENANT) or ""),
        user=str(_lookup(look, C.USER) or _lookup(look, "bench.user_id") or ""),
        route=str(_lookup(look, C.ROUTE) or _lookup(look, "bench.route") or ""),
        thumbs=_thumbs(_lookup(look, C.THUMBS) if _lookup(look, C.THUMBS) is not None
                       else _lookup(look, "bench.thumbs")),
        regenerated=bool(_lookup(look, C.REGENERATED) or _lookup(look, "bench.regenerated")),
        confidence=_opt_float(_lookup(look, C.CONFIDENCE)),
        cost_usd=_opt_float(_lookup(look, C.COST_USD)),
        corpus_fingerprint=str(_lookup(look, C.CORPUS_FINGERPRINT) or ""),
        partial=tuple(partial), pii_scrubbed=n_q + n_a,
        filter_tags=_tags(_lookup(look, C.FILTER_TAGS))), partial


def _resolve(rec: TraceRecord, known: set[str]) -> TraceRecord:
    unknown = tuple(d.doc_id for d in rec.documents if d.doc_id not in known)
    return rec.with_(resolved=len(rec.documents) - len(unknown), unknown_ids=unknown)


def import_traces(path: str | Path, *, corpus: Sequence[Document] | None = None
                  ) -> tuple[list[TraceRecord], ImportReport]:
    """Records of one export file and the report of the import (see the module docstring)."""
    fmt, views = read_views(path)
    report = ImportReport(str(path), fmt, spans=len(views))
    by_trace: dict[str, list[SpanView]] = defaultdict(list)
    for v in views:
        by_trace[v.trace_id].append(v)
    report.traces = len(by_trace)
    records: list[TraceRecord] = []
    for trace_views in by_trace.values():
        rec, reasons = assemble(trace_views, fmt)
        if rec is None:
            report.skipped.update(reasons)
            continue
        report.partial.update(reasons)
        records.append(rec)
    if not records:
        raise InputError(path, 0, f"no request in {report.traces} traces has a retrieval "
                                  f"span ({C.OP}={C.OP_RETRIEVAL}, {C.OI_KIND}=RETRIEVER or a "
                                  "Langfuse RETRIEVER observation)")
    if corpus is not None:
        known = {d.doc_id for d in corpus}
        report.corpus_fingerprint = corpus_fingerprint(corpus)
        records = [_resolve(r, known) for r in records]
        report.docs_resolved = sum(r.resolved for r in records)
        report.docs_unknown = sum(len(r.unknown_ids) for r in records)
        report.records_with_unknown = sum(1 for r in records if r.unknown_ids)
        if report.docs_resolved == 0 and report.docs_unknown:
            sample = ", ".join(sorted({i for r in records for i in r.unknown_ids})[:3])
            raise InputError(path, 0, f"none of the {report.docs_unknown} retrieved document "
                                      f"ids resolves against the corpus (e.g. {sample}): "
                                      "traces of another corpus?")
        named = sorted({r.corpus_fingerprint for r in records if r.corpus_fingerprint})
        report.trace_fingerprints = tuple(named)
        report.fingerprint_mismatch = sum(
            1 for r in records
            if r.corpus_fingerprint and r.corpus_fingerprint != report.corpus_fingerprint)
    report.records = len(records)
    report.pii_replacements = sum(r.pii_scrubbed for r in records)
    report.records_with_pii = sum(1 for r in records if r.pii_scrubbed)
    records.sort(key=lambda r: (r.timestamp_ns, r.trace_id))
    return records, report


def read_records(path: str | Path) -> list[TraceRecord]:
    """Records written by ``python -m bench.traces import`` (records.jsonl)."""
    from bench.traces.record import record_from_json

    out = []
    for where, obj in iter_jsonl(path):
        try:
            out.append(record_from_json(obj))
        except (KeyError, TypeError, ValueError) as exc:
            raise where.error(f"not a bench trace record: {exc}") from None
    return out


def dumps(rec: TraceRecord) -> str:
    from bench.traces.record import record_to_json

    return json.dumps(record_to_json(rec), ensure_ascii=False, sort_keys=True)
