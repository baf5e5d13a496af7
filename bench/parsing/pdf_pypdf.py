"""PDF text layer via pypdf: one block per blank-line-separated paragraph of each page's
extracted text (pypdf gives no positions, so no bounding boxes)."""

from __future__ import annotations

from typing import Any, ClassVar

from bench.config.build import OptionError
from bench.parsing.base import (
    Block,
    ParsedDocument,
    ParserBase,
    RawFile,
    from_blocks,
    paragraphs,
    require,
)
from bench.parsing.pdf_common import empty_pdf_reason, open_pdf_checked


class PypdfParser(ParserBase):
    """``extraction_mode``: pypdf's ``plain`` (default) or ``layout`` (keeps the page's
    horizontal layout: columns side by side)."""

    name: ClassVar[str] = "pypdf"
    types: ClassVar[tuple[str, ...]] = ("pdf",)

    def __init__(self, *, extraction_mode: str = "plain") -> None:
        if extraction_mode not in ("plain", "layout"):
            raise OptionError("extraction_mode", f"must be plain or layout, got "
                                                 f"{extraction_mode!r}")
        require("pypdf", "pypdf", "pypdf")
        self.extraction_mode = extraction_mode

    def cache_params(self) -> dict[str, Any]:
        return {"extraction_mode": self.extraction_mode}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        reader = open_pdf_checked(f.path)
        blocks: list[Block] = []
        for i, page in enumerate(reader.pages, start=1):
            text = page.extract_text(extraction_mode=self.extraction_mode) or ""
            blocks += paragraphs(text, page=i, start=len(blocks))
        return from_blocks(f, self.name, blocks, pages=len(reader.pages),
                           empty_reason=empty_pdf_reason(reader))
