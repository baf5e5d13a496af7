"""A tiny raw-document folder in the layout of docs/ingestion.md, made with real writers:
a two-page PDF (reportlab), an image-only PDF (a scan), an HTML page with navigation and a
footer, a DOCX with a heading and a table (python-docx), a Markdown file and a PNG of
rendered text (PIL) — each with its truth file — and golden queries naming them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PDF_PAGES = ("Quantum annealing minimises energy functions.",
             "Simulated annealing cools a system slowly.")
HTML_BODY = ("Lighthouses guide ships along rocky coasts.",
             "The Fresnel lens made their beams visible far out at sea.")
HTML_NAV = "Home About Contact"
HTML_FOOTER = "Copyright 2026 Example Corp"
DOCX_HEADING = "Glacier report"
DOCX_PARAGRAPH = "Glaciers retreat when summers grow warmer."
DOCX_CELLS = (("station", "metres"), ("north", "120"))
MD_TEXT = ("Compilers", "A compiler translates source code into machine code.")
PNG_LINES = ("OCR READS THIS LINE", "AND THIS ONE 2026")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _font(size: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.truetype(FONT, size)
    except OSError:
        return ImageFont.load_default(size=size)


def text_png(path: Path, lines: tuple[str, ...]) -> None:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (1000, 80 + 70 * len(lines)), "white")
    d = ImageDraw.Draw(im)
    for i, line in enumerate(lines):
        d.text((40, 40 + 70 * i), line, fill="black", font=_font(40))
    im.save(path)


def pdf(path: Path, pages: tuple[str, ...]) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for text in pages:
        c.setFont("Helvetica", 12)
        c.drawString(72, 760, text)
        c.showPage()
    c.save()


def scan_pdf(path: Path, png: Path) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    c.drawImage(str(png), 36, 500, width=520, height=520 * 220 / 1000)
    c.showPage()
    c.save()


def html(path: Path) -> None:
    path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>Lighthouses</title>"
        "<style>body{color:red}</style></head><body>"
        f"<nav><a href='/'>{HTML_NAV.split()[0]}</a> <a href='/a'>{HTML_NAV.split()[1]}</a> "
        f"<a href='/c'>{HTML_NAV.split()[2]}</a></nav>"
        "<main><article><h1>Lighthouses</h1>"
        + "".join(f"<p>{p} {p} {p}</p>" for p in HTML_BODY)
        + f"</article></main><footer><p>{HTML_FOOTER}</p></footer>"
        "<script>var x = 1;</script></body></html>", encoding="utf-8")


def docx(path: Path) -> None:
    import docx as python_docx

    d = python_docx.Document()
    d.add_heading(DOCX_HEADING, level=1)
    d.add_paragraph(DOCX_PARAGRAPH)
    t = d.add_table(rows=len(DOCX_CELLS), cols=len(DOCX_CELLS[0]))
    for i, row in enumerate(DOCX_CELLS):
        for j, cell in enumerate(row):
            t.cell(i, j).text = cell
    d.save(str(path))


def truth(doc_id: str, blocks: list[tuple[str, str, int]], *, pages: int,
          tables: list[list[list[str]]] = (), boilerplate: list[str] = ()) -> dict[str, Any]:
    return {"doc_id": doc_id, "title": doc_id, "date": None, "language": "en",
            "text": "\n\n".join(t for _, t, _ in blocks),
            "blocks": [{"kind": k, "text": t, "page": p} for k, t, p in blocks],
            "boilerplate": [{"kind": "nav", "text": b, "page": 1} for b in boilerplate],
            "tables": [{"cells": c, "html": "", "page": 1} for c in tables],
            "pii": [], "pages": pages}


def make_folder(root: Path) -> Path:
    """The folder; returns ``root``."""
    files, tr = root / "files", root / "truth"
    files.mkdir(parents=True)
    tr.mkdir()
    pdf(files / "pdf-1.pdf", PDF_PAGES)
    text_png(files / "scan-1.png", PNG_LINES)
    scan_pdf(files / "scan-2.pdf", files / "scan-1.png")
    html(files / "html-1.html")
    docx(files / "docx-1.docx")
    (files / "md-1.md").write_text(f"# {MD_TEXT[0]}\n\n{MD_TEXT[1]}\n", encoding="utf-8")
    rows = [
        ("pdf-1", "files/pdf-1.pdf", "pdf", "one_column",
         truth("pdf-1", [("paragraph", t, i + 1) for i, t in enumerate(PDF_PAGES)], pages=2)),
        ("scan-1", "files/scan-1.png", "png", "scan",
         truth("scan-1", [("paragraph", "\n".join(PNG_LINES), 1)], pages=1)),
        ("scan-2", "files/scan-2.pdf", "pdf", "scan",
         truth("scan-2", [("paragraph", "\n".join(PNG_LINES), 1)], pages=1)),
        ("html-1", "files/html-1.html", "html", "html_boilerplate",
         truth("html-1", [("heading", "Lighthouses", 1)]
               + [("paragraph", f"{p} {p} {p}", 1) for p in HTML_BODY], pages=1,
               boilerplate=[HTML_NAV, HTML_FOOTER])),
        ("docx-1", "files/docx-1.docx", "docx", "docx",
         truth("docx-1", [("heading", DOCX_HEADING, 1), ("paragraph", DOCX_PARAGRAPH, 1),
                          ("table", "\n".join(" ".join(r) for r in DOCX_CELLS), 1)], pages=1,
               tables=[[list(r) for r in DOCX_CELLS]])),
        ("md-1", "files/md-1.md", "md", "markdown",
         truth("md-1", [("heading", MD_TEXT[0], 1), ("paragraph", MD_TEXT[1], 1)], pages=1)),
    ]
    with (root / "manifest.jsonl").open("w") as fh:
        for doc_id, file, kind, layout, t in rows:
            (tr / f"{doc_id}.json").write_text(json.dumps(t))
            fh.write(json.dumps({"doc_id": doc_id, "file": file, "type": kind,
                                 "layout": layout, "source": "test",
                                 "truth": f"truth/{doc_id}.json"}) + "\n")
    queries = [("q-pdf", "What does quantum annealing minimise?", "pdf-1"),
               ("q-scan", "What does OCR read?", "scan-1"),
               ("q-scan2", "Which line does OCR read in the scanned PDF?", "scan-2"),
               ("q-html", "What guides ships along rocky coasts?", "html-1"),
               ("q-docx", "When do glaciers retreat?", "docx-1"),
               ("q-md", "What does a compiler translate?", "md-1")]
    # two queries with reference answers, in a category of their own (as SQuAD's are)
    answers = {"q-pdf": ["energy functions"], "q-md": ["source code"]}
    with (root / "queries.jsonl").open("w") as fh:
        for qid, text, doc in queries:
            row: dict[str, Any] = {"query_id": qid, "query": text,
                                   "category": "answers" if qid in answers else "exact_lookup",
                                   "relevant_document_ids": [doc]}
            if qid in answers:
                row["expected_answers"] = answers[qid]
            fh.write(json.dumps(row) + "\n")
    return root


class HangParser:
    """Test-only: never returns (a parser stuck in a loop)."""

    name = "hang"
    version = "1"
    types = ("md", "txt")
    needs_truth = False

    def cache_params(self) -> dict[str, Any]:
        return {}

    def parse(self, files: Any) -> Any:
        import time

        while True:
            time.sleep(1)


class CrashParser(HangParser):
    """Test-only: kills its own process (a segfault in a C extension)."""

    name = "crash"

    def parse(self, files: Any) -> Any:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
