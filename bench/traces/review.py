"""Golden sets from traffic: a review queue, and the merge of reviewed rows.

``queue``: every sampled record becomes one JSONL row with what a reviewer needs to see
(query, production's answer, the retrieved documents with their content when the trace had
it, why it was sampled and its weight) and the fields they fill::

    {"trace_id", "span_id", "query", "answer", "retrieved": [...], "designs": [...],
     "weight": ..., "relevant_document_ids": [], "required_claims": [],
     "must_abstain": null, "category": null, "reviewer": null, "reviewed_at": null,
     "status": "pending"}                     # status: pending | done | skip

``merge``: rows with ``status: done`` become golden rows (``bench.data.golden`` format) with
``split: monitoring`` and ``provenance {trace_id, span_id, reviewer, date}``; the query id is
``trace-<trace id>``. Every reviewed row is checked like a golden row
(ids in the corpus, must_abstain consistent with the relevant ids, a reviewer and a date);
a bad one is an InputError naming the queue line. Then the existing contamination check
(``bench.data.splits.contamination``) runs over old + new rows: a new row that is a
near-duplicate of a query in another split is left out (counted, listed); a document shared
with another split's queries is reported (traffic naturally asks about documents the golden
set covers).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from bench.data.base import Document, Query
from bench.data.golden import query_to_json, read_corpus, read_queries
from bench.data.jsonl import Where, iter_jsonl, json_bool, json_str, json_str_list, write_jsonl
from bench.data.splits import contamination, near_duplicates

STATUSES = ("pending", "done", "skip")
FILLED = ("relevant_document_ids", "required_claims", "must_abstain", "category", "reviewer",
          "reviewed_at", "status")


def queue_rows(sample: str | Path | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Review rows of a sample file (or of its rows, ``sampled_to_json``)."""
    out = []
    pairs = (iter_jsonl(sample) if isinstance(sample, str | Path) else
             ((Where("<sample>", i), obj) for i, obj in enumerate(sample, start=1)))
    for where, obj in pairs:
        rec = obj.get("record")
        if not isinstance(rec, dict) or "trace_id" not in obj:
            raise where.error("not a sample row of `python -m bench.traces sample`")
        out.append({
            "trace_id": obj["trace_id"], "span_id": obj["span_id"], "query": rec["query"],
            "answer": rec["answer"],
            "retrieved": [{k: d[k] for k in ("doc_id", "rank", "score", "content")}
                          for d in rec["documents"]],
            "unknown_ids": rec["unknown_ids"], "tenant": rec["tenant"],
            "designs": obj["designs"], "weight": obj["weight"],
            "relevant_document_ids": [], "required_claims": [], "must_abstain": None,
            "category": None, "reviewer": None, "reviewed_at": None, "status": "pending"})
    return out


def _reviewed(where: Where, obj: dict[str, Any], doc_ids: set[str], tenanted: bool
              ) -> Query | None:
    status = json_str(obj.get("status", "pending"), "status", where)
    if status not in STATUSES:
        raise where.error(f"status {status!r}: use one of {', '.join(STATUSES)}")
    if status != "done":
        return None
    for key in ("trace_id", "span_id", "query"):
        if key not in obj:
            raise where.error(f"missing field '{key}'")
    if obj.get("must_abstain") is None:
        raise where.error("must_abstain is not filled (true or false)")
    must = json_bool(obj["must_abstain"], "must_abstain", where)
    rel = json_str_list(obj.get("relevant_document_ids"), "relevant_document_ids", where)
    unknown = [d for d in rel if d not in doc_ids]
    if unknown:
        raise where.error(f"relevant_document_ids names unknown document {unknown[0]!r} "
                          "(not in the corpus)")
    if must and rel:
        raise where.error("must_abstain is true but relevant_document_ids is not empty")
    if not must and not rel:
        raise where.error("relevant_document_ids is empty: list at least one document or "
                          "set must_abstain to true")
    reviewer = json_str(obj.get("reviewer") or "", "reviewer", where)
    reviewed = json_str(obj.get("reviewed_at") or "", "reviewed_at", where)
    try:
        date.fromisoformat(reviewed[:10])
    except ValueError:
        raise where.error(f"reviewed_at {reviewed!r} is not an ISO date") from None
    category = json_str(obj.get("category") or "", "category", where)
    tenant = str(obj.get("tenant") or "")
    if tenanted and not tenant:
        raise where.error("the corpus has tenants: the reviewed row needs the caller's tenant")
    trace_id = json_str(obj["trace_id"], "trace_id", where)
    return Query(
        query_id=f"trace-{trace_id}", text=json_str(obj["query"], "query", where),
        category=category, qrels=tuple((d, 1) for d in rel),
        required_claims=json_str_list(obj.get("required_claims"), "required_claims", where),
        must_abstain=must, split="monitoring", tenant=tenant,
        provenance=(("source", "production-trace"), ("trace_id", trace_id),
                    ("span_id", str(obj["span_id"])), ("reviewer", reviewer),
                    ("date", reviewed[:10])))


