"""Each parser on real files written in the test, against the text they were written with;
bad input before work (one line naming file:line); a crash or a hang costs one file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from parsing_fixtures import (
    DOCX_CELLS,
    DOCX_HEADING,
    DOCX_PARAGRAPH,
    HTML_BODY,
    HTML_FOOTER,
    HTML_NAV,
    MD_TEXT,
    PDF_PAGES,
    PNG_LINES,
    CrashParser,
    HangParser,
    make_folder,
    text_png,
)

from bench.cache.store import ArtifactStore
from bench.config.build import OptionError
from bench.errors import ConfigError, InputError
from bench.parsing.base import ParseStatus, RawFile
from bench.parsing.dataset import RawDocsDataset, parse_files
from bench.parsing.pool import parse_isolated

pytest.importorskip("pypdf", reason="the ingest extra (pip install -e '.[ingest]')")
TESSERACT = shutil.which("tesseract") is not None
needs_tesseract = pytest.mark.skipif(
    not TESSERACT, reason="Debian's tesseract-ocr is not installed (apt-get install "
                          "tesseract-ocr tesseract-ocr-eng; scripts/setup.sh does as root)")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_folder(tmp_path_factory.mktemp("raw"))


def _file(folder: Path, doc_id: str, kind: str, name: str) -> RawFile:
    p = folder / "files" / name
    return RawFile(doc_id, p, kind, "0" * 64, p.stat().st_size)


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("target", ["pdf_pypdf.PypdfParser", "pdf_pdfminer.PdfminerParser",
                                    "pdf_plumber.PdfplumberParser"])
def test_pdf_text_layer(folder: Path, target: str) -> None:
    from bench.config.build import build

    parser: Any = build({"_target_": f"bench.parsing.{target}"}, "parser")
    doc = parse_isolated(parser, _file(folder, "pdf-1", "pdf", "pdf-1.pdf"))
    assert doc.status is ParseStatus.OK
    assert _words(doc.text) == _words(" ".join(PDF_PAGES))
    assert doc.pages == 2
    assert [b.page for b in doc.blocks] == [1, 2]  # provenance: which page each block is on
    if target.startswith("pdf_pdfminer"):
        assert all(b.bbox is not None and b.bbox[2] > b.bbox[0] for b in doc.blocks)
    scan = parse_isolated(parser, _file(folder, "scan-2", "pdf", "scan-2.pdf"))
    assert scan.status is ParseStatus.EMPTY and "1 of 1 pages are images" in scan.reason


def test_html_main_content_drops_boilerplate_the_baseline_keeps(folder: Path) -> None:
    from bench.parsing.html_strip import HtmlStripParser
    from bench.parsing.html_trafilatura import TrafilaturaParser

    f = _file(folder, "html-1", "html", "html-1.html")
    main = parse_isolated(TrafilaturaParser(), f)
    naive = parse_isolated(HtmlStripParser(), f)
    for doc in (main, naive):
        assert doc.status is ParseStatus.OK
        assert all(p in doc.text for p in HTML_BODY)
        assert "var x" not in doc.text and "color:red" not in doc.text
    assert HTML_NAV not in main.text and HTML_FOOTER not in main.text
    assert HTML_NAV in naive.text and HTML_FOOTER in naive.text


def test_docx_keeps_order_headings_and_table_cells(folder: Path) -> None:
    from bench.parsing.docx import DocxParser

    doc = parse_isolated(DocxParser(), _file(folder, "docx-1", "docx", "docx-1.docx"))
    assert doc.status is ParseStatus.OK
    assert [b.kind for b in doc.blocks] == ["heading", "paragraph", "table"]
    assert [b.text for b in doc.blocks[:2]] == [DOCX_HEADING, DOCX_PARAGRAPH]
    assert doc.tables[0].cells == DOCX_CELLS


def test_markdown_heading_block(folder: Path) -> None:
    from bench.parsing.text import TextParser

    doc = parse_isolated(TextParser(), _file(folder, "md-1", "md", "md-1.md"))
    assert [(b.kind, b.text) for b in doc.blocks] == [("heading", MD_TEXT[0]),
                                                       ("paragraph", MD_TEXT[1])]


@needs_tesseract
def test_tesseract_reads_the_png_and_the_scanned_pdf(folder: Path) -> None:
    from bench.parsing.ocr_tesseract import TesseractParser

    parser = TesseractParser()
    for doc_id, kind, name in (("scan-1", "png", "scan-1.png"), ("scan-2", "pdf", "scan-2.pdf")):
        doc = parse_isolated(parser, _file(folder, doc_id, kind, name))
        assert doc.status is ParseStatus.OK, doc.reason
        assert _words(doc.text) == _words(" ".join(PNG_LINES))
        assert all(b.bbox is not None for b in doc.blocks)


@needs_tesseract
def test_image_with_no_text_is_empty_with_a_reason(tmp_path: Path) -> None:
    from bench.parsing.ocr_tesseract import TesseractParser

    text_png(tmp_path / "blank.png", ())
    doc = parse_isolated(TesseractParser(), RawFile("b", tmp_path / "blank.png", "png",
                                                    "0" * 64, 1))
    assert doc.status is ParseStatus.EMPTY and "no text" in doc.reason


@pytest.mark.slow  # rapidocr loads three ONNX models (~5-20 s on 2 shared cores)
def test_rapidocr_reads_the_png_offline(folder: Path) -> None:
    pytest.importorskip("rapidocr_onnxruntime")
    from bench.parsing.ocr_rapid import RapidOcrParser

    doc = parse_isolated(RapidOcrParser(), _file(folder, "scan-1", "png", "scan-1.png"))
    assert doc.status is ParseStatus.OK, doc.reason
    # its recogniser may drop a space between words; the characters are all there
    assert "".join(doc.text.split()) == "".join("".join(PNG_LINES).split())


def test_undeclared_non_utf8_html_fails_with_its_reason(tmp_path: Path) -> None:
    from bench.parsing.html_strip import HtmlStripParser

    p = tmp_path / "latin.html"
    p.write_bytes("<html><body><p>Caf\u00e9 cr\u00e8me</p></body></html>".encode("latin-1"))
    doc = parse_isolated(HtmlStripParser(), RawFile("x", p, "html", "0" * 64, 1))
    assert doc.status is ParseStatus.FAILED
    assert "unknown encoding: no charset declared and not UTF-8" in doc.reason
    p.write_bytes(b"<meta charset='latin-1'>" + p.read_bytes())  # declared: read right
    assert "Caf\u00e9 cr\u00e8me" in parse_isolated(HtmlStripParser(),
                                                    RawFile("x", p, "html", "0" * 64, 1)).text


def test_encrypted_and_corrupt_pdfs_fail_with_their_reason(folder: Path, tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    from bench.parsing.pdf_pypdf import PypdfParser

    w = PdfWriter(clone_from=PdfReader(folder / "files" / "pdf-1.pdf"))
    w.encrypt("secret")
    w.write(tmp_path / "enc.pdf")
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf body\n")
    enc = parse_isolated(PypdfParser(), RawFile("e", tmp_path / "enc.pdf", "pdf", "0" * 64, 1))
    bad = parse_isolated(PypdfParser(), RawFile("c", tmp_path / "bad.pdf", "pdf", "0" * 64, 1))
    assert enc.status is ParseStatus.FAILED and "encrypted PDF" in enc.reason
    assert bad.status is ParseStatus.FAILED and "corrupt PDF" in bad.reason


def test_a_hang_and_a_crash_cost_one_file_each(folder: Path, tmp_path: Path) -> None:
    f = _file(folder, "md-1", "md", "md-1.md")
    store = ArtifactStore(tmp_path / "cache")
    (hung,) = parse_files([f], {"md": HangParser()}, store, workers=1, timeout_s=1.0)
    assert hung.status is ParseStatus.TIMEOUT and "after 1 s" in hung.reason
    (crashed,) = parse_files([f], {"md": CrashParser()}, store, workers=1, timeout_s=30.0)
    assert crashed.status is ParseStatus.FAILED and "died (exit code -9)" in crashed.reason
    # neither is cached: they say what the machine did, not what the file is
    from bench.parsing.text import TextParser

    first = parse_files([f], {"md": TextParser()}, store, workers=1, timeout_s=30.0)
    again = parse_files([f], {"md": TextParser()}, store, workers=1, timeout_s=30.0)
    assert not first[0].cached and again[0].cached and again[0].text == first[0].text


def _load(folder: Path, parser: str = "bench.parsing.pdf_pypdf.PypdfParser", **kw: Any) -> Any:
    return RawDocsDataset(path=str(folder), parser={"_target_": parser},
                          cache_dir=str(folder / ".cache"), **kw)


def _copy(folder: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "raw"
    shutil.copytree(folder, dst)
    return dst


def _edit_manifest(folder: Path, line: int, **changes: Any) -> None:
    path = folder / "manifest.jsonl"
    rows = path.read_text().splitlines()
    obj = json.loads(rows[line - 1])
    obj.update(changes)
    rows[line - 1] = json.dumps(obj)
    path.write_text("\n".join(rows) + "\n")


@pytest.mark.parametrize(("change", "message"), [
    ({"file": "files/missing.pdf"}, "manifest.jsonl:2: file 'files/missing.pdf' does not exist"),
    ({"type": "xlsx"}, "manifest.jsonl:2: type 'xlsx': no parser takes it"),
    ({"file": "files/zero.pdf"}, "manifest.jsonl:2: file 'files/zero.pdf' is empty (0 bytes)"),
    ({"file": "../outside.pdf"}, "manifest.jsonl:2: file '../outside.pdf' points outside"),
])
def test_bad_manifest_rows_name_file_and_line(folder: Path, tmp_path: Path,
                                              change: dict[str, str], message: str) -> None:
    d = _copy(folder, tmp_path)
    (d / "files" / "zero.pdf").write_bytes(b"")
    _edit_manifest(d, 2, **change)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _load(d).load()


def test_truth_of_another_document_is_bad_input(folder: Path, tmp_path: Path) -> None:
    d = _copy(folder, tmp_path)
    _edit_manifest(d, 1, truth="truth/md-1.json")
    with pytest.raises(InputError, match=r"md-1.json: doc_id 'md-1' does not match its "
                                         r"manifest row 'pdf-1' \(.*manifest.jsonl:1\)"):
        _load(d).load()


def test_oracle_needs_a_truth_file_per_row(folder: Path, tmp_path: Path) -> None:
    d = _copy(folder, tmp_path)
    _edit_manifest(d, 3, truth=None)
    with pytest.raises(InputError, match=r"manifest\.jsonl:3: parser=oracle reads the truth"):
        _load(d, "bench.parsing.oracle.OracleParser").load()


def test_file_over_the_size_limit_and_no_fallback(folder: Path) -> None:
    with pytest.raises(InputError, match=r"manifest.jsonl:1: file 'files/pdf-1.pdf' is 0 MiB, "
                                         r"over dataset.max_file_mb=1e-06"):
        _load(folder, max_file_mb=1e-6).read_manifest()
    src = _load(folder, fallback=False)
    with pytest.raises(InputError, match="parser=pypdf does not read 'png' files"):
        src.parsers_by_type([f.type for f in src.read_manifest()], folder / "manifest.jsonl")


def test_bad_parser_option_names_its_key(folder: Path) -> None:
    with pytest.raises(ConfigError, match=r"config key parser\.extraction_mode: must be plain"):
        RawDocsDataset(path=str(folder), cache_dir=str(folder), parser={
            "_target_": "bench.parsing.pdf_pypdf.PypdfParser", "extraction_mode": "fancy"})


def test_max_docs_keeps_the_first_rows_and_drops_queries_left_without_gold(
        folder: Path, tmp_path: Path) -> None:
    d = _copy(folder, tmp_path)
    src = _load(d, "bench.parsing.oracle.OracleParser", max_docs=2)
    files = src.read_manifest()
    assert [f.doc_id for f in files] == ["pdf-1", "scan-1"]
    ds = src.load()
    assert [q.query_id for q in ds.queries] == ["q-pdf", "q-scan"]
    assert ds.n_dropped_queries == 6 - 2


def test_query_categories_keep_those_queries_and_count_the_others(
        folder: Path, tmp_path: Path) -> None:
    d = _copy(folder, tmp_path)
    ds = _load(d, "bench.parsing.oracle.OracleParser", query_categories=["answers"]).load()
    assert [q.query_id for q in ds.queries] == ["q-pdf", "q-md"]
    assert ds.n_dropped_queries == 6 - 2 and "query_categories" in ds.dropped_reason
    both = _load(d, "bench.parsing.oracle.OracleParser", max_docs=2,
                 query_categories=["answers"]).load()
    assert [q.query_id for q in both.queries] == ["q-pdf"]
    assert both.n_dropped_queries == 6 - 1
    assert "max_docs" in both.dropped_reason and "query_categories" in both.dropped_reason
    with pytest.raises(ConfigError, match=r"config key dataset\.query_categories: no query"):
        _load(d, "bench.parsing.oracle.OracleParser", query_categories=["nope"]).load()
    with pytest.raises(OptionError, match="must name at least one category"):
        _load(d, query_categories=[])
