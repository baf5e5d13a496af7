"""CSV loader: corpus, queries and (optional) qrels files, each with a header row.

Columns (required first; list columns are ``;``-separated, booleans true/false/yes/no/1/0)::

    corpus:  doc_id, text [, title, tags, allowed_roles, tenant]
    queries: query_id, query [, category, must_abstain, required_claims, allowed_roles,
             as_of, expected_answer, split, tenant]
             (split: bench.data.splits.SPLITS or empty)
    qrels:   query_id, doc_id [, grade]            (grade: integer >= 0, empty = 1)

Errors name ``file:line`` where line is the physical line in the file (the header is line 1;
a quoted multi-line cell counts its real lines). Unknown columns, duplicate ids, unknown ids in
qrels, must_abstain queries with qrels, and (when a qrels file is given) answerable queries
without any qrels are all errors. Blank lines are skipped.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

from bench.data.base import Dataset, Document, Query
from bench.data.categories import with_categories
from bench.data.golden import query_tenant_missing
from bench.data.jsonl import (
    Where,
    cell_bool,
    cell_grade,
    cell_list,
    check_id,
    iso_date,
    read_text,
    require_rows,
)
from bench.errors import InputError

CORPUS_COLUMNS = (("doc_id", "text"), ("title", "tags", "allowed_roles", "tenant"))
QUERY_COLUMNS = (("query_id", "query"), ("category", "must_abstain", "required_claims",
                                         "allowed_roles", "as_of", "expected_answer",
                                         "split", "tenant"))
QRELS_COLUMNS = (("query_id", "doc_id"), ("grade",))


class CsvDataset:
    """Loads ``corpus`` + ``queries`` (+ optional ``qrels``) CSV files into a ``Dataset``.

    ``categories``: a JSONL mapping ``{"query_id", "category"}`` whose categories replace the
    ``category`` column (``bench.data.categories``)."""

    def __init__(self, *, corpus: str, queries: str, qrels: str | None = None,
                 categories: str | None = None) -> None:
        self.corpus = corpus
        self.queries = queries
        self.qrels = qrels
        self.categories = categories

    def load(self) -> Dataset:
        documents = _read_corpus(self.corpus)
        doc_ids = {d.doc_id for d in documents}
        rows = _read_queries(self.queries, tenanted=any(d.tenant for d in documents))
        if self.qrels is not None:
            rows = _attach_qrels(rows, self.qrels, doc_ids)
        return with_categories(Dataset(name=f"csv:{Path(self.queries).stem}",
                                       documents=documents, queries=tuple(q for _, q in rows)),
                               self.categories)


def iter_csv(path: str | Path, columns: tuple[tuple[str, ...], tuple[str, ...]]
             ) -> Iterator[tuple[Where, dict[str, str]]]:
    """Yield ``(where, {column: cell})`` per data row, after checking the header.

    ``columns`` is (required, optional). ``where.line`` is the row's first physical line.
    """
    p = Path(path)
    required, optional = columns
    with io.StringIO(read_text(p), newline="") as fh:
        reader = csv.reader(fh, strict=True)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise InputError(p, 1, "empty file: expected a header row") from None
        except csv.Error as exc:
            raise InputError(p, 1, f"malformed CSV: {exc}") from None
        head = Where(str(p), 1)
        for col in required:
            if col not in header:
                raise head.error(f"missing required column '{col}' in header")
        unknown = [h for h in header if h not in (*required, *optional)]
        if unknown:
            raise head.error(f"unknown column(s) {', '.join(repr(h) for h in unknown)}; allowed "
                             f"columns: {', '.join((*required, *optional))}")
        dupes = sorted({h for h in header if header.count(h) > 1})
        if dupes:
            raise head.error(f"duplicate column(s) {', '.join(repr(h) for h in dupes)}")
        end = reader.line_num
        while True:
            start = end + 1  # reader.line_num is the LAST physical line of the record just read
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise InputError(p, start, f"malformed CSV: {exc}") from None
            end = reader.line_num
            if len(cells) <= 1 and not "".join(cells).strip():
                continue
            where = Where(str(p), start)
            if len(cells) != len(header):
                raise where.error(f"expected {len(header)} columns (as in the header), "
                                  f"got {len(cells)}")
            yield where, dict(zip(header, cells, strict=True))


def _required(row: dict[str, str], key: str, where: Where) -> str:
    value = row[key].strip()
    if not value:
        raise where.error(f"column '{key}' is empty")
    return value


def _id(row: dict[str, str], key: str, where: Where) -> str:
    """An id cell, taken as written: a stray space would become part of the id in every
    exported TREC file, so it is an error rather than silently stripped."""
    if not row[key].strip():
        raise where.error(f"column '{key}' is empty")
    return check_id(row[key], f"column '{key}'", where)


def _read_corpus(path: str) -> tuple[Document, ...]:
    docs: list[Document] = []
    first: dict[str, int] = {}
    for where, row in iter_csv(path, CORPUS_COLUMNS):
        doc_id = _id(row, "doc_id", where)
        if doc_id in first:
            raise where.error(f"duplicate doc_id {doc_id!r} (first seen on line {first[doc_id]})")
        first[doc_id] = where.line
        docs.append(Document(doc_id=doc_id, text=_required(row, "text", where),
                             title=row.get("title", "").strip(),
                             tags=cell_list(row.get("tags", "")),
                             allowed_roles=cell_list(row.get("allowed_roles", "")),
                             tenant=row.get("tenant", "").strip()))
    require_rows(path, len(docs), "documents")
    return tuple(docs)


def _read_queries(path: str, *, tenanted: bool = False) -> list[tuple[Where, Query]]:
    """``tenanted``: the corpus has documents with a tenant, so every query needs one."""
    out: list[tuple[Where, Query]] = []
    first: dict[str, int] = {}
    for where, row in iter_csv(path, QUERY_COLUMNS):
        qid = _id(row, "query_id", where)
        if qid in first:
            raise where.error(f"duplicate query_id {qid!r} (first seen on line {first[qid]})")
        first[qid] = where.line
        answer = row.get("expected_answer", "").strip()
        tenant = row.get("tenant", "").strip()
        if tenanted and not tenant:
            raise where.error(query_tenant_missing(qid))
        out.append((where, Query(
            query_id=qid, text=_required(row, "query", where),
            category=row.get("category", "").strip() or "default",
            must_abstain=cell_bool(row.get("must_abstain", ""), "must_abstain", where),
            required_claims=cell_list(row.get("required_claims", "")),
            allowed_roles=cell_list(row.get("allowed_roles", "")),
            as_of=iso_date(row.get("as_of", "").strip(), "as_of", where),
            expected_answer=answer or None,
            split=_split(row.get("split", "").strip(), where),
            tenant=tenant,
        )))
    require_rows(path, len(out), "queries")
    return out


def _split(value: str, where: Where) -> str:
    from bench.data.splits import SPLITS

    if value and value not in SPLITS:
        raise where.error(f"unknown split {value!r}; use one of {', '.join(SPLITS)}")
    return value


def _attach_qrels(rows: list[tuple[Where, Query]], path: str,
                  doc_ids: set[str]) -> list[tuple[Where, Query]]:
    """Fill each query's ``qrels`` from the qrels CSV, checking ids both ways."""
    by_id = {q.query_id: q for _, q in rows}
    qrels: dict[str, list[tuple[str, int]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for where, row in iter_csv(path, QRELS_COLUMNS):
        qid, did = _id(row, "query_id", where), _id(row, "doc_id", where)
        if qid not in by_id:
            raise where.error(f"query_id {qid!r} is not in the queries file")
        if did not in doc_ids:
            raise where.error(f"doc_id {did!r} is not in the corpus file")
        if by_id[qid].must_abstain:
            raise where.error(f"query {qid!r} has must_abstain=true: it cannot have qrels")
        if (qid, did) in seen:
            raise where.error(f"duplicate qrel ({qid!r}, {did!r}) (first on line "
                              f"{seen[qid, did]})")
        seen[qid, did] = where.line
        qrels.setdefault(qid, []).append((did, cell_grade(row.get("grade", ""), "grade", where)))
    out: list[tuple[Where, Query]] = []
    for where, q in rows:
        if not q.must_abstain and q.query_id not in qrels:
            raise where.error(f"query {q.query_id!r} has no qrels in {path}: add some or set "
                              "must_abstain to true")
        out.append((where, dataclasses.replace(q, qrels=tuple(qrels.get(q.query_id, ())))))
    return out