@dataclasses.dataclass(frozen=True)
class MergeResult:
    merged: tuple[Query, ...]
    added: int
    pending: int
    already: int
    dropped_near_duplicates: tuple[str, ...]
    shared_documents: int


def merge(queue_path: str | Path, *, corpus_path: str | Path, golden_path: str | Path
          ) -> MergeResult:
    docs = read_corpus(corpus_path)
    doc_ids = {d.doc_id for d in docs}
    existing = read_queries(golden_path, doc_ids, tenanted=any(d.tenant for d in docs))
    return merge_rows(queue_path, documents=docs, existing=existing)


def merge_rows(queue_path: str | Path, *, documents: Sequence[Document],
               existing: Sequence[Query]) -> MergeResult:
    """``merge`` over a loaded corpus and golden set."""
    doc_ids = {d.doc_id for d in documents}
    tenanted = any(d.tenant for d in documents)
    have = {q.query_id for q in existing}
    new: list[Query] = []
    pending = already = 0
    for where, obj in iter_jsonl(queue_path):
        q = _reviewed(where, obj, doc_ids, tenanted)
        if q is None:
            pending += 1
        elif q.query_id in have:
            already += 1  # merged by an earlier run: the queue can be merged again
        else:
            have.add(q.query_id)
            new.append(q)
    others = {q.query_id: q.text for q in existing if q.split and q.split != "monitoring"}
    new_ids = {q.query_id for q in new}
    dup: dict[str, str] = {}
    for a, b, j in near_duplicates({**others, **{q.query_id: q.text for q in new}}):
        if (a in new_ids) != (b in new_ids):
            mine, theirs = (a, b) if a in new_ids else (b, a)
            dup.setdefault(mine, f"{mine} ~ {theirs} (token Jaccard {j:.2f})")
    kept = [q for q in new if q.query_id not in dup]
    merged = (*existing, *kept)
    found = contamination(merged)
    return MergeResult(merged, len(kept), pending, already, tuple(dup.values()),
                       found.n_shared_documents)


def cli(a: argparse.Namespace) -> int:
    if a.review_command == "queue":
        rows = queue_rows(a.sample)
        write_jsonl(a.out, rows)
        print(f"{a.out}: {len(rows)} rows to review (fill {', '.join(FILLED)})")
        return 0
    res = merge(a.queue, corpus_path=a.corpus, golden_path=a.golden)
    write_jsonl(a.out, (query_to_json(q) for q in res.merged))
    print(f"{a.out}: {len(res.merged)} golden rows, {res.added} new in the monitoring split "
          f"({res.pending} not reviewed, {res.already} merged before, "
          f"{len(res.dropped_near_duplicates)} left out as near-duplicates of another "
          f"split's queries, {res.shared_documents} documents shared across splits)")
    for line in res.dropped_near_duplicates[:20]:
        print(f"  near-duplicate: {line}")
    return 0


def reviewed_ids(rows: Sequence[Query]) -> list[str]:
    return [q.query_id for q in rows if dict(q.provenance).get("source") == "production-trace"]
