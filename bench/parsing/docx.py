"""DOCX via python-docx: the body's paragraphs and tables in document order (a heading
style makes a heading block); each table is a block of its rows and a ParsedTable of its
cells. DOCX has no pages (``page`` 0)."""

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


class DocxParser(ParserBase):
    name: ClassVar[str] = "docx"
    types: ClassVar[tuple[str, ...]] = ("docx",)

    def __init__(self) -> None:
        require("docx", "python-docx", "docx")

    def parse_one(self, f: RawFile) -> ParsedDocument:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        document = docx.Document(str(f.path))
        blocks: list[Block] = []
        tables: list[ParsedTable] = []
        # python-docx lists paragraphs and tables apart; the body's children keep their order
        for child in document.element.body.iterchildren():
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "p":
                p = Paragraph(child, document)
                style = p.style.name if p.style is not None else ""
                kind = "heading" if style.startswith(("Heading", "Title")) else (
                    "list" if style.startswith("List") else "paragraph")
                blocks.append(Block(p.text, 0, len(blocks), kind))
            elif tag == "tbl":
                cells = _cells(Table(child, document))
                tables.append(ParsedTable(cells, 0))
                blocks.append(Block("\n".join(" ".join(r) for r in cells), 0, len(blocks),
                                    "table"))
        return from_blocks(f, self.name, blocks, pages=1, tables=tables,
                           empty_reason="the document body has no text")


def _cells(table: Any) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(c.text for c in row.cells) for row in table.rows)
