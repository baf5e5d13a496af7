"""Records and Protocol of the `parsing` stage: raw files in, documents with provenance out.

A raw-document folder (``dataset=raw_docs``, layout in docs/ingestion.md) lists its files in
``manifest.jsonl``; each file goes through the configured parser (``parser=<name>``) in an
isolated worker process (``bench.parsing.pool``) and becomes ONE corpus document whose
``doc_id`` is the manifest's. A parser returns a :class:`ParsedDocument` per file: the text in
reading order, its blocks with provenance (file, page, block index, bounding box where the
parser gives one), the tables it recognised, and a status — ``ok``, ``empty`` (nothing
extracted), ``failed`` (the parser raised: an encrypted or corrupt PDF, an undecodable HTML
file), ``timeout`` / a crash (set by the pool, never by the parser) or ``unsupported`` (a
file the engine cannot read by design: an image-only PDF page given to a text-layer parser),
each with a one-line reason. A file that did not parse stays in the corpus with no text, so
every query whose gold document it was is still evaluated (and loses it).

Adding a parser: a class with a keyword-only constructor (its options; raise
``bench.config.build.OptionError`` for a bad value), the :class:`Parser` members below, a
module of its own in this package and ``conf/parser/<name>.yaml`` naming it in ``_target_``.
``parse`` runs in a worker process: import heavy libraries inside it, raise on a file it
cannot read (the pool turns the exception into ``failed`` with its message) and return
``empty``/``unsupported`` records yourself where you know why.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

#: file types of the manifest's ``type`` column
FILE_TYPES = ("pdf", "html", "docx", "md", "txt", "png", "jpg", "tiff")
IMAGE_TYPES = ("png", "jpg", "tiff")


class ParseStatus(enum.StrEnum):
    """What became of one file."""

    OK = "ok"
    EMPTY = "empty"
    FAILED = "failed"
    TIMEOUT = "timeout"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class RawFile:
    """One manifest row: a file to parse, as the worker sees it."""

    doc_id: str
    path: Path
    type: str
    #: sha256 of the file's bytes (keys the parse cache)
    sha256: str
    n_bytes: int
    layout: str = ""
    source: str = ""
    #: the truth file (``truth/<doc_id>.json``), None where the folder has none
    truth: Path | None = None


@dataclass(frozen=True)
class Block:
    """One text block of a parsed file, in the parser's reading order, with provenance:
    ``page`` 1-based (0 where the format has no pages), ``index`` its position in the file,
    ``bbox`` (x0, y0, x1, y1) in the page's points/pixels where the parser gives one."""

    text: str
    page: int
    index: int
    kind: str = "paragraph"
    bbox: tuple[float, float, float, float] | None = None


@dataclass(frozen=True)
class ParsedTable:
    """A table the parser recognised: its cells row by row and its page."""

    cells: tuple[tuple[str, ...], ...]
    page: int


@dataclass(frozen=True)
class ParsedDocument:
    """One file's parse. ``text`` is the blocks' texts joined by blank lines (what the corpus
    document holds); ``pages`` the pages it read (1 for a page-less format); ``seconds`` the
    parse's wall time in the worker and ``peak_rss_bytes`` the worker's peak RSS after it."""

    doc_id: str
    file: str
    parser: str
    status: ParseStatus
    text: str = ""
    blocks: tuple[Block, ...] = ()
    tables: tuple[ParsedTable, ...] = ()
    reason: str = ""
    pages: int = 0
    seconds: float = 0.0
    peak_rss_bytes: int = 0
    #: the parse came from the cache (the timing is the first parse's)
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "file": self.file, "parser": self.parser,
                "status": str(self.status), "text": self.text, "reason": self.reason,
                "pages": self.pages, "seconds": self.seconds,
                "peak_rss_bytes": self.peak_rss_bytes,
                "blocks": [{"text": b.text, "page": b.page, "index": b.index, "kind": b.kind,
                            "bbox": list(b.bbox) if b.bbox is not None else None}
                           for b in self.blocks],
                "tables": [{"cells": [list(r) for r in t.cells], "page": t.page}
                           for t in self.tables]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ParsedDocument:
        return cls(
            doc_id=obj["doc_id"], file=obj["file"], parser=obj["parser"],
            status=ParseStatus(obj["status"]), text=obj["text"], reason=obj["reason"],
            pages=int(obj["pages"]), seconds=float(obj["seconds"]),
            peak_rss_bytes=int(obj["peak_rss_bytes"]),
            blocks=tuple(Block(b["text"], int(b["page"]), int(b["index"]), b["kind"],
                               tuple(b["bbox"]) if b["bbox"] is not None else None)
                         for b in obj["blocks"]),
            tables=tuple(ParsedTable(tuple(tuple(r) for r in t["cells"]), int(t["page"]))
                         for t in obj["tables"]))


