"""parser=unstructured: its offline requirements are checked when the option is built (the
package, NLTK's data, hi_res's layout model: one line each), and its elements become blocks
with page, box and table cells. The partitioning itself needs NLTK data nobody can fetch
offline; the element conversion runs where unstructured is installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench.config.build import build
from bench.errors import BenchError, ConfigError
from bench.parsing.base import Block, ParsedTable
from bench.parsing.unstructured_io import NLTK_RESOURCES, html_cells, missing_nltk_data


def test_missing_nltk_data_looks_in_every_path(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert missing_nltk_data([str(a), str(b)]) == [n for _, n in NLTK_RESOURCES]
    (a / "tokenizers" / "punkt_tab").mkdir(parents=True)
    assert missing_nltk_data([str(a), str(b)]) == ["averaged_perceptron_tagger_eng"]
    (b / "taggers").mkdir(parents=True)
    (b / "taggers" / "averaged_perceptron_tagger_eng.zip").write_bytes(b"PK")
    assert missing_nltk_data([str(a), str(b)]) == []


def test_html_cells_rows_of_cell_text() -> None:
    html = ("<table><thead><tr><th>station</th><th>metres</th></tr></thead>"
            "<tbody><tr><td>north\n </td><td>1<b>20</b></td></tr><tr></tr></tbody></table>")
    assert html_cells(html) == (("station", "metres"), ("north", "120"))


def test_bad_strategy_names_its_key() -> None:
    with pytest.raises(ConfigError) as err:
        build({"_target_": "bench.parsing.unstructured_io.UnstructuredParser",
               "strategy": "ocr_only"}, "parser")
    assert err.value.key == "parser.strategy"


@pytest.mark.skipif(importlib.util.find_spec("unstructured") is not None,
                    reason="unstructured is installed")
def test_without_the_package_one_line_names_the_extra() -> None:
    with pytest.raises(BenchError) as err:
        build({"_target_": "bench.parsing.unstructured_io.UnstructuredParser"}, "parser")
    msg = str(err.value)
    assert "\n" not in msg and "'unstructured'" in msg and ".[unstructured]" in msg


def test_element_blocks_from_real_elements() -> None:
    pytest.importorskip("unstructured", reason="the unstructured extra")
    from unstructured.documents.coordinates import PointSpace
    from unstructured.documents.elements import (
        CoordinatesMetadata,
        ElementMetadata,
        Footer,
        NarrativeText,
        Table,
        Title,
    )

    from bench.parsing.unstructured_io import element_blocks

    body = NarrativeText("Glaciers retreat.", metadata=ElementMetadata(page_number=1))
    body.metadata.coordinates = CoordinatesMetadata(
        points=((10, 20), (10, 40), (200, 40), (200, 20)), system=PointSpace(600, 800))
    els = [Title("Glacier report", metadata=ElementMetadata(page_number=1)), body,
           Table("station metres north 120", metadata=ElementMetadata(
               page_number=2, text_as_html="<table><tr><td>station</td><td>metres</td></tr>"
                                           "<tr><td>north</td><td>120</td></tr></table>")),
           Footer("Page 2", metadata=ElementMetadata(page_number=2))]
    blocks, tables = element_blocks(els, drop_boilerplate=True)
    assert blocks == [Block("Glacier report", 1, 0, "heading"),
                      Block("Glaciers retreat.", 1, 1, "paragraph", (10.0, 20.0, 200.0, 40.0)),
                      Block("station metres\nnorth 120", 2, 2, "table")]
    assert tables == [ParsedTable((("station", "metres"), ("north", "120")), 2)]
    kept, _ = element_blocks(els, drop_boilerplate=False)
    assert kept[-1] == Block("Page 2", 2, 3, "footer")
