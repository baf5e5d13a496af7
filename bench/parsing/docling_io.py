"""Docling: PDF layout analysis (its layout model, TableFormer for tables) or a VLM that
reads each page image into DocTags (``pipeline: vlm``, granite-docling by default) — the
GPU-box parsers of docs/ingestion.md. HTML and DOCX go through Docling's model-free
backends. Each document item (``iterate_items``) is a block with its label as the kind, its
first provenance's page and bounding box (Docling's ``l, t, r, b`` in PDF points, origin as
Docling reports it: normalised here to top-left), tables with their cells
(``TableItem.data.grid``).

Models are never downloaded here: they must already be in ``artifacts_path``, one folder per
Hugging Face repository with ``/`` written ``--`` (Docling's own layout, what
``docling-tools models download`` writes). Building the option checks that folder first and
names the missing model in one line (exit 2) before any work — so the check holds on a box
without Docling too; then it needs the ``docling`` package, which pins
``huggingface_hub<2`` and ``typer<0.27`` (below this project's venv): install it in a venv
of its own with bench (``pip install -e '.[docling]'``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from bench.config.build import OptionError
from bench.errors import BenchError, ConfigError
from bench.parsing.base import Block, ParsedDocument, ParsedTable, ParserBase, RawFile, from_blocks
from bench.parsing.pdf_common import check_pdf, empty_pdf_reason, open_pdf_checked

#: Docling's default models by pipeline (docling.datamodel.layout_model_specs
#: DOCLING_LAYOUT_HERON, TableStructureModel's repo, vlm_model_specs GRANITEDOCLING_*)
LAYOUT_REPO = "docling-project/docling-layout-heron"
TABLE_REPO = "docling-project/docling-models"
VLM_REPO = "ibm-granite/granite-docling-258M"
DEFAULT_ARTIFACTS = "~/.cache/docling/models"
_KIND = {"title": "heading", "section_header": "heading", "list_item": "list",
         "table": "table", "page_header": "header", "page_footer": "footer",
         "footnote": "footnote", "caption": "caption"}
INSTALL = ("parser=docling needs the Python package 'docling', which pins huggingface_hub<2 "
           "and typer<0.27 (this venv has newer): install bench with it in a venv of its own "
           "(pip install -e '.[docling]')")


class DoclingMissing(BenchError):
    """Docling is not installed (one line: how to install it)."""


def repo_folder(repo_id: str) -> str:
    """Docling's folder name for a Hugging Face repository under ``artifacts_path``."""
    return repo_id.replace("/", "--")


def missing_models(artifacts: Path, repos: tuple[str, ...]) -> list[str]:
    """The repos of ``repos`` with no non-empty folder under ``artifacts``."""
    out = []
    for repo in repos:
        folder = artifacts / repo_folder(repo)
        if not (folder.is_dir() and any(folder.iterdir())):
            out.append(repo)
    return out


