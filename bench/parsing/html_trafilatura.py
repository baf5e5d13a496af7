"""HTML main-content extraction via trafilatura: navigation, footers and other boilerplate
removed; one block per line of its text output (a paragraph, heading, list item or table
row)."""

from __future__ import annotations

from typing import Any, ClassVar

from bench.parsing.base import Block, ParsedDocument, ParserBase, RawFile, from_blocks, require
from bench.parsing.encoding import decode_text


class TrafilaturaParser(ParserBase):
    """``favor``: trafilatura's ``precision`` | ``recall`` | ``balanced`` trade-off;
    ``tables``: keep table text."""

    name: ClassVar[str] = "trafilatura"
    types: ClassVar[tuple[str, ...]] = ("html",)

    def __init__(self, *, favor: str = "balanced", tables: bool = True) -> None:
        from bench.config.build import OptionError

        if favor not in ("precision", "recall", "balanced"):
            raise OptionError("favor", f"must be precision, recall or balanced, got {favor!r}")
        require("trafilatura", "trafilatura", "trafilatura")
        require("lxml_html_clean", "lxml_html_clean", "trafilatura")
        self.favor = favor
        self.tables = tables

    def cache_params(self) -> dict[str, Any]:
        return {"favor": self.favor, "tables": self.tables}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        import trafilatura

        html = decode_text(f.path.read_bytes(), html=True)
        text = trafilatura.extract(html, include_tables=self.tables, include_comments=False,
                                   favor_precision=self.favor == "precision",
                                   favor_recall=self.favor == "recall",
                                   deduplicate=False, with_metadata=False) or ""
        blocks = [Block(line.strip(), 0, i) for i, line in
                  enumerate(ln for ln in text.splitlines() if ln.strip())]
        return from_blocks(f, self.name, blocks, pages=1,
                           empty_reason="trafilatura found no main content")
