"""Lay a ``DocSpec`` out as a raw file and say where each block landed (the truth).

Layouts (``LAYOUTS``): PDF with reportlab's platypus in ``one_column``, ``two_column``,
``headers_footers`` (an A5 booklet in 12 pt with a running header, footer and "Page i of
n" on every page), ``table`` (a
table of known cells after the text) and ``footnotes`` (sentences moved to footnotes at the
foot of the first page); ``scan`` pages (the one-column PDF rasterised by pypdfium2, skewed,
speckled and blurred with Pillow) as a PNG (one page) or an image-only PDF; ``html_boilerplate``
(an article inside a site header, navigation, related-links aside and footer) and ``docx``
(python-docx, with a page header and footer). Every output is byte-for-byte reproducible:
reportlab's invariant mode, fixed dates in PDF / DOCX metadata, zip entries with a fixed time,
noise from a seeded generator.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import random
import re
import time
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench.ingest.sources import Block, DocSpec

PDF_LAYOUTS = ("one_column", "two_column", "headers_footers", "table", "footnotes")
LAYOUTS = (*PDF_LAYOUTS, "scan_png", "scan_pdf", "html_boilerplate", "docx")
FIXED_TIME = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
SITE = "Example Knowledge Base"
NAV = ("Home", "Articles", "Topics", "About", "Contact")
SIDEBAR = ("Related articles", "Most read this week", "Subscribe to the newsletter")
FOOTER = f"© 2024 {SITE}. All rights reserved. Privacy · Terms · Cookies"
SCAN_DPI = 150
_PDF_TIME = time.gmtime(FIXED_TIME.timestamp())  # what Pillow's PDF writer takes


@dataclass
class Rendered:
    """One raw file and its truth fields (blocks with pages, boilerplate, tables, pages)."""

    data: bytes
    ext: str  # pdf | png | html | docx
    type: str  # manifest type
    blocks: list[dict[str, Any]] = field(default_factory=list)
    boilerplate: list[dict[str, Any]] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)
    pages: int = 1


# ---------------------------------------------------------------- content shared by layouts


def summary_table(spec: DocSpec) -> list[list[str]]:
    """A table of known cells about the document's own paragraphs (numbers an OCR can break)."""
    rows = [["Section", "Words", "Sentences", "Opens with"]]
    k = 0
    for b in spec.blocks:
        if b.kind != "paragraph":
            continue
        k += 1
        words = b.text.split()
        sentences = len(re.findall(r"[.!?](\s|$)", b.text)) or 1
        rows.append([f"Part {k}", str(len(words)), str(sentences), " ".join(words[:3])])
        if k == 6:
            break
    return rows


def table_text(cells: list[list[str]]) -> str:
    """A table as body text: cells joined by a space, rows by a newline."""
    return "\n".join(" ".join(row) for row in cells)


