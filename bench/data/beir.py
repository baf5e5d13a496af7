"""BEIR folder loader.

Layout (as written by BEIR's ``GenericDataLoader`` datasets)::

    PATH/corpus.jsonl        {"_id": "d1", "title": "...", "text": "...", "metadata": {...}}
    PATH/queries.jsonl       {"_id": "q1", "text": "...", "metadata": {...}}
    PATH/qrels/<split>.tsv   header "query-id<TAB>corpus-id<TAB>score", one judgement a row

Each passage is ``(title + " " + text).strip()``, as BEIR's and MTEB's encoders build it
(``beir.retrieval.models.SentenceBERT.encode_corpus``; MTEB's retrieval evaluator), so scores
are comparable with theirs; the title is kept on the ``Document`` for display
(``title_in_text=True``: chunkers do not prepend it again). Extra keys in the JSONL rows are
ignored, except a query field named by ``category_field``. Query categories come from
``categories`` (a JSONL mapping, ``bench.data.categories``) or ``category_field``; otherwise
every query is ``default``. ``answers`` (optional): a JSONL file of ``{"query_id", "answers":
[...]}`` rows giving each query's reference answers (several = alternatives, EM/F1 take the
max: ``Query.expected_answers``); other keys of its rows are ignored (SQuAD-derived files carry
``paragraph_id``, ``is_impossible``...), a row for a query dropped below is skipped, an unknown
or repeated query id or a malformed list is an error. Queries with no positive judgement in
the split are dropped and counted in ``Dataset.n_dropped_queries`` (and a log line); a
judgement naming an unknown query or document, a duplicate id or a malformed row raises
``InputError(file, line, ...)``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.config.build import OptionError
from bench.data.base import Dataset, Query
from bench.data.categories import apply_categories, field_category, read_category_map
from bench.data.jsonl import (
    Where,
    cell_grade,
    check_id,
    iter_jsonl,
    json_id,
    json_str,
    json_str_list,
    read_text,
    require_rows,
)
from bench.data.table import DOCUMENT_SCHEMA, ITER_BLOCK, DocumentTable
from bench.errors import InputError

log = logging.getLogger(__name__)

QRELS_HEADER = ("query-id", "corpus-id", "score")


class BeirDataset:
    """Loads ``path`` (a BEIR dataset folder) with the qrels of ``split``.

    ``categories``: a JSONL file of ``{"query_id", "category"}`` rows; ``category_field``: a
    (dotted) field of the query rows holding the category (``metadata.type``). At most one.
    ``answers``: a JSONL file of ``{"query_id", "answers": [...]}`` reference answers.
    """

    def __init__(self, *, path: str | None = None, split: str = "test",
                 categories: str | None = None, category_field: str | None = None,
                 answers: str | None = None) -> None:
        if path is None or path in ("", "???"):
            raise OptionError("path", "required: set dataset.path=DIR, a BEIR folder holding "
                                      "corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
        if categories and category_field:
            raise OptionError("categories", "give categories (a mapping file) or "
                                            "category_field, not both")
        self.path = path
        self.split = split
        self.categories = categories
        self.category_field = category_field
        self.answers = answers

    def load(self) -> Dataset:
        root = Path(self.path)
        documents = _read_corpus(root / "corpus.jsonl")
        texts, from_field = _read_queries(root / "queries.jsonl", self.category_field)
        qrels_path = root / "qrels" / f"{self.split}.tsv"
        qrels = _read_qrels(qrels_path, set(texts), _present(documents, qrels_path))
        refs = read_answers(self.answers, set(texts)) if self.answers else {}
        queries = tuple(
            Query(query_id=qid, text=text, qrels=tuple(qrels[qid]),
                  expected_answer=refs[qid][0] if refs.get(qid) else None,
                  expected_answers=refs.get(qid, ()))
            for qid, text in texts.items()
            if any(g >= 1 for _, g in qrels.get(qid, ()))
        )
        if not queries:
            raise InputError(root / "qrels" / f"{self.split}.tsv", 0,
                             "no query has a positive judgement (score >= 1) in this split: "
                             "nothing to evaluate")
        if self.categories:
            queries = apply_categories(queries, read_category_map(self.categories, texts),
                                       self.categories)
        elif self.category_field:
            queries = apply_categories(queries, from_field,
                                       f"{root / 'queries.jsonl'} field {self.category_field}")
        dropped = len(texts) - len(queries)
        zero_only = sum(1 for qid in texts
                        if qid in qrels and not any(g >= 1 for _, g in qrels[qid]))
        reason = (f"no positive judgement in qrels/{self.split}.tsv ({zero_only} with only "
                  f"score-0 judgements, {dropped - zero_only} not judged)") if dropped else ""
        log.info("beir %s [%s]: %d documents, %d queries kept, %d dropped: %s",
                 root.name, self.split, len(documents), len(queries), dropped, reason or "-")
        if self.answers:
            log.info("beir %s: reference answers for %d of the %d kept queries (%s)", root.name,
                     sum(1 for q in queries if q.expected_answers), len(queries), self.answers)
        return Dataset(name=f"beir:{root.name}:{self.split}", documents=documents,
                       queries=queries, n_dropped_queries=dropped, dropped_reason=reason)


def _read_corpus(path: Path) -> DocumentTable:
    """corpus.jsonl as a ``DocumentTable``: rows gathered ``ITER_BLOCK`` at a time into Arrow
    columns, so no Python object per document outlives its block; ids checked unique after
    the pass (the first repeat reported at its line, with the line it was first seen on)."""
    blocks: list[pa.RecordBatch] = []
    lines: list[np.ndarray] = []
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    at: list[int] = []

    def flush() -> None:
        if ids:
            blocks.append(pa.record_batch([pa.array(ids, pa.string()),
                                           pa.array(titles, pa.string()),
                                           pa.array(texts, pa.string())],
                                          schema=DOCUMENT_SCHEMA))
            lines.append(np.asarray(at, dtype=np.int64))
            for col in (ids, titles, texts, at):
                col.clear()

    for where, obj in iter_jsonl(path):
        doc_id = _id(obj, where)
        if "text" not in obj:
            raise where.error("missing required field 'text'")
        # BEIR corpora do contain documents with an empty text (title only): keep them.
        text = json_str(obj["text"], "text", where, allow_empty=True)
        title = json_str(obj.get("title") or "", "title", where, allow_empty=True)
        ids.append(doc_id)
        titles.append(title)
        texts.append(passage(title, text))
        at.append(where.line)
        if len(ids) == ITER_BLOCK:
            flush()
    flush()
    table = pa.Table.from_batches(blocks, schema=DOCUMENT_SCHEMA)
    require_rows(path, table.num_rows, "documents")
    column = table.column("doc_id")
    if pc.count_distinct(column).as_py() != table.num_rows:
        first_line: dict[str, int] = {}
        for doc_id, line in zip(column.to_pylist(), np.concatenate(lines).tolist(),
                                strict=True):
            if doc_id in first_line:
                raise InputError(path, line, f"duplicate _id {doc_id!r} (first seen on "
                                             f"line {first_line[doc_id]})")
            first_line[doc_id] = line
    return DocumentTable(table, title_in_text=True)


def _present(corpus: DocumentTable, qrels_path: Path) -> set[str]:
    """The corpus-ids named in the qrels file that the corpus holds (the qrels are checked
    against these: a set of the judged ids rather than of the whole corpus)."""
    named = set()
    for raw in read_text(qrels_path).split("\n")[1:]:
        cells = raw.rstrip("\r\n").split("\t")
        if len(cells) == 3:
            named.add(cells[1].strip())
    column = corpus.arrow.column("doc_id")
    found = pc.filter(column, pc.is_in(column, value_set=pa.array(sorted(named), pa.string())))
    return set(found.to_pylist())


def passage(title: str, text: str) -> str:
    """BEIR's and MTEB's passage: ``(title + " " + text).strip()`` (text alone when untitled)."""
    return f"{title} {text}".strip() if title else text.strip()


def _read_queries(path: Path, category_field: str | None
                  ) -> tuple[dict[str, str], dict[str, str]]:
    """({query_id: text}, {query_id: category from ``category_field``})."""
    cats: dict[str, str] = {}
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
        if category_field:
            cat = field_category(obj, category_field, where)
            if cat is not None:
                cats[qid] = cat
    require_rows(path, len(texts), "queries")
    return texts, cats


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


def read_answers(path: str | Path, query_ids: set[str]) -> dict[str, tuple[str, ...]]:
    """An answers JSONL file -> {query_id: reference answers} (see the module docstring)."""
    out: dict[str, tuple[str, ...]] = {}
    first_line: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        for key in ("query_id", "answers"):
            if key not in obj:
                raise where.error(f"missing required field '{key}'")
        qid = json_id(obj["query_id"], "query_id", where)
        if qid not in query_ids:
            raise where.error(f"query_id {qid!r} is not in queries.jsonl")
        if qid in first_line:
            raise where.error(f"duplicate query_id {qid!r} (first seen on line "
                              f"{first_line[qid]})")
        first_line[qid] = where.line
        if obj["answers"] is None:
            raise where.error("field 'answers' must be a list of strings, got null")
        out[qid] = json_str_list(obj["answers"], "answers", where)
    require_rows(path, len(out), "answers")
    return out