class DoclingParser(ParserBase):
    """``pipeline``: ``standard`` (layout model + TableFormer) or ``vlm`` (one VLM reads each
    page); ``artifacts_path``: the folder of model folders; ``vlm_repo``: the VLM (its
    transformers inline spec in Docling: granite-docling or SmolDocling); ``tables``: run
    TableFormer (standard); ``ocr``: Docling's OCR on bitmap areas (needs its OCR engine's
    models too; off by default); ``device``: auto | cpu | cuda."""

    name: ClassVar[str] = "docling"
    types: ClassVar[tuple[str, ...]] = ("pdf", "html", "docx")

    def __init__(self, *, pipeline: str = "standard", artifacts_path: str = DEFAULT_ARTIFACTS,
                 vlm_repo: str = VLM_REPO, tables: bool = True, ocr: bool = False,
                 device: str = "auto") -> None:
        import importlib.util

        if pipeline not in ("standard", "vlm"):
            raise OptionError("pipeline", f"must be standard or vlm, got {pipeline!r}")
        if device not in ("auto", "cpu", "cuda"):
            raise OptionError("device", f"must be auto, cpu or cuda, got {device!r}")
        artifacts = Path(os.path.expanduser(artifacts_path))
        repos = ((LAYOUT_REPO, TABLE_REPO) if tables else (LAYOUT_REPO,)) \
            if pipeline == "standard" else (vlm_repo,)
        missing = missing_models(artifacts, repos)
        if missing:
            raise ConfigError("parser.artifacts_path", "docling's model(s) "
                              + ", ".join(f"{r} (expected {artifacts / repo_folder(r)})"
                                          for r in missing)
                              + " not found; offline nothing is downloaded: fetch them on a "
                              "machine with network (docling-tools models download, or "
                              "huggingface-cli download) and copy the folders there")
        if importlib.util.find_spec("docling") is None:
            raise DoclingMissing(INSTALL)
        self.pipeline = pipeline
        self.artifacts_path = str(artifacts)
        self.vlm_repo = vlm_repo
        self.tables = tables
        self.ocr = ocr
        self.device = device
        self._converter: Any = None

    def cache_params(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "vlm_repo": self.vlm_repo, "tables": self.tables,
                "ocr": self.ocr}

    def __getstate__(self) -> dict[str, Any]:  # models are loaded in the worker
        return {**self.__dict__, "_converter": None}

    def _build(self) -> Any:
        from docling.datamodel.accelerator_options import AcceleratorOptions
        from docling.datamodel.base_models import InputFormat
        from docling.document_converter import DocumentConverter, PdfFormatOption

        accel = AcceleratorOptions(device=self.device)
        if self.pipeline == "vlm":
            from docling.datamodel import vlm_model_specs
            from docling.datamodel.pipeline_options import VlmPipelineOptions
            from docling.pipeline.vlm_pipeline import VlmPipeline

            spec = vlm_model_specs.GRANITEDOCLING_TRANSFORMERS.model_copy(
                update={"repo_id": self.vlm_repo})
            opts: Any = VlmPipelineOptions(artifacts_path=self.artifacts_path, vlm_options=spec,
                                           accelerator_options=accel)
            fmt = PdfFormatOption(pipeline_cls=VlmPipeline, pipeline_options=opts)
        else:
            from docling.datamodel.pipeline_options import PdfPipelineOptions

            opts = PdfPipelineOptions(artifacts_path=self.artifacts_path, do_ocr=self.ocr,
                                      do_table_structure=self.tables,
                                      accelerator_options=accel)
            fmt = PdfFormatOption(pipeline_options=opts)
        return DocumentConverter(format_options={InputFormat.PDF: fmt})

    def parse_one(self, f: RawFile) -> ParsedDocument:
        from docling.datamodel.base_models import ConversionStatus

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        reader = None
        if f.type == "pdf":
            check_pdf(f.path)
            reader = open_pdf_checked(f.path)
        if self._converter is None:
            self._converter = self._build()
        result = self._converter.convert(str(f.path), raises_on_error=False)
        if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
            reasons = "; ".join(str(e.error_message) for e in result.errors) or "no reason given"
            raise RuntimeError(f"docling conversion {result.status.value}: {reasons}")
        blocks, tables = document_blocks(result.document)
        if reader is None:
            return from_blocks(f, self.name, blocks, pages=1, tables=tables,
                               empty_reason="docling found no text item")
        return from_blocks(f, self.name, blocks, pages=len(reader.pages), tables=tables,
                           empty_reason=empty_pdf_reason(reader))


def document_blocks(doc: Any) -> tuple[list[Block], list[ParsedTable]]:
    """A ``DoclingDocument``'s items in reading order as blocks, its tables' cells."""
    from docling_core.types.doc import TableItem, TextItem

    blocks: list[Block] = []
    tables: list[ParsedTable] = []
    for item, _level in doc.iterate_items():
        page, bbox = 0, None
        if item.prov:
            prov = item.prov[0]
            page = int(prov.page_no)
            height = doc.pages[page].size.height if page in doc.pages else None
            box = prov.bbox.to_top_left_origin(page_height=height) if height else prov.bbox
            bbox = (float(box.l), float(box.t), float(box.r), float(box.b))
        label = str(getattr(item.label, "value", item.label))
        if isinstance(item, TableItem):
            cells = tuple(tuple(c.text for c in row) for row in item.data.grid)
            tables.append(ParsedTable(cells, page))
            blocks.append(Block("\n".join(" ".join(r) for r in cells), page, len(blocks),
                                "table", bbox))
        elif isinstance(item, TextItem):
            blocks.append(Block(item.text, page, len(blocks), _KIND.get(label, "paragraph"),
                                bbox))
    return blocks, tables