def table_html(cells: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cells[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in cells[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def with_footnotes(blocks: tuple[Block, ...], n: int = 2) -> tuple[list[Block], list[Block]]:
    """Move the last sentence of the first ``n`` paragraphs that have three or more into
    footnotes; the paragraph gets the marker "[k]". Returns (body, footnotes)."""
    body: list[Block] = []
    notes: list[Block] = []
    for b in blocks:
        parts = _SENT.split(b.text) if b.kind == "paragraph" else []
        if len(notes) < n and len(parts) >= 3:
            k = len(notes) + 1
            body.append(Block("paragraph", " ".join(parts[:-1]) + f" [{k}]", b.unit))
            notes.append(Block("footnote", f"[{k}] {parts[-1]}", b.unit))
        else:
            body.append(b)
    return body, notes


# ---------------------------------------------------------------- PDF (reportlab)


@lru_cache(maxsize=1)
def _font() -> tuple[str, str, frozenset[int]]:
    """Bitstream Vera (shipped inside reportlab) registered; its regular / bold names and the
    code points it has."""
    import reportlab
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    folder = Path(reportlab.__file__).parent / "fonts"
    regular = TTFont("BenchVera", str(folder / "Vera.ttf"))
    pdfmetrics.registerFont(regular)
    pdfmetrics.registerFont(TTFont("BenchVeraBd", str(folder / "VeraBd.ttf")))
    return "BenchVera", "BenchVeraBd", frozenset(regular.face.charToGlyph)


def pdf_safe(text: str) -> str:
    """``text`` with the characters the PDF font lacks replaced by their NFKD base letters
    ("ā" -> "a") or dropped (Greek, IPA): the truth of a PDF is the text it shows."""
    have = _font()[2]
    out = []
    for ch in text:
        if ord(ch) in have or ch in "\n\t":
            out.append(ch)
            continue
        base = "".join(c for c in unicodedata.normalize("NFKD", ch) if ord(c) in have
                        and not unicodedata.combining(c))
        out.append(base)
    return re.sub(r"[ ]{2,}", " ", "".join(out))


def _styles() -> dict[str, Any]:
    from reportlab.lib.styles import ParagraphStyle

    reg, bold, _ = _font()
    return {
        "title": ParagraphStyle("t", fontName=bold, fontSize=16, leading=20, spaceAfter=8),
        "heading": ParagraphStyle("h", fontName=bold, fontSize=12, leading=15, spaceBefore=6,
                                  spaceAfter=4),
        "paragraph": ParagraphStyle("p", fontName=reg, fontSize=10, leading=13, spaceAfter=6),
        "footnote": ParagraphStyle("f", fontName=reg, fontSize=8, leading=10),
        "cell": ParagraphStyle("c", fontName=reg, fontSize=9, leading=11),
    }


def render_pdf(spec: DocSpec, layout: str) -> Rendered:
    """One of ``PDF_LAYOUTS`` (``scan`` uses ``one_column`` then rasterises)."""
    blocks = [Block(b.kind, pdf_safe(b.text), b.unit) for b in spec.blocks]
    notes: list[Block] = []
    if layout == "footnotes":
        body, notes = with_footnotes(tuple(blocks))
        blocks = body
    cells: list[list[str]] = []
    if layout == "table":
        cells = [[pdf_safe(c) for c in row] for row in summary_table(spec)]
        blocks.append(Block("table", table_text(cells)))
    title = pdf_safe(spec.title)
    pages = 1
    for _ in range(3):  # headers_footers needs the page count: render until it is stable
        data, placed, n = _pdf_pass(spec, title, layout, blocks, notes, cells, pages)
        if n == pages:
            break
        pages = n
    truth_blocks: list[dict[str, Any]] = [{"kind": b.kind, "text": b.text, "page": p}
                                          for b, p in placed]
    # footnotes are read after the body text of their page (the foot of page 1)
    out_blocks: list[dict[str, Any]] = []
    for i, tb in enumerate(truth_blocks):
        out_blocks.append(tb)
        last_on_1 = tb["page"] == 1 and (i + 1 == len(truth_blocks)
                                         or truth_blocks[i + 1]["page"] > 1)
        if last_on_1:
            out_blocks += [{"kind": "footnote", "text": f.text, "page": 1} for f in notes]
    boiler: list[dict[str, Any]] = []
    if layout == "headers_footers":
        for p in range(1, pages + 1):
            boiler += [{"kind": "header", "text": _header(title), "page": p},
                       {"kind": "footer", "text": _footer(spec.doc_id), "page": p},
                       {"kind": "page_number", "text": f"Page {p} of {pages}", "page": p}]
    tables = ([{"cells": cells, "html": table_html(cells),
                "page": next((p for b, p in placed if b.kind == "table"), 1)}] if cells else [])
    return Rendered(data, "pdf", "pdf", out_blocks, boiler, tables, pages)


def _header(title: str) -> str:
    return f"{title} · Ingestion benchmark"


def _footer(doc_id: str) -> str:
    return f"Document {doc_id} · generated for testing"


def _pdf_pass(spec: DocSpec, title: str, layout: str, blocks: list[Block], notes: list[Block],
              cells: list[list[str]], pages: int) -> tuple[bytes, list[tuple[Block, int]], int]:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4, A5
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import cm
    from reportlab.platypus import (
        BaseDocTemplate,
        Frame,
        PageTemplate,
        Paragraph,
        Table,
        TableStyle,
    )

    st = _styles()
    if layout == "headers_footers":  # an A5 booklet in a large type: the running header,
        # footer and page number repeat over several pages even for a short text
        st["paragraph"] = ParagraphStyle("pb", parent=st["paragraph"], fontSize=12, leading=17)
    reg = _font()[0]
    width, height = A5 if layout == "headers_footers" else A4
    margin = (2.5 if layout == "headers_footers" else 2) * cm
    note_h = 0.0
    if notes:
        note_h = sum(0.5 * cm * (1 + len(n.text) // 110) for n in notes) + 0.6 * cm
    placed: list[tuple[Block, int]] = []

    class Doc(BaseDocTemplate):  # type: ignore[misc]
        def afterFlowable(self, flowable: Any) -> None:
            blk = getattr(flowable, "_bench_block", None)
            if blk is not None:
                placed.append((blk, self.page))

    buf = io.BytesIO()
    doc = Doc(buf, pagesize=A4, leftMargin=margin, rightMargin=margin, topMargin=margin,
              bottomMargin=margin, invariant=1, title=title, author="bench.ingest",
              subject=spec.doc_id, creator="bench.ingest.build")
    frame_h = height - 2 * margin
    if layout == "two_column":
        gap = 0.8 * cm
        col = (width - 2 * margin - gap) / 2
        frames = [Frame(margin, margin, col, frame_h, id="left"),
                  Frame(margin + col + gap, margin, col, frame_h, id="right")]
    else:
        frames = [Frame(margin, margin, width - 2 * margin, frame_h, id="body")]

    def on_page(canvas: Any, document: Any) -> None:
        canvas.saveState()
        if layout == "headers_footers":
            canvas.setFont(reg, 8)
            canvas.drawString(margin, height - 1.2 * cm, _header(title))
            canvas.drawString(margin, 1.0 * cm, _footer(spec.doc_id))
            canvas.drawRightString(width - margin, 1.0 * cm,
                                   f"Page {document.page} of {pages}")
        if notes and document.page == 1:
            canvas.setStrokeColor(colors.black)
            canvas.line(margin, margin + note_h, margin + 5 * cm, margin + note_h)
            y = margin + note_h - 0.2 * cm
            for n in notes:
                p = Paragraph(html.escape(n.text), st["footnote"])
                _, h = p.wrap(width - 2 * margin, note_h)
                p.drawOn(canvas, margin, y - h)
                y -= h + 0.1 * cm
        canvas.restoreState()

    templates = [PageTemplate(id="page", frames=frames, onPage=on_page)]
    if notes:  # page 1 leaves the foot to the notes
        first = [Frame(margin, margin + note_h + 0.3 * cm, width - 2 * margin,
                       frame_h - note_h - 0.3 * cm, id="first")]
        templates.insert(0, PageTemplate(id="first", frames=first, onPage=on_page,
                                         autoNextPageTemplate="page"))
    story: list[Any] = []
    for k, b in enumerate(blocks):
        if b.kind == "table":
            data = [[Paragraph(html.escape(c), st["cell"]) for c in row] for row in cells]
            f: Any = Table(data, repeatRows=1, hAlign="LEFT")
            f.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black),
                                   ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey)]))
        else:
            style = st["title"] if k == 0 and b.kind == "heading" else st[
                "heading" if b.kind == "heading" else "paragraph"]
            f = _tagged_paragraph()(html.escape(b.text), style)
        f._bench_block = b
        story.append(f)
    if layout == "two_column":  # balanced columns: a short text still fills both
        need = sum(f.wrap(col, frame_h)[1] + 10 for f in story)
        if need < 2 * frame_h:
            h = need / 2 + 30
            top = height - margin - h
            frames = [Frame(margin, top, col, h, id="left"),
                      Frame(margin + col + gap, top, col, h, id="right"),
                      Frame(margin, margin, width - 2 * margin, top - margin, id="rest")]
            templates = [PageTemplate(id="page", frames=frames, onPage=on_page)]
    doc.addPageTemplates(templates)
    doc.build(story)
    # a flowable split without keeping its tag (a table broken across pages) is placed on the
    # page of the block before it: every block is in the truth exactly once, in story order
    page_of = {id(b): p for b, p in placed}
    ordered: list[tuple[Block, int]] = []
    last = 1
    for b in blocks:
        last = page_of.get(id(b), last)
        ordered.append((b, last))
    return buf.getvalue(), ordered, doc.page


