"""Page images for the OCR parsers: an image file is one page; a PDF's pages are rendered
with pypdfium2 (a pdfplumber dependency, PDFium in its wheel) at the parser's dpi."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench.parsing.base import IMAGE_TYPES, RawFile
from bench.parsing.pdf_common import check_pdf


def page_images(f: RawFile, *, dpi: int) -> Iterator[Any]:
    """PIL images of the file's pages, in order."""
    from PIL import Image

    if f.type in IMAGE_TYPES:
        with Image.open(f.path) as im:
            yield im.convert("RGB")
        return
    import pypdfium2

    check_pdf(f.path)
    pdf = pypdfium2.PdfDocument(str(f.path))
    try:
        for i in range(len(pdf)):
            yield pdf[i].render(scale=dpi / 72.0).to_pil().convert("RGB")
    finally:
        pdf.close()
