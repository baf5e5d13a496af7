"""Read TREC runs and qrels (TREC or BEIR TSV) into ``Run`` / ``Qrels``.

Fast path: pyarrow's multi-threaded CSV reader, then vectorised grouping; no Python loop over
lines. Anything it cannot read (odd whitespace, a bad row) goes to a line-by-line scan that
either reads the file (whitespace-separated columns are valid TREC) or raises ``InputError``
naming ``file:line``. :func:`locate_duplicate` finds the line of a repeat the engine reports.

Formats: run ``qid Q0 docid rank score tag``; qrels ``qid 0 docid rel`` (TREC) or
``query-id<TAB>corpus-id<TAB>score`` with a header line (BEIR), told apart by the first line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from bench.errors import InputError
from bench.metrics.base import Qrels, Run
from bench_kernels import api

QrelsFormat = Literal["trec", "beir"]
_RUN_COLUMNS = "qid Q0 docid rank score tag"


class _FastPathFailed(Exception):
    """The fast reader cannot read this file; the line scan decides what is wrong."""


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, stripped text) of non-empty lines; bad UTF-8 is an input error."""
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise InputError(path, n, "line is not valid UTF-8") from None
            if text:
                yield n, text


def _first_line(path: Path) -> tuple[int, str]:
    for n, text in _lines(path):
        return n, text
    raise InputError(path, 0, "file is empty")


def _ids_to_bytes(col: pa.ChunkedArray) -> np.ndarray:
    """A string column as a numpy ``S`` array (UTF-8 bytes, so byte order = trec_eval's)."""
    chunks = [c.cast(pa.string()) if c.type != pa.string() else c for c in col.chunks]
    width = 1
    for c in chunks:
        if len(c):
            width = max(width, int(np.max(np.diff(_offsets(c)))))
    out = np.zeros((len(col), width), dtype=np.uint8)
    row = 0
    for c in chunks:
        if len(c):
            offsets = _offsets(c)
            data = np.frombuffer(c.buffers()[2], dtype=np.uint8)
            api.pack_ids(data, offsets, out, row)
            row += len(c)
    return out.view(f"S{width}").reshape(-1)


def _offsets(c: pa.Array) -> np.ndarray:
    raw = np.frombuffer(c.buffers()[1], dtype=np.int32)
    return raw[c.offset : c.offset + len(c) + 1].astype(np.int64)


def _group(qids: pa.ChunkedArray, *cols: np.ndarray) -> tuple[tuple[str, ...], np.ndarray, list]:
    """CSR by query in first-seen order; rows of a query keep their file order."""
    col = qids.combine_chunks()
    if len(col):
        # usual case: each query's rows are contiguous; one pass finds where the id changes
        starts = api.segment_starts(np.frombuffer(col.buffers()[2], dtype=np.uint8),
                                    _offsets(col))
        names = tuple(col.take(pa.array(starts)).to_pylist())
        if len(set(names)) == len(names):
            return names, np.append(starts, len(col)).astype(np.int64), list(cols)
    enc = col.dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    names = tuple(enc.dictionary.to_pylist())
    # dictionary codes follow first appearance: a stable sort by code groups the queries
    order = np.argsort(codes, kind="stable")
    offsets = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=len(names)), out=offsets[1:])
    return names, offsets, [c[order] for c in cols]


def _arrow_table(path: Path, delimiter: str, skip_rows: int, names: list[str],
                 types: dict[str, pa.DataType]) -> pa.Table:
    try:
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=skip_rows),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, double_quote=False, escape_char=False,
                newlines_in_values=False, ignore_empty_lines=True,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=list(types), null_values=[],
                strings_can_be_null=False, check_utf8=True,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as err:
        raise _FastPathFailed(str(err)) from None


def read_run(path: str | Path) -> Run:
    """A TREC run file as a ``Run`` with float64 scores (ranking order is the engine's job)."""
    path = Path(path)
    _first_line(path)
    try:
        names = ["qid", "q0", "docid", "rank", "score", "tag"]
        table = _arrow_table(path, " ", 0, names, {
            "qid": pa.string(), "docid": pa.string(), "score": pa.float64()})
        scores = table.column("score").to_numpy()
        if np.isnan(scores).any():
            raise _FastPathFailed("NaN score")
        query_ids, offsets, (docs, scores) = _group(
            table.column("qid"), _ids_to_bytes(table.column("docid")), scores)
        return Run(query_ids, offsets, docs, scores)
    except _FastPathFailed:
        return _scan_run(path)