@lru_cache(maxsize=1)
def _tagged_paragraph() -> type:
    """A Paragraph whose first part keeps the block tag when a frame or page break splits it
    (so the truth records the page where each block starts)."""
    from reportlab.platypus import Paragraph

    class Tagged(Paragraph):  # type: ignore[misc]
        def split(self, avail_w: float, avail_h: float) -> list[Any]:
            parts = list(super().split(avail_w, avail_h))
            tag = getattr(self, "_bench_block", None)
            for k, part in enumerate(parts):
                part._bench_block = tag if k == 0 else None
            return parts

    return Tagged


def render_scan(spec: DocSpec, *, as_pdf: bool, seed: int) -> Rendered:
    """The one-column PDF rasterised and degraded: a one-page PNG (blocks past page 1 are
    dropped first, so the truth is what the image shows) or an image-only PDF."""
    import pypdfium2 as pdfium

    blocks = list(spec.blocks)
    while True:
        base = render_pdf(DocSpec(spec.doc_id, spec.title, spec.source, tuple(blocks)),
                          "one_column")
        if as_pdf or base.pages == 1 or len(blocks) <= 2:
            break
        blocks.pop()
    rng = random.Random(seed)
    pdf = pdfium.PdfDocument(base.data)
    images = []
    for i in range(len(pdf) if as_pdf else 1):
        img = pdf[i].render(scale=SCAN_DPI / 72, grayscale=True).to_pil().convert("L")
        images.append(_degrade(img, rng))
    pdf.close()
    out = io.BytesIO()
    if as_pdf:
        images[0].save(out, "PDF", save_all=True, append_images=images[1:], resolution=SCAN_DPI,
                       title=spec.title, creationDate=_PDF_TIME, modDate=_PDF_TIME)
        return Rendered(out.getvalue(), "pdf", "pdf", base.blocks, [], [], base.pages)
    images[0].save(out, "PNG", optimize=False)
    page1 = [b for b in base.blocks if b["page"] == 1]
    return Rendered(out.getvalue(), "png", "png", page1, [], [], 1)


