"""OCR via rapidocr-onnxruntime (its wheel ships the detection, classification and
recognition ONNX models: nothing is downloaded). Its text lines, in its top-to-bottom order,
are grouped into paragraphs where the vertical gap between two lines exceeds ``para_gap``
line heights; each paragraph is a block with the union of its lines' boxes."""

from __future__ import annotations

from typing import Any, ClassVar

from bench.config.build import OptionError
from bench.parsing.base import (
    IMAGE_TYPES,
    Block,
    ParsedDocument,
    ParserBase,
    RawFile,
    from_blocks,
    require,
)
from bench.parsing.raster import page_images


class RapidOcrParser(ParserBase):
    """``dpi``: resolution a PDF page is rendered at; ``para_gap``: the vertical gap, in line
    heights, that starts a new paragraph block."""

    name: ClassVar[str] = "rapidocr"
    types: ClassVar[tuple[str, ...]] = ("pdf", *IMAGE_TYPES)

    def __init__(self, *, dpi: int = 200, para_gap: float = 0.8) -> None:
        if not 50 <= dpi <= 600:
            raise OptionError("dpi", f"must be in 50..600, got {dpi}")
        if para_gap <= 0:
            raise OptionError("para_gap", f"must be > 0, got {para_gap}")
        require("rapidocr_onnxruntime", "rapidocr-onnxruntime", "rapidocr")
        require("pypdfium2", "pdfplumber", "rapidocr")  # renders PDF pages
        self.dpi, self.para_gap = dpi, para_gap
        self._engine: Any = None

    def cache_params(self) -> dict[str, Any]:
        return {"dpi": self.dpi, "para_gap": self.para_gap}

    def __getstate__(self) -> dict[str, Any]:  # the engine is built in the worker
        return {**self.__dict__, "_engine": None}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        import numpy as np

        if self._engine is None:
            from rapidocr_onnxruntime import RapidOCR

            self._engine = RapidOCR()
        blocks: list[Block] = []
        pages = 0
        for pages, image in enumerate(page_images(f, dpi=self.dpi), start=1):
            result, _ = self._engine(np.asarray(image))
            blocks += group_lines(result or [], page=pages, start=len(blocks),
                                  para_gap=self.para_gap)
        return from_blocks(f, self.name, blocks, pages=pages,
                           empty_reason="rapidocr recognised no text on the page(s)")


def group_lines(result: list[Any], *, page: int, start: int, para_gap: float) -> list[Block]:
    """RapidOCR's ``[box (4 points), text, score]`` lines as paragraph blocks."""
    out: list[Block] = []
    lines: list[str] = []
    box: list[float] = []
    prev_bottom = prev_height = None
    for points, text, _score in result:
        xs = [float(p[0]) for p in points]
        ys = [float(p[1]) for p in points]
        x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
        height = max(y1 - y0, 1.0)
        same_line = (prev_bottom is not None and prev_height is not None
                     and min(y1, prev_bottom) - max(y0, prev_bottom - prev_height)
                     > 0.5 * min(height, prev_height))
        if lines and same_line:  # a line it detected in pieces: one line again
            lines[-1] = f"{lines[-1].rstrip()} {str(text).strip()}"
            box = [min(box[0], x0), min(box[1], y0), max(box[2], x1), max(box[3], y1)]
            continue
        if lines and prev_bottom is not None and prev_height is not None and (
                y0 - prev_bottom > para_gap * prev_height or y0 < prev_bottom - 2 * height):
            out.append(Block("\n".join(lines), page, start + len(out), "paragraph",
                             (box[0], box[1], box[2], box[3])))
            lines, box = [], []
        lines.append(str(text).strip())
        box = [x0, y0, x1, y1] if not box else [min(box[0], x0), min(box[1], y0),
                                                max(box[2], x1), max(box[3], y1)]
        prev_bottom, prev_height = y1, height
    if lines:
        out.append(Block("\n".join(lines), page, start + len(out), "paragraph",
                         (box[0], box[1], box[2], box[3])))
    return out
