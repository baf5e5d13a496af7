"""OCR via Debian's tesseract (``apt-get install tesseract-ocr tesseract-ocr-eng``), run as a
subprocess per page with TSV output: one block per paragraph tesseract finds, with its
bounding box in pixels of the page image (``dpi`` for a PDF page)."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from bench.config.build import OptionError
from bench.errors import BenchError
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


def tesseract_languages() -> tuple[str, ...]:
    """The languages the installed tesseract has data for; BenchError (one line) without it."""
    exe = shutil.which("tesseract")
    if exe is None:
        raise BenchError("parser=tesseract needs Debian's tesseract OCR: apt-get install "
                         "tesseract-ocr tesseract-ocr-eng (scripts/setup.sh and .ci/run do)")
    out = subprocess.run([exe, "--list-langs"], capture_output=True, text=True, check=False)
    return tuple(ln.strip() for ln in out.stdout.splitlines()[1:] if ln.strip())


class TesseractParser(ParserBase):
    """``lang``: tesseract language(s) (``eng``, ``eng+deu``); ``psm``: page segmentation
    mode (3: automatic, the default); ``dpi``: resolution a PDF page is rendered at."""

    name: ClassVar[str] = "tesseract"
    types: ClassVar[tuple[str, ...]] = ("pdf", *IMAGE_TYPES)

    def __init__(self, *, lang: str = "eng", psm: int = 3, dpi: int = 200) -> None:
        if not 0 <= psm <= 13:
            raise OptionError("psm", f"must be a tesseract page segmentation mode 0..13, "
                                     f"got {psm}")
        if not 50 <= dpi <= 600:
            raise OptionError("dpi", f"must be in 50..600, got {dpi}")
        require("pypdfium2", "pdfplumber", "tesseract")  # renders PDF pages
        have = tesseract_languages()
        missing = [x for x in lang.split("+") if x not in have]
        if missing:
            raise OptionError("lang", f"tesseract has no data for {', '.join(missing)} "
                                      f"(installed: {', '.join(have) or 'none'}); apt-get "
                                      f"install tesseract-ocr-{missing[0]}")
        self.lang, self.psm, self.dpi = lang, psm, dpi

    def cache_params(self) -> dict[str, Any]:
        return {"lang": self.lang, "psm": self.psm, "dpi": self.dpi}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        blocks: list[Block] = []
        pages = 0
        with tempfile.TemporaryDirectory(prefix="bench-ocr-") as tmp:
            for pages, image in enumerate(page_images(f, dpi=self.dpi), start=1):
                png = Path(tmp) / f"page{pages}.png"
                image.save(png)
                blocks += self._page(png, pages, len(blocks))
        return from_blocks(f, self.name, blocks, pages=pages,
                           empty_reason="tesseract recognised no text on the page(s)")

    def _page(self, png: Path, page: int, start: int) -> list[Block]:
        out = subprocess.run(["tesseract", str(png), "stdout", "-l", self.lang, "--psm",
                              str(self.psm), "tsv"], capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise RuntimeError(f"tesseract exited {out.returncode}: "
                               f"{' '.join(out.stderr.split())[:200]}")
        return tsv_blocks(out.stdout, page=page, start=start)


def tsv_blocks(tsv: str, *, page: int, start: int = 0) -> list[Block]:
    """Tesseract's TSV words grouped into its paragraphs (lines joined by newlines), each
    with the union of its words' boxes."""
    paras: dict[tuple[int, int], dict[int, list[str]]] = {}
    boxes: dict[tuple[int, int], list[int]] = {}
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") != "5" or not (row.get("text") or "").strip():
            continue
        key = (int(row["block_num"]), int(row["par_num"]))
        paras.setdefault(key, {}).setdefault(int(row["line_num"]), []).append(row["text"])
        x0, y0 = int(row["left"]), int(row["top"])
        x1, y1 = x0 + int(row["width"]), y0 + int(row["height"])
        b = boxes.setdefault(key, [x0, y0, x1, y1])
        boxes[key] = [min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1)]
    out: list[Block] = []
    for key, lines in paras.items():
        text = "\n".join(" ".join(words) for _, words in sorted(lines.items()))
        x0, y0, x1, y1 = boxes[key]
        out.append(Block(text, page, start + len(out), "paragraph",
                         (float(x0), float(y0), float(x1), float(y1))))
    return out