def _degrade(img: Any, rng: random.Random) -> Any:
    """Skew (±1.5°), speckle (0.15 % of pixels) and a slight blur: a photocopied page."""
    from PIL import Image, ImageFilter

    angle = rng.uniform(-1.5, 1.5)
    img = img.rotate(angle, resample=Image.Resampling.BILINEAR, expand=False, fillcolor=255)
    w, h = img.size
    px = img.load()
    for _ in range(int(w * h * 0.0015)):
        x, y = rng.randrange(w), rng.randrange(h)
        px[x, y] = rng.choice((0, 60, 200))
    return img.filter(ImageFilter.GaussianBlur(0.6))


# ---------------------------------------------------------------- HTML


def render_html(spec: DocSpec) -> Rendered:
    """An article page (text, then the summary table) inside a site header, navigation, an
    aside and a footer (the boilerplate)."""
    e = html.escape
    body: list[str] = []
    blocks: list[dict[str, Any]] = []
    for k, b in enumerate(spec.blocks):
        tag = "h1" if k == 0 and b.kind == "heading" else ("h2" if b.kind == "heading" else "p")
        body.append(f"<{tag}>{e(b.text)}</{tag}>")
        blocks.append({"kind": b.kind, "text": b.text, "page": 1})
    cells = summary_table(spec)
    body.append(table_html(cells))
    blocks.append({"kind": "table", "text": table_text(cells), "page": 1})
    # one item a line: a tag stripper keeps the words apart, as a browser's layout would
    nav = "\n".join(f'<li><a href="/{n.lower()}/">{e(n)}</a></li>' for n in NAV)
    aside = "\n".join(f'<li><a href="#">{e(s)}</a></li>' for s in SIDEBAR)
    page = (
        "<!DOCTYPE html>\n"
        f'<html lang="{spec.language}">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{e(spec.title)} - {SITE}</title>\n"
        f'<meta name="date" content="{FIXED_TIME.date().isoformat()}">\n</head>\n<body>\n'
        f'<header><div class="site">{SITE}</div>\n<nav><ul>{nav}</ul></nav></header>\n'
        f"<main><article>\n" + "\n".join(body) + "\n</article>\n"
        f'<aside><ul>{aside}</ul></aside></main>\n'
        f"<footer><p>{e(FOOTER)}</p></footer>\n</body>\n</html>\n")
    boiler = [{"kind": "header", "text": SITE, "page": 1},
              {"kind": "nav", "text": " ".join(NAV), "page": 1},
              {"kind": "nav", "text": " ".join(SIDEBAR), "page": 1},
              {"kind": "footer", "text": FOOTER, "page": 1}]
    tables = [{"cells": cells, "html": table_html(cells), "page": 1}]
    return Rendered(page.encode("utf-8"), "html", "html", blocks, boiler, tables, 1)


