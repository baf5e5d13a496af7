"""PDF text layer via pdfminer.six: one block per text box of its layout analysis, with the
box's bounding box (PDF points, origin bottom-left) and page."""

from __future__ import annotations

from typing import Any, ClassVar

from bench.config.build import OptionError
from bench.parsing.base import Block, ParsedDocument, ParserBase, RawFile, from_blocks, require
from bench.parsing.pdf_common import check_pdf, empty_pdf_reason, open_pdf_checked


class PdfminerParser(ParserBase):
    """``boxes_flow``: pdfminer's LAParams.boxes_flow (-1..1: how much a box's vertical
    position, against its horizontal one, orders the boxes; None turns the ordering off)."""

    name: ClassVar[str] = "pdfminer"
    types: ClassVar[tuple[str, ...]] = ("pdf",)

    def __init__(self, *, boxes_flow: float | None = 0.5) -> None:
        if boxes_flow is not None and not -1.0 <= boxes_flow <= 1.0:
            raise OptionError("boxes_flow", f"must be in [-1, 1] or null, got {boxes_flow}")
        require("pdfminer", "pdfminer.six", "pdfminer")
        require("pypdf", "pypdf", "pdfminer")  # the encrypted / corrupt check
        self.boxes_flow = boxes_flow

    def cache_params(self) -> dict[str, Any]:
        return {"boxes_flow": self.boxes_flow}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        from pdfminer.high_level import extract_pages
        from pdfminer.layout import LAParams, LTTextContainer

        check_pdf(f.path)
        blocks: list[Block] = []
        pages = 0
        for pages, layout in enumerate(extract_pages(
                str(f.path), laparams=LAParams(boxes_flow=self.boxes_flow)), start=1):
            for el in layout:
                if isinstance(el, LTTextContainer):
                    text = el.get_text().strip()
                    if text:
                        blocks.append(Block(text, pages, len(blocks), "paragraph",
                                            tuple(float(v) for v in el.bbox)))  # type: ignore[arg-type]
        return from_blocks(f, self.name, blocks, pages=pages,
                           empty_reason=empty_pdf_reason(open_pdf_checked(f.path)))
