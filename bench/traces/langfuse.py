"""Langfuse observation exports: a JSON array, JSON lines or an API page (``{"data": [...]}``)
of observations: ``id``, ``traceId``, ``type`` (``RETRIEVER`` / ``GENERATION`` / ``SPAN``
...), ``name``, ``startTime``, ``endTime``, ``completionStartTime``, ``parentObservationId``,
``model``, ``input``, ``output``, ``metadata``, ``usage`` / ``usageDetails``.

A retriever observation is ``type: RETRIEVER`` (or a span named ``retrieval`` /
``retriever``); its ``input`` is the query text (or ``{"query": ...}``) and its ``output`` the
documents (a list, or ``{"documents": [...]}``, each with ``id`` / ``doc_id``, ``score`` and
``content`` / ``text`` / ``page_content``). TTFT is ``completionStartTime - startTime``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from bench.errors import InputError
from bench.traces.openinference import iso_ns
from bench.traces.record import RetrievedDoc, SpanView

_RETRIEVER_NAMES = ("retrieval", "retriever", "retrieve")


def _ns(v: Any) -> int:
    if v is None:
        return 0
    return iso_ns(datetime.fromisoformat(str(v).replace("Z", "+00:00")))


def _kind(obs: Mapping[str, Any]) -> str:
    t = str(obs.get("type", "")).upper()
    if t == "RETRIEVER" or (t == "SPAN" and str(obs.get("name", "")).lower()
                            in _RETRIEVER_NAMES):
        return "retrieval"
    return "generation" if t == "GENERATION" else "other"


def _query(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for k in ("query", "input", "question"):
            if isinstance(value.get(k), str):
                return str(value[k])
    return None


def _documents(value: Any) -> tuple[RetrievedDoc, ...]:
    items = value.get("documents") if isinstance(value, Mapping) else value
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ValueError("retriever output is not a list of documents")
    out = []
    for i, d in enumerate(items):
        if not isinstance(d, Mapping):
            raise ValueError(f"output[{i}] is not an object")
        meta = d.get("metadata") if isinstance(d.get("metadata"), Mapping) else {}
        doc_id = d.get("id", d.get("doc_id", meta.get("id", meta.get("doc_id"))))  # type: ignore[union-attr]
        if doc_id is None:
            raise ValueError(f"output[{i}] has no id / doc_id")
        score = d.get("score")
        content = d.get("content", d.get("text", d.get("page_content")))
        out.append(RetrievedDoc(str(doc_id), i + 1, None if score is None else float(score),
                                content if isinstance(content, str) else None))
    return tuple(out)


def _answer(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _tokens(obs: Mapping[str, Any], *keys: str) -> int | None:
    for field in ("usageDetails", "usage"):
        u = obs.get(field)
        if isinstance(u, Mapping):
            for k in keys:
                if u.get(k) is not None:
                    return int(u[k])
    return None


def observation_view(obs: Mapping[str, Any], where: str) -> SpanView:
    kind = _kind(obs)
    meta = obs.get("metadata") if isinstance(obs.get("metadata"), Mapping) else {}
    start, end = _ns(obs["startTime"]), _ns(obs.get("endTime"))
    first = obs.get("completionStartTime")
    cost = obs.get("calculatedTotalCost", obs.get("totalCost"))
    attrs = {f"bench.{k}": v for k, v in meta.items()}  # type: ignore[union-attr]
    if cost is not None:
        attrs.setdefault("bench.cost_usd", cost)
    return SpanView(
        trace_id=str(obs["traceId"]), span_id=str(obs["id"]),
        parent_id=str(obs.get("parentObservationId") or ""), name=str(obs.get("name") or ""),
        kind=kind, start_ns=start, end_ns=end, attrs=attrs, where=where,
        query=_query(obs.get("input")) if kind == "retrieval" else None,
        documents=_documents(obs.get("output")) if kind == "retrieval" else (),
        answer=_answer(obs.get("output")) if kind == "generation" else None,
        model=obs.get("model"),
        input_tokens=_tokens(obs, "input", "promptTokens", "input_tokens"),
        output_tokens=_tokens(obs, "output", "completionTokens", "output_tokens"),
        ttft_ms=(_ns(first) - start) / 1e6 if first else None)


def read_observations(path: str, rows: list[tuple[int, Mapping[str, Any]]]
                      ) -> Iterator[SpanView]:
    for line, obs in rows:
        try:
            yield observation_view(obs, f"{path}:{line}")
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputError(path, line, f"malformed Langfuse observation: {msg}") from None
