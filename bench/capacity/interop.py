"""Per-request logs other load tools read and write: AIPerf's ``profile_export.jsonl``.

``write_aiperf(run, path, start_epoch_s)`` writes one level's requests as AIPerf per-request
records (one JSON object a line: ``metadata`` with ``session_num``, ``x_request_id``,
``conversation_id``, ``turn_index``, ``request_start_ns`` / ``request_end_ns`` (epoch ns),
``worker_id``, ``benchmark_phase``, ``was_cancelled``; ``metrics`` as ``{"value", "unit"}``:
``request_latency``, ``time_to_first_token``, ``inter_chunk_latency``, ``inter_token_latency``,
``output_sequence_length``; ``error`` ``{code, type, message}`` for a request that did not
come back ok, its metrics then null). AIPerf's models accept extra fields, so each record
also carries ``bench``: the intended send (``intended_start_ns``), the E2EL from it, the
status, attempts, and whether the query was seen before.

``import_aiperf(path)`` reads such a file (AIPerf's own or ours) back into one level of
:class:`bench.capacity.metrics.LevelMetrics`, recomputed from the request log with bench's
definitions, so a user's AIPerf numbers and bench's sit in one table
(:func:`bench.capacity.metrics.table`). The differences, stated: AIPerf's ``request_latency``
and TTFT count from its actual send (``request_start_ns``), bench's from the intended send.
``origin`` says where the imported latency counts from: ``"auto"`` (bench's
``bench.intended_start_ns`` where the record has it, else the actual send:
``latency_origin: "send"``), ``"send"`` (always the actual send: AIPerf's own definition) or
``"credit"`` (``metadata.credit_issued_ns``: when AIPerf's schedule issued the request, before
its worker sent it — the origin of AIPerf's coordinated-omission-aware
``effective_latency``, and the nearest thing AIPerf records to bench's intended send). A
request ends at ``request_end_ns`` (the end of the stream, as bench's own requests end, and as
AIPerf's ``effective_latency`` ends); AIPerf's ``request_latency`` ends at its last content
chunk, before the stream's closing event, so bench's E2EL of the same request is that much
longer (its TPOT likewise). AIPerf's
``inter_token_latency`` is (latency - TTFT) / (output tokens - 1), the same as vLLM's TPOT;
``output_sequence_length`` is counted in tokens by AIPerf's tokenizer, in content chunks by
bench (one token per chunk for vLLM-style streams).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.capacity.driver import LevelRun, RequestRecord, Status
from bench.capacity.metrics import LevelMetrics, summarize
from bench.capacity.schedule import Schedule
from bench.errors import InputError
from bench.results.write import atomic_write_bytes

_NS = 1_000_000_000


def _mv(value: Any, unit: str) -> dict[str, Any]:
    return {"value": value, "unit": unit}


def aiperf_records(run: LevelRun, start_epoch_s: float,
                   query_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The level's requests as AIPerf per-request records (see the module docstring)."""
    seen = run.schedule.seen
    out = []

    def ns(t: float) -> int:
        return round((start_epoch_s + t) * _NS)

    for r in run.records:
        meta = {"session_num": r.index, "x_request_id": f"bench-{r.index}",
                "x_correlation_id": f"bench-{r.index}",
                "conversation_id": query_ids[r.query] if query_ids else str(r.query),
                "turn_index": 0, "request_start_ns": ns(r.sent_s),
                "request_ack_ns": None if r.first_token_s is None else ns(r.first_token_s),
                "request_end_ns": ns(r.end_s), "worker_id": f"bench_replica_{r.replica}",
                "record_processor_id": "bench", "benchmark_phase": "profiling",
                "was_cancelled": False, "cancellation_time_ns": None}
        metrics: dict[str, Any] | None = None
        error = None
        if r.status == "ok":
            latency = (r.end_s - r.sent_s) * 1000.0
            metrics = {"request_latency": _mv(latency, "ms"),
                       "output_sequence_length": _mv(r.output_tokens, "tokens")}
            if r.first_token_s is not None:
                ttft = (r.first_token_s - r.sent_s) * 1000.0
                metrics["time_to_first_token"] = _mv(ttft, "ms")
                metrics["inter_chunk_latency"] = _mv(list(r.itl_ms), "ms")
                if r.output_tokens >= 2:
                    metrics["inter_token_latency"] = _mv(
                        (latency - ttft) / (r.output_tokens - 1), "ms")
        else:
            error = {"code": None, "type": r.status, "message": r.error}
        out.append({"metadata": meta, "metrics": metrics, "error": error, "bench": {
            "intended_start_ns": ns(r.intended_s), "e2el_ms": r.e2el_ms, "status": r.status,
            "attempts": r.attempts, "query": r.query,
            "seen": bool(seen[r.index]) if seen is not None and r.index < len(seen)
            else False}})
    return out


