"""PDF, HTML and DOCX to Markdown via Microsoft's markitdown, as blocks
(``bench.parsing.markdown_blocks``).

What markitdown gives: Markdown text and nothing else — no boxes, no block ids. PDF pages are
recovered from the form feeds its pdfminer text carries between pages (``page`` 1..n); where
its pdfplumber form path ran instead (no form feeds, or not one per page) the blocks have
``page`` 0 (unknown). HTML goes through its markdownify converter (everything in ``<body>``
but scripts and styles: no main-content extraction), DOCX through mammoth. Tables are
Markdown pipe tables (HTML and DOCX; its PDF path finds tables only on form-like pages).

Each file goes to the converter of its manifest type, not through ``MarkItDown.convert``'s
guessing: that one falls back to reading a corrupt DOCX as plain text (its zip bytes as the
document, status ``ok``); here it is ``failed`` with the converter's reason. HTML is decoded
by ``bench.parsing.encoding`` first, so an undeclared non-UTF-8 page fails as it does for
the other HTML parsers.
"""

from __future__ import annotations

from typing import Any, ClassVar

from bench.parsing.base import (
    Block,
    ParsedDocument,
    ParsedTable,
    ParserBase,
    RawFile,
    from_blocks,
    require,
)
from bench.parsing.encoding import decode_text
from bench.parsing.markdown_blocks import markdown_blocks
from bench.parsing.pdf_common import check_pdf, empty_pdf_reason, open_pdf_checked


class MarkitdownParser(ParserBase):
    """``plain``: drop the Markdown inline markup a reader does not see (link targets,
    emphasis, backticks); false keeps markitdown's Markdown verbatim in the blocks."""

    name: ClassVar[str] = "markitdown"
    types: ClassVar[tuple[str, ...]] = ("pdf", "html", "docx")

    def __init__(self, *, plain: bool = True) -> None:
        require("markitdown", "markitdown[pdf,docx]", "markitdown")
        require("mammoth", "markitdown[pdf,docx]", "markitdown")  # its DOCX converter
        self.plain = plain

    def cache_params(self) -> dict[str, Any]:
        return {"plain": self.plain}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        import io

        from markitdown import StreamInfo
        from markitdown.converters import DocxConverter, HtmlConverter, PdfConverter

        reader = None
        converter: Any
        if f.type == "pdf":  # the same encrypted / corrupt reasons as the other PDF parsers
            check_pdf(f.path)
            reader = open_pdf_checked(f.path)
            data, converter, info = f.path.read_bytes(), PdfConverter(), StreamInfo(
                extension=".pdf", mimetype="application/pdf")
        elif f.type == "html":
            data = decode_text(f.path.read_bytes(), html=True).encode("utf-8")
            converter, info = HtmlConverter(), StreamInfo(extension=".html", charset="utf-8",
                                                          mimetype="text/html")
        else:
            data, converter, info = f.path.read_bytes(), DocxConverter(), StreamInfo(
                extension=".docx")
        markdown = converter.convert(io.BytesIO(data), info).markdown or ""
        blocks: list[Block] = []
        tables: list[ParsedTable] = []
        if reader is None:
            blocks, tables = markdown_blocks(markdown, page=0, plain=self.plain)
            return from_blocks(f, self.name, blocks, pages=1, tables=tables,
                               empty_reason="markitdown returned no text")
        n_pages = len(reader.pages)
        parts = markdown.split("\f")
        if parts and not parts[-1].strip():
            parts = parts[:-1]
        paged = len(parts) == n_pages
        for i, part in enumerate(parts if paged else [markdown], start=1):
            b, t = markdown_blocks(part.replace("\f", "\n\n"), page=i if paged else 0,
                                   start=len(blocks), plain=self.plain)
            blocks += b
            tables += t
        return from_blocks(f, self.name, blocks, pages=n_pages, tables=tables,
                           empty_reason=empty_pdf_reason(reader))
