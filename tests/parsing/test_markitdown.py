"""parser=markitdown: Markdown split into blocks (headings, pipe tables, inline markup), and
markitdown itself on the test folder's files and on files of the ingestion benchmark's
builder, scored against their truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from parsing_fixtures import (
    DOCX_CELLS,
    DOCX_HEADING,
    DOCX_PARAGRAPH,
    HTML_BODY,
    HTML_NAV,
    PDF_PAGES,
    make_folder,
)

from bench.parsing.base import Block, ParsedTable, ParseStatus, RawFile
from bench.parsing.markdown_blocks import markdown_blocks, strip_inline
from bench.parsing.pool import parse_isolated


def test_markdown_blocks_headings_tables_and_inline_markup() -> None:
    md = ("# Title\nFirst **bold** line with [a link](https://x.org/a_(b)) and `code`.\n\n"
          "| a | b |\n|---|---|\n| 1 | 2 \\| 3 |\n\n"
          "![logo](img.png)\n\n## Sub ##\n")
    blocks, tables = markdown_blocks(md, page=3, start=5)
    assert blocks == [Block("Title", 3, 5, "heading"),
                      Block("First bold line with a link and code.", 3, 6),
                      Block("a b\n1 2 | 3", 3, 7, "table"),
                      Block("logo", 3, 8),
                      Block("Sub", 3, 9, "heading")]
    assert tables == [ParsedTable((("a", "b"), ("1", "2 | 3")), 3)]
    kept, _ = markdown_blocks(md, page=0, plain=False)
    assert kept[1].text == "First **bold** line with [a link](https://x.org/a_(b)) and `code`."
    # snake_case and arithmetic are not emphasis
    assert strip_inline("a_b_c and 2 * 3 * 4") == "a_b_c and 2 * 3 * 4"
    # escaped marks are the page's own characters (markdownify escapes them)
    assert strip_inline(r"\_\_init\_\_(\*args) is 2\*3 **x**") == "__init__(*args) is 2*3 x"


pytest.importorskip("markitdown", reason="the ingest extra (pip install -e '.[ingest]')")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_folder(tmp_path_factory.mktemp("raw"))


def _file(root: Path, doc_id: str, kind: str, rel: str) -> RawFile:
    p = root / rel
    return RawFile(doc_id, p, kind, "0" * 64, p.stat().st_size)


def test_markitdown_reads_pdf_pages_html_and_docx(folder: Path) -> None:
    from bench.parsing.markitdown import MarkitdownParser

    parser = MarkitdownParser()
    pdf = parse_isolated(parser, _file(folder, "pdf-1", "pdf", "files/pdf-1.pdf"))
    assert pdf.status is ParseStatus.OK and pdf.pages == 2
    assert [(b.text, b.page) for b in pdf.blocks] == [(PDF_PAGES[0], 1), (PDF_PAGES[1], 2)]
    html = parse_isolated(parser, _file(folder, "html-1", "html", "files/html-1.html"))
    assert html.status is ParseStatus.OK
    assert all(f"{p} {p} {p}" in html.text for p in HTML_BODY)
    assert "var x" not in html.text and "color:red" not in html.text
    # markitdown converts the whole <body>: the navigation stays (no main-content extraction)
    assert all(w in html.text for w in HTML_NAV.split())
    assert ("heading", "Lighthouses") in [(b.kind, b.text) for b in html.blocks]
    docx = parse_isolated(parser, _file(folder, "docx-1", "docx", "files/docx-1.docx"))
    assert [(b.kind, b.text) for b in docx.blocks[:2]] == [("heading", DOCX_HEADING),
                                                            ("paragraph", DOCX_PARAGRAPH)]
    assert docx.tables == (ParsedTable(DOCX_CELLS, 0),)


def test_markitdown_statuses(folder: Path, tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    from bench.parsing.markitdown import MarkitdownParser

    parser = MarkitdownParser()
    scan = parse_isolated(parser, _file(folder, "scan-2", "pdf", "files/scan-2.pdf"))
    assert scan.status is ParseStatus.EMPTY and "1 of 1 pages are images" in scan.reason
    w = PdfWriter(clone_from=PdfReader(folder / "files" / "pdf-1.pdf"))
    w.encrypt("secret")
    w.write(tmp_path / "enc.pdf")
    (tmp_path / "bad.docx").write_bytes(b"PK\x03\x04 not a zip archive")
    enc = parse_isolated(parser, _file(tmp_path, "e", "pdf", "enc.pdf"))
    bad = parse_isolated(parser, _file(tmp_path, "b", "docx", "bad.docx"))
    assert enc.status is ParseStatus.FAILED and "encrypted PDF" in enc.reason
    assert bad.status is ParseStatus.FAILED and bad.reason and "\n" not in bad.reason


@pytest.mark.slow
def test_markitdown_on_the_ingestion_benchmark_files(tmp_path: Path) -> None:
    """The builder's one-column PDF and DOCX (with its table), scored by the benchmark's
    metrics against their truth: near-verbatim text, and the DOCX table cell for cell."""
    from bench.ingest import build as B
    from bench.ingest.metrics.tables import table_scores
    from bench.ingest.metrics.text import text_fidelity
    from bench.ingest.sources import SQUAD_SAMPLE
    from bench.parsing.markitdown import MarkitdownParser

    B.build(tmp_path, B.BuildOptions(n_squad=9, n_foldoc=0, n_real=0, real="none"),
            squad=SQUAD_SAMPLE, foldoc=tmp_path / "no-foldoc", cache_dir=None)
    rows = {(m["type"], m["layout"]): m for m in
            (json.loads(x) for x in (tmp_path / "manifest.jsonl").read_text().splitlines())}
    parser = MarkitdownParser()
    for key in (("pdf", "one_column"), ("docx", "docx")):
        m = rows[key]
        truth = json.loads((tmp_path / m["truth"]).read_text())
        doc = parse_isolated(parser, _file(tmp_path, m["doc_id"], m["type"], m["file"]))
        assert doc.status is ParseStatus.OK, key
        assert text_fidelity(doc.text, truth)["cer"] < 0.05, key
        if key == ("pdf", "one_column"):
            assert {b.page for b in doc.blocks} == set(range(1, doc.pages + 1))
        else:
            assert table_scores([list(map(list, t.cells)) for t in doc.tables],
                                truth)["cell_accuracy"] == 1.0
