"""``unstructured`` partitioning: ``partition_pdf`` (``strategy`` fast | hi_res),
``partition_html`` and ``partition_docx``; each element a block with its category as the kind
(Title -> heading, ListItem -> list, Table -> table with its cells from ``text_as_html``),
its page number and, for PDFs, its bounding box (the element's coordinate points, in PDF
points for ``fast``, pixels for ``hi_res``).

What it needs besides the package, checked when the option is built (one line, exit 2, before
any file is read — never a download at run time):

- NLTK's ``punkt_tab`` tokenizer and ``averaged_perceptron_tagger_eng`` tagger: every
  partitioner classifies text with them, and ``unstructured`` otherwise downloads them on
  import (we switch that off: ``AUTO_DOWNLOAD_NLTK=False``). Offline they must already be on
  ``nltk.data.path`` (``$NLTK_DATA``).
- ``hi_res``: the layout model ``unstructuredio/yolo_x_layout`` (``yolox_l0.05.onnx``) in the
  Hugging Face cache, and poppler's ``pdftoppm`` to render pages.

``drop_boilerplate`` drops the elements ``unstructured`` labels Header, Footer and PageNumber
(its own boilerplate detection), as a RAG pipeline built on it would.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

from bench.config.build import OptionError
from bench.errors import ConfigError, MissingDependencyError
from bench.parsing.base import Block, ParsedDocument, ParsedTable, ParserBase, RawFile, from_blocks
from bench.parsing.encoding import decode_text
from bench.parsing.pdf_common import check_pdf, empty_pdf_reason, open_pdf_checked

#: the NLTK resources unstructured's text classification loads (unstructured.nlp.tokenize)
NLTK_RESOURCES = (("tokenizers", "punkt_tab"), ("taggers", "averaged_perceptron_tagger_eng"))
#: hi_res's default layout model (unstructured_inference.models.yolox, model "yolox")
HI_RES_MODEL = ("unstructuredio/yolo_x_layout", "yolox_l0.05.onnx")
BOILERPLATE = ("Header", "Footer", "PageNumber")
_KIND = {"Title": "heading", "ListItem": "list", "Table": "table", "Header": "header",
         "Footer": "footer", "PageNumber": "page_number", "FigureCaption": "caption",
         "Footnote": "footnote"}


def missing_nltk_data(paths: Sequence[str]) -> list[str]:
    """The NLTK resources of :data:`NLTK_RESOURCES` found under none of ``paths`` (a folder
    or NLTK's zip of it, as ``nltk.data.find`` accepts)."""
    out: list[str] = []
    for category, name in NLTK_RESOURCES:
        if not any((Path(p) / category / name).is_dir()
                   or (Path(p) / category / f"{name}.zip").is_file() for p in paths):
            out.append(name)
    return out


def nltk_search_path() -> list[str]:
    """Where NLTK looks (``nltk.data.path``: ``$NLTK_DATA`` first, then its defaults)."""
    import nltk

    return [str(p) for p in nltk.data.path]


def hi_res_model_missing(cache_dir: str | None = None) -> str:
    """'' when the hi_res layout model file is in the Hugging Face cache, else its name."""
    from huggingface_hub import try_to_load_from_cache

    repo, filename = HI_RES_MODEL
    found = try_to_load_from_cache(repo, filename, cache_dir=cache_dir)
    return "" if isinstance(found, str) else f"{repo}/{filename}"


class _Cells(HTMLParser):
    """Rows of cell texts of an HTML table (``text_as_html``)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            if not self.rows:
                self.rows.append([])
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_cells(html: str) -> tuple[tuple[str, ...], ...]:
    p = _Cells()
    p.feed(html)
    return tuple(tuple(r) for r in p.rows if r)


def element_blocks(elements: Sequence[Any], *, drop_boilerplate: bool
                   ) -> tuple[list[Block], list[ParsedTable]]:
    """unstructured elements (``category``, ``text``, ``metadata.page_number``,
    ``metadata.coordinates``, ``metadata.text_as_html``) as blocks and tables."""
    blocks: list[Block] = []
    tables: list[ParsedTable] = []
    for el in elements:
        category = str(getattr(el, "category", ""))
        if drop_boilerplate and category in BOILERPLATE:
            continue
        md = el.metadata
        page = int(md.page_number or 0)
        bbox = None
        coords = md.coordinates
        if coords is not None and coords.points:
            xs = [float(x) for x, _ in coords.points]
            ys = [float(y) for _, y in coords.points]
            bbox = (min(xs), min(ys), max(xs), max(ys))
        kind = _KIND.get(category, "paragraph")
        text = str(el.text or "")
        if category == "Table" and md.text_as_html:
            cells = html_cells(md.text_as_html)
            if cells:
                tables.append(ParsedTable(cells, page))
                text = "\n".join(" ".join(r) for r in cells)
        blocks.append(Block(text, page, len(blocks), kind, bbox))
    return blocks, tables


class UnstructuredParser(ParserBase):
    """``strategy``: partition_pdf's ``fast`` (pdfminer text layer) or ``hi_res`` (layout
    model + OCR); ``tables``: infer table structure (hi_res) and keep HTML/DOCX tables' cells;
    ``drop_boilerplate``: drop Header / Footer / PageNumber elements; ``hf_cache_dir``: where
    hi_res's layout model is looked up (the Hugging Face cache by default)."""

    name: ClassVar[str] = "unstructured"
    types: ClassVar[tuple[str, ...]] = ("pdf", "html", "docx")

    def __init__(self, *, strategy: str = "fast", tables: bool = True,
                 drop_boilerplate: bool = True, hf_cache_dir: str | None = None) -> None:
        import importlib.util
        import shutil

        if strategy not in ("fast", "hi_res"):
            raise OptionError("strategy", f"must be fast or hi_res, got {strategy!r} "
                                          "(ocr_only is parser=tesseract's job)")
        if importlib.util.find_spec("unstructured") is None:
            raise MissingDependencyError("unstructured", "unstructured", "parser=unstructured")
        missing = missing_nltk_data(nltk_search_path())
        if missing:
            raise ConfigError("parser", f"unstructured needs NLTK's {' and '.join(missing)} "
                              f"offline and finds them on none of {nltk_search_path()}: put "
                              "them under $NLTK_DATA (python -m nltk.downloader punkt_tab "
                              "averaged_perceptron_tagger_eng, on a machine with network)")
        if strategy == "hi_res":
            if importlib.util.find_spec("unstructured_inference") is None:
                raise MissingDependencyError("unstructured_inference", "unstructured",
                                             "parser=unstructured strategy=hi_res")
            model = hi_res_model_missing(hf_cache_dir)
            if model:
                raise ConfigError("parser.strategy", f"hi_res needs the layout model {model} "
                                  "in the Hugging Face cache and it is not there (offline: "
                                  "download it on a machine with network, or use "
                                  "strategy=fast)")
            if shutil.which("pdftoppm") is None:
                raise ConfigError("parser.strategy", "hi_res renders pages with poppler's "
                                  "pdftoppm, which is not on PATH (apt-get install "
                                  "poppler-utils)")
        self.strategy = strategy
        self.tables = tables
        self.drop_boilerplate = drop_boilerplate
        self.hf_cache_dir = hf_cache_dir

    def cache_params(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "tables": self.tables,
                "drop_boilerplate": self.drop_boilerplate}

    def parse_one(self, f: RawFile) -> ParsedDocument:
        os.environ["AUTO_DOWNLOAD_NLTK"] = "False"  # read on import: never download
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if f.type == "pdf":
            from unstructured.partition.pdf import partition_pdf

            check_pdf(f.path)
            reader = open_pdf_checked(f.path)
            elements = partition_pdf(filename=str(f.path), strategy=self.strategy,
                                     infer_table_structure=self.tables, languages=["eng"])
            blocks, tables = element_blocks(elements, drop_boilerplate=self.drop_boilerplate)
            return from_blocks(f, self.name, blocks, pages=len(reader.pages), tables=tables,
                               empty_reason=empty_pdf_reason(reader))
        if f.type == "html":
            from unstructured.partition.html import partition_html

            elements = partition_html(text=decode_text(f.path.read_bytes(), html=True))
        else:
            from unstructured.partition.docx import partition_docx

            elements = partition_docx(filename=str(f.path))
        blocks, tables = element_blocks(elements, drop_boilerplate=self.drop_boilerplate)
        if not self.tables:
            tables = []
        return from_blocks(f, self.name, blocks, pages=1, tables=tables,
                           empty_reason="unstructured found no element with text")
