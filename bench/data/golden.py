"""Golden JSONL format: a corpus JSONL plus a golden-queries JSONL (reader and writer).

Corpus line::

    {"doc_id": "d1", "text": "...", "title": "...", "tags": ["x"], "allowed_roles": [],
     "tenant": ""}                      # doc_id and text required, the rest optional

Golden query line::

    {"query_id": "q1", "query": "What is X?", "category": "exact_lookup",
     "relevant_document_ids": ["d1"]                       # grade 1 each, or graded:
     "relevant_document_ids": [{"id": "d1", "grade": 2}, {"id": "d7", "grade": 1}],
     "required_claims": ["..."], "must_abstain": false, "allowed_roles": [],
     "as_of": null, "expected_answer": "...", "tenant": ""}
     # optional "split": development | calibration | release | monitoring (bench.data.splits)
     # optional "provenance": {"trace_id": ..., "reviewer": ..., "date": ...} (bench.traces)
     # or several reference answers (alternatives; EM/F1 take the max over them):
     "expected_answers": ["10th and 11th centuries", "in the 10th and 11th centuries"]

``query_id`` and ``query`` are required. ``relevant_document_ids`` must name at least one corpus
document unless ``must_abstain`` is true, in which case it must be empty or absent. When a
corpus document has a ``tenant``, every query needs one (the caller's tenant: it sees its
tenant's documents and the untenanted ones). Unknown fields, duplicate ids, unknown doc ids
and wrong types are ``InputError(file, line, ...)``.
A row gives ``expected_answer`` or ``expected_answers``, not both; ``expected_answers: []`` on
a must-abstain row is SQuAD 2.0's no-answer gold (see ``bench.metrics.answer``).
``write_golden`` writes the same format, so read(write(x)) == x.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.data.base import Dataset, Document, Query
from bench.data.categories import with_categories
from bench.data.jsonl import (
    Where,
    check_keys,
    grade,
    iso_date,
    iter_jsonl,
    json_bool,
    json_id,
    json_opt_str,
    json_str,
    json_str_list,
    require_rows,
    write_jsonl,
)

CORPUS_REQUIRED = ("doc_id", "text")
CORPUS_OPTIONAL = ("title", "tags", "allowed_roles", "tenant")
QUERY_REQUIRED = ("query_id", "query")
QUERY_OPTIONAL = ("relevant_document_ids", "required_claims", "must_abstain", "allowed_roles",
                  "as_of", "category", "expected_answer", "expected_answers", "split",
                  "tenant", "provenance")


class GoldenDataset:
    """Loads a corpus JSONL + golden-queries JSONL pair into a ``Dataset``.

    ``corpus`` and ``queries`` are file paths; the dataset is named after the queries file.
    ``categories``: a JSONL mapping ``{"query_id", "category"}`` whose categories replace the
    rows' own (``bench.data.categories``).
    """

    def __init__(self, *, corpus: str, queries: str, categories: str | None = None) -> None:
        self.corpus = corpus
        self.queries = queries
        self.categories = categories

    def load(self) -> Dataset:
        documents = read_corpus(self.corpus)
        queries = read_queries(self.queries, {d.doc_id for d in documents},
                               tenanted=any(d.tenant for d in documents))
        return with_categories(Dataset(name=f"golden:{Path(self.queries).stem}",
                                       documents=documents, queries=queries), self.categories)


def read_corpus(path: str | Path) -> tuple[Document, ...]:
    """Parse a corpus JSONL file; every bad line raises InputError(path, line, ...)."""
    docs: list[Document] = []
    first_line: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        check_keys(obj, where, required=CORPUS_REQUIRED, optional=CORPUS_OPTIONAL)
        doc_id = json_id(obj["doc_id"], "doc_id", where)
        if doc_id in first_line:
            raise where.error(f"duplicate doc_id {doc_id!r} (first seen on line "
                              f"{first_line[doc_id]})")
        first_line[doc_id] = where.line
        docs.append(Document(
            doc_id=doc_id,
            text=json_str(obj["text"], "text", where),
            title=json_str(obj.get("title", ""), "title", where, allow_empty=True),
            tags=json_str_list(obj.get("tags"), "tags", where),
            allowed_roles=json_str_list(obj.get("allowed_roles"), "allowed_roles", where),
            tenant=json_str(obj.get("tenant", ""), "tenant", where, allow_empty=True),
        ))
    require_rows(path, len(docs), "documents")
    return tuple(docs)


def query_tenant_missing(query_id: str) -> str:
    """The message of a query without a tenant over a corpus with tenants (both loaders)."""
    return (f"query {query_id!r} has no tenant, but corpus documents have tenants: give every "
            "query its caller's tenant")


def read_queries(path: str | Path, doc_ids: set[str], *,
                 tenanted: bool = False) -> tuple[Query, ...]:
    """Parse a golden-queries JSONL file, checking every relevant id against ``doc_ids``;
    ``tenanted``: the corpus has documents with a tenant, so every query needs one."""
    queries: list[Query] = []
    first_line: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        check_keys(obj, where, required=QUERY_REQUIRED, optional=QUERY_OPTIONAL)
        query_id = json_id(obj["query_id"], "query_id", where)
        if query_id in first_line:
            raise where.error(f"duplicate query_id {query_id!r} (first seen on line "
                              f"{first_line[query_id]})")
        first_line[query_id] = where.line
        must_abstain = json_bool(obj.get("must_abstain", False), "must_abstain", where)
        qrels = _qrels(obj.get("relevant_document_ids"), where, doc_ids)
        if must_abstain and qrels:
            raise where.error("must_abstain is true but relevant_document_ids is not empty: "
                              "an abstention query has no relevant document")
        if not must_abstain and not qrels:
            raise where.error("relevant_document_ids is empty: list at least one document "
                              "or set must_abstain to true")
        queries.append(Query(
            query_id=query_id,
            text=json_str(obj["query"], "query", where),
            category=json_str(obj.get("category", "default"), "category", where),
            qrels=qrels,
            required_claims=json_str_list(obj.get("required_claims"), "required_claims", where),
            must_abstain=must_abstain,
            allowed_roles=json_str_list(obj.get("allowed_roles"), "allowed_roles", where),
            as_of=iso_date(json_opt_str(obj.get("as_of"), "as_of", where), "as_of", where),
            **_answers(obj, where),
            split=_split(obj, where),
            tenant=_tenant(obj, where, tenanted),
            provenance=_provenance(obj.get("provenance"), where),
        ))
    require_rows(path, len(queries), "queries")
    return tuple(queries)


def _split(obj: dict[str, Any], where: Where) -> str:
    """``split``: one of ``bench.data.splits.SPLITS`` (absent: the query is in no split)."""
    from bench.data.splits import SPLITS

    if obj.get("split") is None:
        return ""
    split = json_str(obj["split"], "split", where)
    if split not in SPLITS:
        raise where.error(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    return split


def _provenance(value: object, where: Where) -> tuple[tuple[str, str], ...]:
    """``provenance``: an object of string values (``{"trace_id", "reviewer", "date"}``)."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise where.error(f"field 'provenance' must be an object of strings, got "
                          f"{type(value).__name__}")
    return tuple((str(k), json_str(v, f"provenance.{k}", where)) for k, v in value.items())


