"""Documents held as Arrow columns: a corpus of millions without a Python object per document.

``DocumentTable`` is a ``Sequence[Document]`` over a ``pyarrow.Table`` with the columns of
``DOCUMENT_SCHEMA`` (``doc_id``, ``title``, ``text``); every other ``Document`` field takes
its default (a corpus with tags, roles or tenants stays a tuple of ``Document``). It builds a
``Document`` when one is asked for (an index, a slice, an iteration: one block of rows at a
time), so code that reads documents one by one works unchanged, and the corpus costs its
strings' bytes (about 230 bytes a passage of MS MARCO's size, against about 520 as Python
objects: 10M passages in 2.3 instead of 5.2 GB).

``dataset=scale`` and ``dataset=beir`` load into one. Equality is by value with any sequence
of documents: a table equals the tuple of the same documents.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import pyarrow as pa

from bench.data.base import Document

DOCUMENT_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("title", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
])

#: rows turned into ``Document`` objects at a time when iterating
ITER_BLOCK = 65_536


class DocumentTable(Sequence[Document]):
    """A read-only sequence of documents over Arrow columns (module docstring)."""

    __slots__ = ("_batches", "_starts", "_table", "_title_in_text")

    def __init__(self, table: pa.Table, *, title_in_text: bool = False) -> None:
        if not table.schema.equals(DOCUMENT_SCHEMA):
            table = table.select(DOCUMENT_SCHEMA.names).cast(DOCUMENT_SCHEMA)
        self._table = table
        self._title_in_text = bool(title_in_text)
        # one row by its batch (zero-copy views): ~4 us a document, not a slice's ~10 us
        self._batches = [(b.column(0), b.column(1), b.column(2)) for b in table.to_batches()]
        self._starts = _starts(len(b[0]) for b in self._batches)

    @classmethod
    def of(cls, documents: Sequence[Document]) -> DocumentTable:
        """The table of ``documents``, which must carry no field but id, title and text
        (and one ``title_in_text`` for all)."""
        flags = {d.title_in_text for d in documents}
        extra = [d.doc_id for d in documents
                 if d.tags or d.allowed_roles or d.tenant][:1]
        if extra or len(flags) > 1:
            raise ValueError("a DocumentTable holds id, title and text only (and one "
                             f"title_in_text); {extra[0] if extra else 'title_in_text'} "
                             "differs")
        return cls(pa.table({"doc_id": [d.doc_id for d in documents],
                             "title": [d.title for d in documents],
                             "text": [d.text for d in documents]}, schema=DOCUMENT_SCHEMA),
                   title_in_text=flags.pop() if flags else False)

    @property
    def arrow(self) -> pa.Table:
        return self._table

    @property
    def doc_ids(self) -> list[str]:
        """Every document's id, in row order (one column read, no ``Document`` built)."""
        return self._table.column("doc_id").to_pylist()  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return self._table.num_rows

    def fingerprint_rows(self) -> Iterator[list[object]]:
        """``bench.data.base.fingerprint_fields`` of every document, from the columns (no
        ``Document`` built): the same lists, so the same fingerprint as the tuple's."""
        flag = ["title_in_text"] if self._title_in_text else []
        for start in range(0, len(self), ITER_BLOCK):
            part = self._table.slice(start, ITER_BLOCK)
            for i, t, x in zip(part.column("doc_id").to_pylist(),
                               part.column("title").to_pylist(),
                               part.column("text").to_pylist(), strict=True):
                yield [i, t, x, (), (), "", *flag]

    def _rows(self, start: int, stop: int) -> tuple[Document, ...]:
        part = self._table.slice(start, max(0, stop - start))
        flag = self._title_in_text
        return tuple(Document(doc_id=i, text=x, title=t, title_in_text=flag) for i, t, x in
                     zip(part.column("doc_id").to_pylist(), part.column("title").to_pylist(),
                         part.column("text").to_pylist(), strict=True))

    @overload
    def __getitem__(self, i: int) -> Document: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Document, ...]: ...

    def __getitem__(self, i: int | slice) -> Document | tuple[Document, ...]:
        n = len(self)
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step == 1:
                return self._rows(start, stop)
            return tuple(self[j] for j in range(start, stop, step))
        k, r = _locate(self._starts, i, n)
        ids, titles, texts = self._batches[k]
        return Document(doc_id=ids[r].as_py(), text=texts[r].as_py(), title=titles[r].as_py(),
                        title_in_text=self._title_in_text)

    def __iter__(self) -> Iterator[Document]:
        for start in range(0, len(self), ITER_BLOCK):
            yield from self._rows(start, start + ITER_BLOCK)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DocumentTable):
            return self._title_in_text == other._title_in_text and \
                self._table.equals(other._table)
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in
                                                   zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash((len(self), self._title_in_text))

    def __repr__(self) -> str:
        return f"DocumentTable({len(self):,} documents)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self._table, self._title_in_text))


def _restore(table: pa.Table, title_in_text: bool) -> DocumentTable:
    return DocumentTable(table, title_in_text=title_in_text)


def _locate(starts: list[int], i: int, n: int) -> tuple[int, int]:
    """(piece, row in it) of row ``i`` (negative: from the end) of ``n`` rows cut into
    pieces starting at ``starts``."""
    j = i.__index__()
    if j < 0:
        j += n
    if not 0 <= j < n:
        raise IndexError(f"row {i} out of range ({n} rows)")
    k = bisect.bisect_right(starts, j) - 1
    return k, j - starts[k]


def _starts(lengths: Iterable[int]) -> list[int]:
    """The first row of each piece, for a bisect from a row to its piece."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out[:-1]


class TextColumn(Sequence[str]):
    """A read-only sequence of the strings of an Arrow string column (a memory-mapped one
    costs no heap: ``ChunkTable.load``), each built when asked for; slices and iteration
    convert one block at a time. Equal by value to any sequence of the same strings."""

    __slots__ = ("_chunks", "_col", "_starts")

    def __init__(self, column: pa.ChunkedArray | pa.Array) -> None:
        self._col = column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])
        self._chunks = self._col.chunks
        self._starts = _starts(len(c) for c in self._chunks)

    def __len__(self) -> int:
        return len(self._col)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        n = len(self)
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step == 1:
                return self._col.slice(start, max(0, stop - start)).to_pylist()  # type: ignore[no-any-return]
            return [self[j] for j in range(start, stop, step)]
        k, r = _locate(self._starts, i, n)
        return self._chunks[k][r].as_py()  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), ITER_BLOCK):
            yield from self[start : start + ITER_BLOCK]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TextColumn):
            return self._col.equals(other._col)
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in
                                                   zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(len(self))

    def __repr__(self) -> str:
        return f"TextColumn({len(self):,} strings)"
