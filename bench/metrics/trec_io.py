"""Read TREC runs and qrels (TREC or BEIR TSV) into ``Run`` / ``Qrels``.

TREC files are read as trec_eval reads them (``get_trec_results.c``, ``get_qrels.c``): columns
separated by any run of C whitespace (spaces, tabs, ``\r``...), blank lines and comment lines
(first non-blank character ``#``) skipped, a run line's columns after the sixth ignored, a
qrels line holding exactly four. The reader is one numba scan of the memory-mapped file in
parallel pieces (count the lines, then per line copy the doc id into a fixed-width row, as
wide as the longest id, and parse the number) with no Python loop over lines and no
per-line spans kept; a score it cannot parse exactly (rare spellings) is parsed by Python.
Bad input raises ``InputError`` naming ``file:line``. :func:`locate_duplicate` finds the line
of a repeat the engine reports.

Formats: run ``qid Q0 docid rank score tag``; qrels ``qid 0 docid rel`` (TREC) or
``query-id<TAB>corpus-id<TAB>score`` with a header line (BEIR), told apart by the first line
(BEIR TSV goes through pyarrow's CSV reader).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from bench.errors import InputError
from bench.metrics.base import Qrels, Run
from bench_kernels import api

if TYPE_CHECKING:
    import pyarrow as pa

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
        if not text.startswith("#"):
            return n, text
    raise InputError(path, 0, "file is empty")


def _one_chunk(col: pa.ChunkedArray) -> pa.Array:
    """A string column as one array (64-bit offsets past 2 GiB of text)."""
    import pyarrow as pa  # only BEIR TSV qrels go through arrow: keep it off the TREC path
    if col.num_chunks == 1:
        return col.chunk(0)
    if sum(c.buffers()[2].size if c.buffers()[2] is not None else 0 for c in col.chunks) \
            >= 2**31 - 1:
        col = col.cast(pa.large_string())
    return col.combine_chunks()


def _ids_to_bytes(arr: pa.Array) -> np.ndarray:
    """A string array as a numpy ``S`` array (UTF-8 bytes, so byte order = trec_eval's).

    One packing pass over the whole column: this is the hot loop of reading a big run.
    """
    if len(arr) == 0:
        return np.zeros(0, dtype="S1")
    offsets = _offsets(arr)
    width = max(1, int(np.max(np.diff(offsets))))
    out = np.empty((len(arr), width), dtype=np.uint8)  # pack_ids writes every byte
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    api.pack_ids(data, offsets, out, 0)
    return out.view(f"S{width}").reshape(-1)


def _offsets(c: pa.Array) -> np.ndarray:
    import pyarrow as pa

    kind = np.int64 if pa.types.is_large_string(c.type) else np.int32
    raw = np.frombuffer(c.buffers()[1], dtype=kind)
    return raw[c.offset : c.offset + len(c) + 1]


def _group(col: pa.Array, *cols: np.ndarray) -> tuple[tuple[str, ...], np.ndarray, list]:
    """CSR by query in first-seen order; rows of a query keep their file order."""
    import pyarrow as pa

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
    import pyarrow as pa
    import pyarrow.csv as pacsv

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


def _read_bytes(path: Path) -> np.ndarray:
    """The file's bytes, memory-mapped (copy-on-write: writeable for numba, never copied)."""
    if path.stat().st_size == 0:
        raise InputError(path, 0, "file is empty")
    return np.memmap(path, dtype=np.uint8, mode="c")


def _line_of(buf: np.ndarray, pos: int) -> int:
    return int(np.count_nonzero(buf[:pos] == 10)) + 1


def _check_utf8(path: Path, buf: np.ndarray) -> None:
    try:
        buf.tobytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(path, _line_of(buf, err.start), "line is not valid UTF-8") from None


def _parse_trec(path: Path, *, min_cols: int, max_cols: int, num_col: int, as_int: bool,
                layout: str, what: str, check_col: int = -1
                ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """(query ids, offsets, packed doc ids, numbers) of a TREC run or qrels file."""
    buf = _read_bytes(path)
    (ids, _, vals, ok, seg_row, seg_s, seg_n, n, nseg, bad_line, found, nonascii
     ) = api.scan_trec_lines(buf, min_cols, max_cols, 0, 2, num_col, as_int, check_col)
    if bad_line and found == -2:
        raise InputError(path, bad_line, "line holds a NUL byte")
    if bad_line and found == -1:
        raise InputError(path, bad_line, f"column {check_col + 1} ({layout.split()[check_col]}) "
                                         "is not a number: does a doc id hold whitespace?")
    if bad_line:
        want = f"{min_cols}" if max_cols == min_cols else f"at least {min_cols}"
        raise InputError(path, bad_line, f"expected {want} columns ({layout}), found {found}")
    if n == 0:
        raise InputError(path, 0, "file holds no rows (only blank or comment lines)")
    if nonascii:
        _check_utf8(path, buf)
    vals = vals[:n]
    docs = ids[:n].view(f"S{ids.shape[1]}").reshape(-1)
    for i in np.flatnonzero(~ok[:n]):  # rare spellings ("1e400", "inf", 20 digits)
        vals[i] = _number_at(path, buf, int(vals[i]), what, as_int)
    keys = api.pack_spans(buf, seg_s[:nseg], seg_n[:nseg], int(seg_n[:nseg].max()))
    names = _decode(keys, nonascii)
    if len(set(names)) == len(names):  # usual case: each query's rows are contiguous
        return names, np.append(seg_row[:nseg], n).astype(np.int64), docs, vals
    # a query's rows are split: group by key, queries in first-seen order, rows in file order
    key_rows = api.scan_trec_lines(buf, min_cols, max_cols, 0, 0, -1, False, -1)[0]
    all_keys = key_rows[:n].view(f"S{key_rows.shape[1]}").reshape(-1)
    uniq, first, codes = np.unique(all_keys, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank_of = np.empty_like(by_first)
    rank_of[by_first] = np.arange(len(uniq))
    codes = rank_of[codes.reshape(-1)]
    order = np.argsort(codes, kind="stable")
    offsets = np.zeros(len(uniq) + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=len(uniq)), out=offsets[1:])
    names = _decode(uniq[by_first], nonascii)
    return names, offsets, docs[order], vals[order]


def _decode(ids: np.ndarray, nonascii: bool) -> tuple[str, ...]:
    """A numpy ``S`` array as str; an all-ASCII file takes numpy's C cast (~4x faster)."""
    if nonascii:
        return tuple(np.char.decode(ids, "utf-8").tolist())
    return tuple(ids.astype(f"U{ids.dtype.itemsize}").tolist())


def _number_at(path: Path, buf: np.ndarray, pos: int, what: str, as_int: bool) -> float:
    """The number whose token starts at byte ``pos`` (the line is counted only for an error)."""
    end = pos
    while end < buf.shape[0] and not (buf[end] == 32 or 9 <= buf[end] <= 13):
        end += 1
    token = bytes(buf[pos:end]).decode("utf-8")
    try:
        return _number(path, 0, token, what, as_int)
    except InputError:
        return _number(path, _line_of(buf, pos), token, what, as_int)


def read_run(path: str | Path) -> Run:
    """A TREC run file as a ``Run`` with float64 scores (ranking order is the engine's job)."""
    path = Path(path)
    query_ids, offsets, docs, scores = _parse_trec(
        path, min_cols=6, max_cols=0, num_col=4, as_int=False, layout=_RUN_COLUMNS,
        what="score", check_col=3)
    return Run(query_ids, offsets, docs, scores)


def _number(path: Path, n: int, token: str, what: str, as_int: bool = False) -> float:
    try:
        value = float(int(token)) if as_int else float(token)
    except ValueError:
        kind = "an integer" if as_int else "a number"
        raise InputError(path, n, f"{what} {token!r} is not {kind}") from None
    if math.isnan(value):
        raise InputError(path, n, f"{what} is NaN")
    if as_int and abs(value) >= 2**31:
        raise InputError(path, n, f"{what} {token} is out of range")
    return value


def _fields(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, columns) of each data line, split as trec_eval splits (C whitespace)."""
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            parts = raw.split()
            if not parts or parts[0].startswith(b"#"):
                continue
            try:
                yield n, [p.decode("utf-8") for p in parts]
            except UnicodeDecodeError:
                raise InputError(path, n, "line is not valid UTF-8") from None


def _scan_run(path: Path) -> Run:
    """Line-by-line reader (slow; finds the line of a repeated doc): first bad line raises."""
    by_query: dict[str, dict[str, tuple[float, int]]] = {}
    for n, fields in _fields(path):
        if len(fields) < 6:
            raise InputError(path, n, f"expected at least 6 columns ({_RUN_COLUMNS}), "
                                      f"found {len(fields)}")
        qid, _, doc, _, score = fields[:5]
        value = _number(path, n, score, "score")
        ranking = by_query.setdefault(qid, {})
        if doc in ranking:
            first = ranking[doc][1]
            raise InputError(path, n, f"doc {doc!r} appears twice for query {qid!r} "
                                      f"(first on line {first})")
        ranking[doc] = (value, n)
    return Run.from_mapping({q: {d: s for d, (s, _) in r.items()} for q, r in by_query.items()})


def _iteration_column(token: str) -> bool:
    """Whether ``token`` reads as a TREC qrels iteration column (``0``, any integer, ``Q0``)."""
    return token == "Q0" or token.lstrip("+-").isdigit()


def detect_qrels_format(path: str | Path) -> tuple[QrelsFormat, bool]:
    """(format, has_header) from the first non-empty line: 4 columns = TREC, 3 = BEIR.

    TREC columns are split on any whitespace mix, as trec_eval splits them (``q1<TAB>0 d1 1``
    is TREC). BEIR TSV is tab-separated and its ids may hold spaces, so a line of three tab
    columns is BEIR unless its four whitespace columns read as TREC (an integer or ``Q0``
    iteration column): ``q1<TAB>doc one<TAB>1`` is BEIR.
    """
    path = Path(path)
    n, text = _first_line(path)
    words = text.split()
    tabbed = text.split("\t")
    if len(words) == 4 and (len(tabbed) != 3 or _iteration_column(words[1])):
        return "trec", False
    fields = tabbed if len(tabbed) == 3 else words
    if len(fields) == 3:
        try:
            int(fields[2])
        except ValueError:
            return "beir", True
        return "beir", False
    raise InputError(path, n, f"expected 4 columns (qid 0 docid rel) or 3 (query-id corpus-id "
                              f"score), found {len(words)}")


def read_qrels(path: str | Path) -> Qrels:
    """TREC (``qid 0 docid rel``) or BEIR TSV (``query-id corpus-id score``, header) qrels."""
    path = Path(path)
    fmt, header = detect_qrels_format(path)
    if fmt == "trec":
        query_ids, offsets, docs, rels = _parse_trec(
            path, min_cols=4, max_cols=4, num_col=3, as_int=True, layout="qid 0 docid rel",
            what="relevance")
        return Qrels(query_ids, offsets, docs, rels.astype(np.int32))
    import pyarrow as pa

    try:
        names = ["qid", "docid", "rel"]
        table = _arrow_table(path, "\t", int(header), names, {
            "qid": pa.string(), "docid": pa.string(), "rel": pa.int64()})
        if len(table) == 0:
            raise _FastPathFailed("no rows")
        rels = table.column("rel").to_numpy()
        if np.any(np.abs(rels) >= 2**31):
            raise _FastPathFailed("grade out of int32 range")
        query_ids, offsets, (docs, rels) = _group(
            _one_chunk(table.column("qid")), _ids_to_bytes(_one_chunk(table.column("docid"))),
            rels)
        return Qrels(query_ids, offsets, docs, rels.astype(np.int32))
    except _FastPathFailed:
        return _scan_qrels(path, fmt, header)


def _scan_qrels(path: Path, fmt: QrelsFormat, header: bool) -> Qrels:
    ncols = 4 if fmt == "trec" else 3
    layout = "qid 0 docid rel" if fmt == "trec" else "query-id corpus-id score"
    by_query: dict[str, dict[str, tuple[int, int]]] = {}
    lines: Iterator[tuple[int, list[str]]]
    if fmt == "beir":
        lines = ((n, text.split("\t")) for n, text in _lines(path))
        if header:
            next(lines)
    else:
        lines = _fields(path)
    for n, fields in lines:
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


def run_tag(path: str | Path) -> str | None:
    """The run tag (sixth column) of the file's last data line, as trec_eval's ``runid``."""
    path = Path(path)
    with path.open("rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 65536))
        tail = fh.read()
    for raw in reversed(tail.splitlines()):
        parts = raw.split()
        if parts and not parts[0].startswith(b"#"):
            return parts[5].decode("utf-8", "replace") if len(parts) >= 6 else None
    return None