def _tenant(obj: dict[str, Any], where: Where, tenanted: bool) -> str:
    tenant = json_str(obj.get("tenant", ""), "tenant", where, allow_empty=True)
    if tenanted and not tenant:
        raise where.error(query_tenant_missing(obj["query_id"]))
    return tenant


def _answers(obj: dict[str, Any], where: Where) -> dict[str, Any]:
    """``expected_answer`` (one reference) or ``expected_answers`` (a list) as Query fields."""
    if "expected_answers" not in obj:
        return {"expected_answer": json_opt_str(obj.get("expected_answer"), "expected_answer",
                                                where)}
    if obj.get("expected_answer") is not None:
        raise where.error("give expected_answer (one reference) or expected_answers (a list), "
                          "not both")
    answers = json_str_list(obj["expected_answers"], "expected_answers", where)
    return {"expected_answer": answers[0] if answers else None, "expected_answers": answers}


def _qrels(value: object, where: Where, doc_ids: set[str]) -> tuple[tuple[str, int], ...]:
    """``relevant_document_ids``: plain ids (grade 1) and/or {"id", "grade"} objects."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error("field 'relevant_document_ids' must be a list, got "
                          f"{type(value).__name__}")
    out: list[tuple[str, int]] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        key = f"relevant_document_ids[{i}]"
        if isinstance(item, dict):
            check_keys(item, where, required=("id",), optional=("grade",), context=key)
            doc_id = json_id(item["id"], f"{key}.id", where)
            g = grade(item.get("grade", 1), f"{key}.grade", where)
        else:
            doc_id, g = json_id(item, key, where), 1
        if doc_id not in doc_ids:
            raise where.error(f"{key} names unknown document {doc_id!r} (not in the corpus)")
        if doc_id in seen:
            raise where.error(f"{key}: document {doc_id!r} is listed twice")
        seen.add(doc_id)
        out.append((doc_id, g))
    return tuple(out)


def document_to_json(doc: Document) -> dict[str, Any]:
    """One corpus JSONL row for ``doc`` (every field written, for a stable file)."""
    return {"doc_id": doc.doc_id, "title": doc.title, "text": doc.text, "tags": list(doc.tags),
            "allowed_roles": list(doc.allowed_roles), "tenant": doc.tenant}


def query_to_json(q: Query) -> dict[str, Any]:
    """One golden JSONL row for ``q``; grades are written as objects unless all are 1."""
    if all(g == 1 for _, g in q.qrels):
        rel: list[Any] = [d for d, _ in q.qrels]
    else:
        rel = [{"id": d, "grade": g} for d, g in q.qrels]
    row: dict[str, Any] = {
        "query_id": q.query_id, "query": q.text, "category": q.category,
        "relevant_document_ids": rel, "required_claims": list(q.required_claims),
        "must_abstain": q.must_abstain, "allowed_roles": list(q.allowed_roles),
        "as_of": q.as_of,
    }
    if q.expected_answers:
        row["expected_answers"] = list(q.expected_answers)
    elif q.expected_answer is not None:
        row["expected_answer"] = q.expected_answer
    if q.split:
        row["split"] = q.split
    if q.tenant:
        row["tenant"] = q.tenant
    if q.provenance:
        row["provenance"] = dict(q.provenance)
    return row


def write_golden(documents: Iterable[Document], queries: Iterable[Query], *, corpus: Path,
                 queries_path: Path) -> tuple[int, int]:
    """Write corpus + golden JSONL files; returns (n_documents, n_queries)."""
    n_docs = write_jsonl(corpus, (document_to_json(d) for d in documents))
    n_queries = write_jsonl(queries_path, (query_to_json(q) for q in queries))
    return n_docs, n_queries
