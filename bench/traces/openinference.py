"""OpenInference spans: Phoenix's span dataframe (``px.Client().get_spans_dataframe()``)
saved as Parquet or as JSON records / JSON lines (``df.to_json(orient="records",
lines=True)``), and OpenInference attributes on OTLP spans.

Dataframe columns read: ``context.trace_id``, ``context.span_id``, ``parent_id``, ``name``,
``start_time``, ``end_time`` and ``attributes.*`` (``attributes.retrieval.documents`` is a
list of ``{"document.id", "document.content", "document.score"}``; flattened
``attributes.retrieval.documents.N.document.id`` columns are read too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.errors import InputError
from bench.traces import conventions as C
from bench.traces.record import RetrievedDoc, SpanView

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FLAT_DOC = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content|score)$")


def kind_of(attrs: Mapping[str, Any]) -> str:
    k = str(attrs.get(C.OI_KIND, "")).upper()
    return {"RETRIEVER": "retrieval", "LLM": "generation"}.get(k, "other")


def documents(attrs: Mapping[str, Any]) -> tuple[RetrievedDoc, ...]:
    """Retrieved documents from nested (dataframe) or flattened (OTLP) attributes."""
    rows: dict[int, dict[str, Any]] = {}
    nested = attrs.get(C.OI_DOCS)
    if isinstance(nested, str):
        nested = json.loads(nested)
    if nested is not None and hasattr(nested, "__iter__") and not isinstance(nested, str):
        for i, d in enumerate(list(nested)):
            if not isinstance(d, Mapping):
                raise ValueError(f"{C.OI_DOCS}[{i}] is not an object")
            rows[i] = {k.removeprefix("document."): v for k, v in d.items()}
    for key, value in attrs.items():
        m = _FLAT_DOC.match(key)
        if m:
            rows.setdefault(int(m.group(1)), {})[m.group(2)] = value
    out = []
    for rank, i in enumerate(sorted(rows), start=1):
        d = rows[i]
        if d.get("id") is None:
            raise ValueError(f"retrieval.documents.{i} has no document.id")
        score = d.get("score")
        content = d.get("content")
        out.append(RetrievedDoc(str(d["id"]), rank,
                                None if score is None or score != score else float(score),
                                content if isinstance(content, str) else None))
    return tuple(out)


def metadata(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` (a JSON string or a mapping) merged with its flattened ``metadata.*``."""
    raw = attrs.get(C.OI_METADATA)
    out: dict[str, Any] = {}
    if isinstance(raw, str) and raw.strip():
        parsed = json.loads(raw)
        if isinstance(parsed, Mapping):
            out.update(parsed)
    elif isinstance(raw, Mapping):
        out.update(raw)
    for k, v in attrs.items():
        if k.startswith("metadata."):
            out[k.removeprefix("metadata.")] = v
    return out


def answer(attrs: Mapping[str, Any]) -> str | None:
    for key in ("llm.output_messages.0.message.content", C.OI_OUTPUT):
        v = attrs.get(key)
        if isinstance(v, str):
            return v
    return None


def _int(v: Any) -> int | None:
    return None if v is None or v != v else int(v)


def view(trace_id: str, span_id: str, parent_id: str, name: str, start_ns: int, end_ns: int,
         attrs: Mapping[str, Any], where: str) -> SpanView:
    kind = kind_of(attrs)
    meta = metadata(attrs)
    flat = {**attrs, **{f"bench.{k}": v for k, v in meta.items()}}
    ttft = meta.get("ttft_ms")
    return SpanView(
        trace_id=trace_id, span_id=span_id, parent_id=parent_id, name=name, kind=kind,
        start_ns=start_ns, end_ns=end_ns, attrs=flat, where=where,
        query=attrs.get(C.OI_INPUT) if kind == "retrieval" else None,
        documents=documents(attrs) if kind == "retrieval" else (),
        answer=answer(attrs) if kind == "generation" else None,
        model=attrs.get(C.OI_MODEL), input_tokens=_int(attrs.get(C.OI_PROMPT_TOKENS)),
        output_tokens=_int(attrs.get(C.OI_COMPLETION_TOKENS)),
        ttft_ms=None if ttft is None else float(ttft))


def to_ns(v: Any) -> int:
    """A dataframe timestamp: datetime / pandas Timestamp, ISO string, or epoch ms (pandas'
    ``to_json`` default)."""
    if v is None:
        return 0
    if isinstance(v, datetime):
        return iso_ns(v)
    if hasattr(v, "value") and hasattr(v, "tz"):  # pandas Timestamp without importing pandas
        return int(v.value)
    if isinstance(v, int):
        return v * 1_000_000
    if isinstance(v, float):
        return round(v * 1e3) * 1000
    return iso_ns(datetime.fromisoformat(str(v).replace("Z", "+00:00")))


def iso_ns(dt: datetime) -> int:
    """Unix ns of a datetime, exactly (float seconds lose the microseconds); naive = UTC."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(microseconds=1) * 1000


def _attrs_of(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k.startswith("attributes."):
            if v is None or (isinstance(v, float) and v != v):
                continue
            out[k.removeprefix("attributes.")] = v
    nested = row.get("attributes")
    if isinstance(nested, Mapping):  # a nested attributes column (older exports)
        out.update(nested)
    return out


def row_view(row: Mapping[str, Any], where: str) -> SpanView:
    try:
        ctx = row.get("context") if isinstance(row.get("context"), Mapping) else {}
        trace_id = row.get("context.trace_id") or ctx.get("trace_id")  # type: ignore[union-attr]
        span_id = row.get("context.span_id") or ctx.get("span_id")  # type: ignore[union-attr]
        if not trace_id or not span_id:
            raise ValueError("no context.trace_id / context.span_id")
        attrs = _attrs_of(row)
        if C.OI_KIND not in attrs and row.get("span_kind"):
            attrs[C.OI_KIND] = row["span_kind"]
        parent = row.get("parent_id")
        return view(str(trace_id), str(span_id), "" if parent in (None, "") or parent != parent
                    else str(parent), str(row.get("name", "")), to_ns(row.get("start_time")),
                    to_ns(row.get("end_time")), attrs, where)
    except (TypeError, ValueError, KeyError) as exc:
        path, _, line = where.rpartition(":")
        raise InputError(path, int(line) if line.isdigit() else 0,
                         f"malformed OpenInference span: {exc}") from None


def read_rows(path: str, rows: list[tuple[int, Mapping[str, Any]]]) -> Iterator[SpanView]:
    for line, row in rows:
        yield row_view(row, f"{path}:{line}")


def parquet_rows(path: str) -> list[tuple[int, Mapping[str, Any]]]:
    """Rows of a Phoenix span dataframe saved as Parquet (line = 1-based row number)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    if "context.span_id" not in table.column_names:
        raise InputError(path, 0, "not a trace export: a Parquet file without a "
                                  "context.span_id column (Phoenix's span dataframe has one)")
    return list(enumerate(table.to_pylist(), start=1))