def write_aiperf(run: LevelRun, path: Path, start_epoch_s: float,
                 query_ids: list[str] | None = None) -> Path:
    lines = [json.dumps(r) for r in aiperf_records(run, start_epoch_s, query_ids)]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())
    return path


_ERRORS: dict[str, Status] = {"timeout": "timeout", "rate_limited": "rate_limited",
                              "invalid": "invalid"}


ORIGINS = ("auto", "send", "credit")


def import_aiperf(path: Path, *, slo_ms: dict[str, float] | None = None,
                  label: str | None = None, origin: str = "auto") -> LevelMetrics:
    """An AIPerf ``profile_export.jsonl`` as one level, recomputed with bench's definitions;
    ``origin``: where latency counts from (see the module docstring). A line that is not a
    record (or, with ``origin="credit"``, has no ``credit_issued_ns``) is an InputError
    naming file:line."""
    if origin not in ORIGINS:
        raise ValueError(f"origin {origin!r}: one of {', '.join(ORIGINS)}")
    rows: list[tuple[int, float, float, float, Status, float | None, tuple[float, ...], int,
                     int, bool, str]] = []
    intended_seen = False
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(str(path), 0, f"unreadable: {exc}") from None
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            meta = d["metadata"]
            start = int(meta["request_start_ns"]) / _NS
            end = int(meta["request_end_ns"]) / _NS
            b = d.get("bench") or {}
            if origin == "credit":
                intended = int(meta["credit_issued_ns"]) / _NS
            elif origin == "auto" and "intended_start_ns" in b:
                intended = int(b["intended_start_ns"]) / _NS
                intended_seen = True
            else:
                intended = start
            m = d.get("metrics") or {}
            err = d.get("error")
            status: Status = "ok" if err is None else _ERRORS.get(
                str(b.get("status") or err.get("type", "")).lower(), "failed")
            ttft = m.get("time_to_first_token", {}).get("value")
            itl = tuple(float(v) for v in m.get("inter_chunk_latency", {}).get("value") or ())
            osl = int(m.get("output_sequence_length", {}).get("value") or 0)
            q = int(b.get("query", meta.get("session_num", no - 1)))
            rows.append((int(meta.get("session_num", no - 1)), intended, start, end, status,
                         None if ttft is None else start + float(ttft) / 1000.0, itl, osl, q,
                         bool(b.get("seen", False)), "" if err is None else
                         str(err.get("message", ""))))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(str(path), no, f"not an AIPerf per-request record: {exc}"
                             ) from None
    if not rows:
        raise InputError(str(path), 0, "no records")
    rows.sort(key=lambda r: (r[1], r[0]))
    t0 = rows[0][1]
    recs = tuple(RequestRecord(i, q, it - t0, st - t0, en - t0, status, 1,
                               None if ft is None else ft - t0, itl, osl, None, err)
                 for i, (_, it, st, en, status, ft, itl, osl, q, _, err) in enumerate(rows))
    send = np.asarray([r.intended_s for r in recs])
    sched = Schedule("trace", send, np.asarray([r.query for r in recs], dtype=np.int64),
                     len(recs) / float(send[-1]) if send[-1] > 0 else float("inf"), None,
                     f"AIPerf export {path.name}",
                     np.asarray([r[9] for r in rows], dtype=bool))
    run = LevelRun(sched, recs, max(r.end_s for r in recs), "open")
    m = summarize(run, slo_ms=slo_ms or {}, label=label or f"aiperf {path.name}")
    got = "credit_issued" if origin == "credit" else "intended" if intended_seen else "send"
    return replace(m, source=f"aiperf ({path.name})",
                   extra={**m.extra, "latency_origin": got})
