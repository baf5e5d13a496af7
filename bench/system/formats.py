"""Readers of answers produced elsewhere: a Ragas ``EvaluationDataset``, RAGChecker's JSON,
FlashRAG's JSONL — each record as an :class:`ImportedRecord`, a malformed one as one
``InputError`` naming ``file:line``.

- ``ragas``: JSONL (one sample per line, ``EvaluationDataset.to_jsonl``) or JSON (a list of
  samples, or ``{"samples": [...]}``); fields ``user_input`` (required), ``response``
  (required), ``retrieved_contexts`` (list of texts), ``reference``; no ids: records are
  matched to the dataset's queries by query text.
- ``ragchecker``: JSON ``{"results": [{query_id, query, gt_answer, response,
  retrieved_context: [{doc_id, text}]}]}``.
- ``flashrag``: JSONL, ``{id, question, golden_answers: [...], output: {pred,
  retrieval_result: [{id, contents}]}}`` (``pred`` at the top level is read too).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.data.jsonl import Where, read_text
from bench.errors import InputError

FORMATS = ("ragas", "ragchecker", "flashrag")


@dataclass(frozen=True)
class ImportedRecord:
    line: int
    query: str
    answer: str
    query_id: str | None = None
    references: tuple[str, ...] = ()
    contexts: tuple[str, ...] = ()
    #: each context's document id where the format gives one (None: text only)
    context_ids: tuple[str | None, ...] = ()


def _lines(text: str) -> Iterator[tuple[int, Any]]:
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield n, json.loads(raw)
        except json.JSONDecodeError as exc:
            raise Where("", n).error(f"not JSON: {exc.msg}") from None


def _array_items(text: str, start: int) -> Iterator[tuple[int, Any]]:
    """Each element of the JSON array opening at ``text[start]``, with its line."""
    dec = json.JSONDecoder()
    i = start + 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            raise ValueError("unterminated list")
        if text[i] == "]":
            return
        line = text.count("\n", 0, i) + 1
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise Where("", text.count("\n", 0, exc.pos) + 1).error(
                f"not JSON: {exc.msg}") from None
        yield line, obj


def _json_list(text: str, key: str | None) -> Iterator[tuple[int, Any]]:
    """The records of a JSON file: a top-level list, or the list under ``key``."""
    try:
        top = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Where("", text.count("\n", 0, exc.pos) + 1).error(f"not JSON: {exc.msg}") from None
    if isinstance(top, list):
        return _array_items(text, text.index("["))
    if key is not None and isinstance(top, dict) and isinstance(top.get(key), list):
        at = text.index(f'"{key}"')
        return _array_items(text, text.index("[", at))
    want = "a list of records" + (f" or {{\"{key}\": [...]}}" if key else "")
    raise Where("", 1).error(f"expected {want}")


def _str(rec: dict[str, Any], key: str, where: Where, *, required: bool = True) -> str | None:
    v = rec.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise where.error(f"field {key!r} must be text, got "
                          f"{'nothing' if v is None else type(v).__name__}")
    return v


def _ragas(rec: Any, where: Where) -> ImportedRecord:
    if not isinstance(rec, dict):
        raise where.error("a sample must be an object")
    ctx = rec.get("retrieved_contexts") or []
    if not isinstance(ctx, list) or not all(isinstance(c, str) for c in ctx):
        raise where.error("field 'retrieved_contexts' must be a list of texts")
    ref = _str(rec, "reference", where, required=False)
    return ImportedRecord(where.line, str(_str(rec, "user_input", where)),
                          str(_str(rec, "response", where)), None,
                          () if ref is None else (ref,), tuple(ctx), (None,) * len(ctx))


def _ragchecker(rec: Any, where: Where) -> ImportedRecord:
    if not isinstance(rec, dict):
        raise where.error("a result must be an object")
    ctx = rec.get("retrieved_context") or []
    if not isinstance(ctx, list):
        raise where.error("field 'retrieved_context' must be a list of {doc_id, text}")
    texts, ids = [], []
    for i, c in enumerate(ctx):
        if not isinstance(c, dict) or not isinstance(c.get("text"), str):
            raise where.error(f"retrieved_context[{i}] must be an object with a 'text'")
        texts.append(c["text"])
        ids.append(None if c.get("doc_id") is None else str(c["doc_id"]))
    ref = _str(rec, "gt_answer", where, required=False)
    qid = rec.get("query_id")
    if qid is None:
        raise where.error("field 'query_id' is missing")
    return ImportedRecord(where.line, str(_str(rec, "query", where)),
                          str(_str(rec, "response", where)), str(qid),
                          () if ref is None else (ref,), tuple(texts), tuple(ids))


def _flashrag(rec: Any, where: Where) -> ImportedRecord:
    if not isinstance(rec, dict):
        raise where.error("a record must be an object")
    out = rec.get("output") or {}
    if not isinstance(out, dict):
        raise where.error("field 'output' must be an object")
    pred = out.get("pred", rec.get("pred"))
    if not isinstance(pred, str):
        raise where.error("field 'output.pred' (the answer) must be text")
    docs = out.get("retrieval_result") or []
    if not isinstance(docs, list):
        raise where.error("field 'output.retrieval_result' must be a list")
    texts, ids = [], []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("contents"), str):
            raise where.error(f"output.retrieval_result[{i}] must be an object with "
                              "'contents'")
        texts.append(d["contents"])
        ids.append(None if d.get("id") is None else str(d["id"]))
    golden = rec.get("golden_answers") or []
    if not isinstance(golden, list) or not all(isinstance(g, str) for g in golden):
        raise where.error("field 'golden_answers' must be a list of texts")
    if rec.get("id") is None:
        raise where.error("field 'id' is missing")
    return ImportedRecord(where.line, str(_str(rec, "question", where)), pred, str(rec["id"]),
                          tuple(golden), tuple(texts), tuple(ids))


def read_records(path: str | Path, fmt: str) -> list[ImportedRecord]:
    """Every record of ``path`` in format ``fmt``; ``InputError`` naming file:line. The file
    is UTF-8 (a BOM is dropped, as the dataset readers do); a record id given twice (the
    query text, for Ragas, which has no ids) is refused at the second one's line: the
    matching could only let one of them win."""
    text = read_text(path)  # not found / invalid UTF-8: one line naming file(:line)
    p = Path(path)
    parse = {"ragas": _ragas, "ragchecker": _ragchecker, "flashrag": _flashrag}[fmt]
    try:
        if fmt == "ragchecker" or (fmt == "ragas" and p.suffix == ".json"):
            items = list(_json_list(text, "results" if fmt == "ragchecker" else "samples"))
        else:
            items = list(_lines(text))
        out = [parse(obj, Where(str(p), line)) for line, obj in items]
    except InputError as exc:  # re-aim the message at this file
        raise InputError(p, exc.line, exc.message) from None
    except Exception as exc:
        raise InputError(p, 0, str(exc)) from None
    if not out:
        raise InputError(p, 0, "no records")
    seen: dict[str, int] = {}
    for r in out:
        key = r.query_id if r.query_id is not None else " ".join(r.query.split())
        what = "record id" if r.query_id is not None else "query text"
        if key in seen:
            raise InputError(p, r.line, f"duplicate {what} {key[:60]!r} (first at line "
                                        f"{seen[key]})")
        seen[key] = r.line
    return out
