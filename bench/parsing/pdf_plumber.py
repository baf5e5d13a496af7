"""PDF text layer via pdfplumber (on pdfminer.six): page text as blocks, and the tables its
ruling-line detection finds, cell by cell."""

from __future__ import annotations

from typing import Any, ClassVar

from bench.parsing.base import (
    Block,
    ParsedDocument,
    ParsedTable,
    ParserBase,
    RawFile,
    from_blocks,
    paragraphs,
    require,
)
from bench.parsing.pdf_common import check_pdf, empty_pdf_reason, open_pdf_checked


class PdfplumberParser(ParserBase):
    """``tables``: also extract tables (``page.extract_tables()``) into the record."""

    name: ClassVar[str] = "pdfplumber"
    types: ClassVar[tuple[str, ...]] = ("pdf",)

    def __init__(self, *, tables: bool = True) -> None:
        require("pdfplumber", "pdfplumber", "pdfplumber")
        require("pypdf", "pypdf", "pdfplumber")  # the encrypted / corrupt check
        self.tables = tables

    def cache_params(self) -> dict[str, Any]:
        return {"tables": self.tables}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        import pdfplumber

        check_pdf(f.path)
        blocks: list[Block] = []
        tables: list[ParsedTable] = []
        with pdfplumber.open(str(f.path)) as pdf:
            n_pages = len(pdf.pages)
            for i, page in enumerate(pdf.pages, start=1):
                blocks += paragraphs(page.extract_text() or "", page=i, start=len(blocks))
                if self.tables:
                    for t in page.extract_tables():
                        tables.append(ParsedTable(
                            tuple(tuple("" if c is None else str(c) for c in row) for row in t),
                            i))
        return from_blocks(f, self.name, blocks, pages=n_pages, tables=tables,
                           empty_reason=empty_pdf_reason(open_pdf_checked(f.path)))
