"""BEIR folder loader.

Layout (as written by BEIR's ``GenericDataLoader`` datasets)::

    PATH/corpus.jsonl        {"_id": "d1", "title": "...", "text": "...", "metadata": {...}}
    PATH/queries.jsonl       {"_id": "q1", "text": "...", "metadata": {...}}
    PATH/qrels/<split>.tsv   header "query-id<TAB>corpus-id<TAB>score", one judgement a row

Extra keys in the JSONL rows (BEIR's ``metadata`` and friends) are ignored: the format is
external and they carry nothing ``Document`` can hold. Queries with no positive judgement in the
split are dropped and counted in a log line; a judgement naming an unknown query or document,
a duplicate id or a malformed row raises ``InputError(file, line, ...)``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bench.data.base import Dataset, Document, Query
from bench.data.jsonl import (
    Where,
    cell_grade,
    check_id,
    iter_jsonl,
    json_id,
    json_str,
    read_text,
    require_rows,
)
from bench.errors import InputError

log = logging.getLogger(__name__)

QRELS_HEADER = ("query-id", "corpus-id", "score")


class BeirDataset:
    """Loads ``path`` (a BEIR dataset folder) with the qrels of ``split``."""

    def __init__(self, *, path: str, split: str = "test") -> None:
        self.path = path
        self.split = split

    def load(self) -> Dataset:
        root = Path(self.path)
        documents = _read_corpus(root / "corpus.jsonl")
        texts = _read_queries(root / "queries.jsonl")
        qrels = _read_qrels(root / "qrels" / f"{self.split}.tsv", set(texts),
                            {d.doc_id for d in documents})
        queries = tuple(
            Query(query_id=qid, text=text, qrels=tuple(qrels[qid]))
            for qid, text in texts.items()
            if any(g >= 1 for _, g in qrels.get(qid, ()))
        )
        if not queries:
            raise InputError(root / "qrels" / f"{self.split}.tsv", 0,
                             "no query has a positive judgement (score >= 1) in this split: "
                             "nothing to evaluate")
        dropped = len(texts) - len(queries)
        zero_only = sum(1 for qid in texts
                        if qid in qrels and not any(g >= 1 for _, g in qrels[qid]))
        log.info("beir %s [%s]: %d documents, %d queries kept, %d dropped without a positive "
                 "qrel in this split (%d of them had only score-0 judgements)",
                 root.name, self.split, len(documents), len(queries), dropped, zero_only)
        return Dataset(name=f"beir:{root.name}:{self.split}", documents=documents,
                       queries=queries)


def _read_corpus(path: Path) -> tuple[Document, ...]:
    docs: list[Document] = []
    first_line: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        doc_id = _id(obj, where)
        if doc_id in first_line:
            raise where.error(f"duplicate _id {doc_id!r} (first seen on line "
                              f"{first_line[doc_id]})")
        first_line[doc_id] = where.line
        if "text" not in obj:
            raise where.error("missing required field 'text'")
        # BEIR corpora do contain documents with an empty text (title only): keep them.
        docs.append(Document(doc_id=doc_id,
                             text=json_str(obj["text"], "text", where, allow_empty=True),
                             title=json_str(obj.get("title") or "", "title", where,
                                            allow_empty=True)))
    require_rows(path, len(docs), "documents")
    return tuple(docs)


def _read_queries(path: Path) -> dict[str, str]:
    texts: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        qid = _id(obj, where)
        if qid in first_line:
            raise where.error(f"duplicate _id {qid!r} (first seen on line {first_line[qid]})")
        first_line[qid] = where.line
        if "text" not in obj:
            raise where.error("missing required field 'text'")
        texts[qid] = json_str(obj["text"], "text", where)
    require_rows(path, len(texts), "queries")
    return texts


def _id(obj: dict[str, object], where: Where) -> str:
    if "_id" not in obj:
        raise where.error("missing required field '_id'")
    return json_id(obj["_id"], "_id", where)


def _read_qrels(path: Path, query_ids: set[str],
                doc_ids: set[str]) -> dict[str, list[tuple[str, int]]]:
    """qrels TSV -> {query_id: [(doc_id, grade), ...]} in file order."""
    out: dict[str, list[tuple[str, int]]] = {}
    seen: dict[tuple[str, str], int] = {}
    # one decode up front so invalid UTF-8 is reported with its line; split on \n only, as
    # str.splitlines would also break at \x0b, \x1c... and shift every later line number
    for n, raw in enumerate(read_text(path).split("\n"), start=1):
        line = raw.rstrip("\r\n")
        where = Where(str(path), n)
        if n == 1:
            if tuple(c.strip() for c in line.split("\t")) != QRELS_HEADER:
                raise where.error(f"expected the header {chr(9).join(QRELS_HEADER)!r} "
                                  "(tab-separated)")
            continue
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != 3:
            raise where.error(f"expected 3 tab-separated columns, got {len(cells)}")
        qid = check_id(cells[0].strip(), "column 'query-id'", where)
        did = check_id(cells[1].strip(), "column 'corpus-id'", where)
        if qid not in query_ids:
            raise where.error(f"query-id {qid!r} is not in queries.jsonl")
        if did not in doc_ids:
            raise where.error(f"corpus-id {did!r} is not in corpus.jsonl")
        if (qid, did) in seen:
            raise where.error(f"duplicate judgement for ({qid!r}, {did!r}) (first on line "
                              f"{seen[qid, did]})")
        seen[qid, did] = n
        out.setdefault(qid, []).append((did, cell_grade(cells[2], "score", where)))
    return out