# ---------------------------------------------------------------- DOCX


def render_docx(spec: DocSpec) -> Rendered:
    """A Word document: headings, paragraphs, the summary table, a page header and footer."""
    import docx

    d = docx.Document()
    cp = d.core_properties
    cp.title, cp.author, cp.created, cp.modified = spec.title, "bench.ingest", FIXED_TIME, \
        FIXED_TIME
    cp.last_modified_by, cp.revision = "bench.ingest", 1
    section = d.sections[0]
    section.header.paragraphs[0].text = _header(spec.title)
    section.footer.paragraphs[0].text = _footer(spec.doc_id)
    blocks: list[dict[str, Any]] = []
    for k, b in enumerate(spec.blocks):
        if b.kind == "heading":
            d.add_heading(b.text, level=0 if k == 0 else 1)
        else:
            d.add_paragraph(b.text)
        blocks.append({"kind": b.kind, "text": b.text, "page": 1})
    cells = summary_table(spec)
    t = d.add_table(rows=len(cells), cols=len(cells[0]))
    t.style = "Table Grid"
    for i, row in enumerate(cells):
        for j, c in enumerate(row):
            t.cell(i, j).text = c
    blocks.append({"kind": "table", "text": table_text(cells), "page": 1})
    buf = io.BytesIO()
    d.save(buf)
    boiler = [{"kind": "header", "text": _header(spec.title), "page": 1},
              {"kind": "footer", "text": _footer(spec.doc_id), "page": 1}]
    tables = [{"cells": cells, "html": table_html(cells), "page": 1}]
    return Rendered(_fixed_zip(buf.getvalue()), "docx", "docx", blocks, boiler, tables, 1)


def _fixed_zip(data: bytes) -> bytes:
    """The zip re-written with every entry dated 1980-01-01, in the same order."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            z = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            z.compress_type = zipfile.ZIP_DEFLATED
            z.external_attr = 0o644 << 16
            dst.writestr(z, src.read(info.filename))
    return out.getvalue()


def _pdf_renderer(layout: str) -> Callable[[DocSpec, int], Rendered]:
    return lambda spec, _seed: render_pdf(spec, layout)


RENDERERS: dict[str, Callable[[DocSpec, int], Rendered]] = {
    **{lay: _pdf_renderer(lay) for lay in PDF_LAYOUTS},
    "scan_png": lambda s, seed: render_scan(s, as_pdf=False, seed=seed),
    "scan_pdf": lambda s, seed: render_scan(s, as_pdf=True, seed=seed),
    "html_boilerplate": lambda s, _seed: render_html(s),
    "docx": lambda s, _seed: render_docx(s),
}