def from_blocks(f: RawFile, parser: str, blocks: Sequence[Block], *, pages: int,
                tables: Sequence[ParsedTable] = (), empty_reason: str = "") -> ParsedDocument:
    """The record of a parse that read ``blocks``: ``ok``, or ``empty`` when no block holds
    text (``empty_reason`` says why where the parser knows)."""
    kept = tuple(b for b in blocks if b.text.strip())
    text = "\n\n".join(b.text.strip() for b in kept)
    if not text:
        return ParsedDocument(f.doc_id, str(f.path), parser, ParseStatus.EMPTY, pages=pages,
                              reason=empty_reason or "the parser extracted no text")
    return ParsedDocument(f.doc_id, str(f.path), parser, ParseStatus.OK, text=text,
                          blocks=kept, tables=tuple(tables), pages=pages)


class Parser(Protocol):
    """Turns raw files into parsed documents, one record per file, in order.

    ``name``: the option's short name (its conf file); ``types``: the manifest file types it
    reads; ``cache_params()``: its semantic options (they key the parse cache with the file's
    content hash, the parser's name and ``version``)."""

    name: ClassVar[str]
    version: ClassVar[str]
    types: ClassVar[tuple[str, ...]]
    #: it reads each row's truth file (the oracle): a row without one is bad input
    needs_truth: ClassVar[bool]

    def cache_params(self) -> dict[str, Any]:
        """The options that change what it extracts."""
        ...

    def parse(self, files: Sequence[RawFile]) -> list[ParsedDocument]:
        """One record per file, same order; raise only for a bug (the pool isolates a file
        whose parse raises and records it ``failed``)."""
        ...


class ParserBase:
    """Shared plumbing of the parsers here: ``parse`` loops ``parse_one`` over the batch
    (each parser's libraries read one file at a time)."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    types: ClassVar[tuple[str, ...]] = ()
    needs_truth: ClassVar[bool] = False

    def cache_params(self) -> dict[str, Any]:
        """No options by default; a parser with options returns them."""
        return {}

    def parse(self, files: Sequence[RawFile]) -> list[ParsedDocument]:
        return [self.parse_one(f) for f in files]

    def parse_one(self, f: RawFile) -> ParsedDocument:
        raise NotImplementedError


def paragraphs(text: str, *, page: int, start: int = 0, kind: str = "paragraph"
               ) -> list[Block]:
    """Blocks of plain text split at blank lines (a page's text layer, a text file)."""
    out: list[Block] = []
    for part in text.replace("\r\n", "\n").split("\n\n"):
        if part.strip():
            out.append(Block(part.strip(), page, start + len(out), kind))
    return out


def require(module: str, package: str, option: str) -> None:
    """One line naming the extra when a parser's library is not installed — when the option
    is built, before any work (the parse itself imports it in the worker)."""
    import importlib.util

    from bench.errors import MissingDependencyError

    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(package, "ingest", f"parser={option}")
