"""What the PDF parsers share: open a PDF or say in one line why not (encrypted, corrupt),
and say why a PDF's text layer was empty (image-only pages: a scan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class PdfError(Exception):
    """A PDF no text-layer parser can read; the message is the document's ``failed`` reason."""


def open_pdf_checked(path: Path) -> Any:
    """A ``pypdf.PdfReader`` over the file; ``PdfError`` for an encrypted (no empty user
    password) or unreadable PDF."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise PdfError("encrypted PDF: it needs a password")
        len(reader.pages)  # a broken page tree raises here, not in the middle of the parse
    except PdfError:
        raise
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        raise PdfError(f"corrupt PDF: {type(exc).__name__}: {exc}") from None
    return reader


def check_pdf(path: Path) -> None:
    """Raise ``PdfError`` if the file is not a readable, unencrypted PDF (the pdfminer and
    pdfplumber parsers check with pypdf first so all three say the same thing)."""
    open_pdf_checked(path)


def image_only_pages(reader: Any) -> int:
    """How many pages carry an image XObject (a scan's page is one image)."""
    n = 0
    for page in reader.pages:
        res = page.get("/Resources")
        xobj = res.get_object().get("/XObject") if res is not None else None
        if xobj is not None and any(x.get_object().get("/Subtype") == "/Image"
                                    for x in xobj.get_object().values()):
            n += 1
    return n


def empty_pdf_reason(reader: Any) -> str:
    images = image_only_pages(reader)
    if images:
        return (f"no text layer: {images} of {len(reader.pages)} pages are images (a scan); "
                "an OCR parser (parser=tesseract, parser=rapidocr) reads them")
    return "the PDF has no text layer and no images"