def _number(path: Path, n: int, token: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise InputError(path, n, f"{what} {token!r} is not a number") from None
    if math.isnan(value):
        raise InputError(path, n, f"{what} is NaN")
    return value


def _scan_run(path: Path) -> Run:
    """Line-by-line reader: whitespace-separated columns; first bad line -> InputError."""
    by_query: dict[str, dict[str, tuple[float, int]]] = {}
    for n, text in _lines(path):
        fields = text.split()
        if len(fields) != 6:
            raise InputError(path, n, f"expected 6 columns ({_RUN_COLUMNS}), found {len(fields)}")
        qid, _, doc, _, score, _ = fields
        value = _number(path, n, score, "score")
        ranking = by_query.setdefault(qid, {})
        if doc in ranking:
            first = ranking[doc][1]
            raise InputError(path, n, f"doc {doc!r} appears twice for query {qid!r} "
                                      f"(first on line {first})")
        ranking[doc] = (value, n)
    return Run.from_mapping({q: {d: s for d, (s, _) in r.items()} for q, r in by_query.items()})


def detect_qrels_format(path: str | Path) -> tuple[QrelsFormat, bool]:
    """(format, has_header) from the first non-empty line: 4 columns = TREC, 3 = BEIR."""
    path = Path(path)
    n, text = _first_line(path)
    fields = text.split("\t") if "\t" in text else text.split()
    if len(fields) == 4:
        return "trec", False
    if len(fields) == 3:
        try:
            int(fields[2])
        except ValueError:
            return "beir", True
        return "beir", False
    raise InputError(path, n, f"expected 4 columns (qid 0 docid rel) or 3 (query-id corpus-id "
                              f"score), found {len(fields)}")


def read_qrels(path: str | Path) -> Qrels:
    """TREC (``qid 0 docid rel``) or BEIR TSV (``query-id corpus-id score``, header) qrels."""
    path = Path(path)
    fmt, header = detect_qrels_format(path)
    try:
        if fmt == "trec":
            names = ["qid", "iter", "docid", "rel"]
            delimiter = "\t" if "\t" in _first_line(path)[1] else " "
        else:
            names = ["qid", "docid", "rel"]
            delimiter = "\t"
        table = _arrow_table(path, delimiter, int(header), names, {
            "qid": pa.string(), "docid": pa.string(), "rel": pa.int64()})
        if len(table) == 0:
            raise _FastPathFailed("no rows")
        rels = table.column("rel").to_numpy()
        if np.any(np.abs(rels) >= 2**31):
            raise _FastPathFailed("grade out of int32 range")
        query_ids, offsets, (docs, rels) = _group(
            table.column("qid"), _ids_to_bytes(table.column("docid")), rels)
        return Qrels(query_ids, offsets, docs, rels.astype(np.int32))
    except _FastPathFailed:
        return _scan_qrels(path, fmt, header)


def _scan_qrels(path: Path, fmt: QrelsFormat, header: bool) -> Qrels:
    ncols = 4 if fmt == "trec" else 3
    layout = "qid 0 docid rel" if fmt == "trec" else "query-id corpus-id score"
    by_query: dict[str, dict[str, tuple[int, int]]] = {}
    lines = _lines(path)
    if header:
        next(lines)
    for n, text in lines:
        fields = text.split("\t") if fmt == "beir" else text.split()
        if len(fields) != ncols:
            raise InputError(path, n, f"expected {ncols} columns ({layout}), found {len(fields)}")
        qid, doc, grade = fields[0], fields[-2], fields[-1]
        try:
            rel = int(grade)
        except ValueError:
            raise InputError(path, n, f"relevance {grade!r} is not an integer") from None
        if abs(rel) >= 2**31:
            raise InputError(path, n, f"relevance {rel} is out of range")
        judged = by_query.setdefault(qid, {})
        if doc in judged:
            raise InputError(path, n, f"doc {doc!r} is judged twice for query {qid!r} "
                                      f"(first on line {judged[doc][1]})")
        judged[doc] = (rel, n)
    if not by_query:
        raise InputError(path, 0, "file holds no judgements")
    return Qrels.from_mapping({q: {d: r for d, (r, _) in j.items()} for q, j in by_query.items()})


def locate_duplicate(path: str | Path, kind: Literal["run", "qrels"]) -> InputError | None:
    """The InputError (with its line) the line scan raises for ``path``, or None if clean."""
    path = Path(path)
    try:
        if kind == "run":
            _scan_run(path)
        else:
            _scan_qrels(path, *detect_qrels_format(path))
    except InputError as err:
        return err
    return None
