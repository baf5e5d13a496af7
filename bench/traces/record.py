"""The typed record of one production request, as imported from a trace export.

Every reader (``otlp``, ``openinference``, ``langfuse``) turns its spans into ``SpanView`` s
(the few fields bench reads, named the same whatever the source) and ``assemble`` groups a
trace's views into one ``TraceRecord``. Records are stored as JSONL (``record_to_json`` /
``record_from_json``: read(write(x)) == x).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: Version of the stored record layout (records.jsonl rows carry it).
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RetrievedDoc:
    """One retrieved document as production saw it (rank is 1-based)."""

    doc_id: str
    rank: int
    score: float | None = None
    content: str | None = None


@dataclass(frozen=True)
class SpanView:
    """One span of any source, reduced to what a record needs.

    ``kind``: ``retrieval``, ``generation`` or ``other``; ``attrs``: the span's attributes
    flattened to dotted keys (values are str / int / float / bool / lists of them);
    ``where``: ``file:line`` of the span in its export (for error messages).
    """

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attrs: Mapping[str, Any]
    where: str
    query: str | None = None
    documents: tuple[RetrievedDoc, ...] = ()
    answer: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None


@dataclass(frozen=True)
class TraceRecord:
    """One request. ``span_id`` is the retrieval span (the one evaluations attach to);
    ``answer_span_id`` the generation span ("" without one). Latencies are milliseconds from
    span times: ``stage_ms`` one entry per non-root span (its name), ``total_ms`` the root
    span (or first start to last end when the root is missing). ``thumbs``: +1 / -1 / 0 (no
    feedback). ``resolved`` / ``unknown_ids``: the retrieved ids found / not found in the
    corpus the import resolved against."""

    trace_id: str
    span_id: str
    source_format: str
    source: str
    timestamp_ns: int
    query: str
    documents: tuple[RetrievedDoc, ...]
    answer: str | None = None
    answer_span_id: str = ""
    stage_ms: tuple[tuple[str, float], ...] = ()
    total_ms: float | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    tenant: str = ""
    user: str = ""
    route: str = ""
    thumbs: int = 0
    regenerated: bool = False
    confidence: float | None = None
    cost_usd: float | None = None
    corpus_fingerprint: str = ""
    resolved: int = 0
    unknown_ids: tuple[str, ...] = ()
    #: why the record is incomplete (e.g. ``no_generation_span``); empty when complete
    partial: tuple[str, ...] = field(default=())
    pii_scrubbed: int = 0
    #: the tags of the request's metadata filter (``bench.filter.tags``); () = no filter
    filter_tags: tuple[str, ...] = ()

    def with_(self, **changes: Any) -> TraceRecord:
        return replace(self, **changes)


def record_to_json(r: TraceRecord) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "trace_id": r.trace_id, "span_id": r.span_id,
        "source_format": r.source_format, "source": r.source, "timestamp_ns": r.timestamp_ns,
        "query": r.query,
        "documents": [{"doc_id": d.doc_id, "rank": d.rank, "score": d.score,
                       "content": d.content} for d in r.documents],
        "answer": r.answer, "answer_span_id": r.answer_span_id,
        "stage_ms": {k: v for k, v in r.stage_ms}, "total_ms": r.total_ms, "model": r.model,
        "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
        "ttft_ms": r.ttft_ms, "tenant": r.tenant, "user": r.user, "route": r.route,
        "thumbs": r.thumbs, "regenerated": r.regenerated, "confidence": r.confidence,
        "cost_usd": r.cost_usd, "corpus_fingerprint": r.corpus_fingerprint,
        "resolved": r.resolved, "unknown_ids": list(r.unknown_ids), "partial": list(r.partial),
        "pii_scrubbed": r.pii_scrubbed, "filter_tags": list(r.filter_tags),
    }


def record_from_json(obj: Mapping[str, Any]) -> TraceRecord:
    """The inverse of ``record_to_json`` (a KeyError / TypeError on a malformed row: callers
    name the file:line)."""
    if obj.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"schema_version {obj.get('schema_version')!r}, this bench reads "
                         f"{SCHEMA_VERSION}")
    return TraceRecord(
        trace_id=str(obj["trace_id"]), span_id=str(obj["span_id"]),
        source_format=str(obj["source_format"]), source=str(obj["source"]),
        timestamp_ns=int(obj["timestamp_ns"]), query=str(obj["query"]),
        documents=tuple(RetrievedDoc(str(d["doc_id"]), int(d["rank"]),
                                     None if d["score"] is None else float(d["score"]),
                                     d["content"]) for d in obj["documents"]),
        answer=obj["answer"], answer_span_id=str(obj["answer_span_id"]),
        stage_ms=tuple((str(k), float(v)) for k, v in obj["stage_ms"].items()),
        total_ms=obj["total_ms"], model=obj["model"], input_tokens=obj["input_tokens"],
        output_tokens=obj["output_tokens"], ttft_ms=obj["ttft_ms"], tenant=str(obj["tenant"]),
        user=str(obj["user"]), route=str(obj["route"]), thumbs=int(obj["thumbs"]),
        regenerated=bool(obj["regenerated"]), confidence=obj["confidence"],
        cost_usd=obj["cost_usd"], corpus_fingerprint=str(obj["corpus_fingerprint"]),
        resolved=int(obj["resolved"]), unknown_ids=tuple(obj["unknown_ids"]),
        partial=tuple(obj["partial"]), pii_scrubbed=int(obj["pii_scrubbed"]),
        filter_tags=tuple(str(t) for t in obj.get("filter_tags") or ()),  # absent before
    )
