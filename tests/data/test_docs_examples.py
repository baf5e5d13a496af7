"""The example files of docs/data.md load through the command-line options the page shows
(``dataset=golden dataset.corpus=...``: composed by Hydra, built by bench's option builder),
and load into what the page says they hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.config.build import build
from bench.data.base import Dataset

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def _load(compose_cfg, overrides: list[str]) -> Dataset:  # type: ignore[no-untyped-def]
    cfg = compose_cfg(overrides)
    loader = build(cfg.dataset, "dataset")
    assert loader is not None
    return loader.load()


def test_golden_example(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    # the page's command: an experiment with the dataset swapped on the command line
    ds = _load(compose_cfg, ["+experiment=quickstart", "dataset=golden",
                             f"dataset.corpus={EXAMPLES}/golden/corpus.jsonl",
                             f"dataset.queries={EXAMPLES}/golden/queries.jsonl"])
    assert [d.doc_id for d in ds.documents] == ["d1", "d2", "d3"]
    assert ds.documents[2].allowed_roles == ("staff",)
    q = {x.query_id: x for x in ds.queries}
    assert q["q1"].qrels == (("d1", 1),) and q["q1"].expected_answer == "TCP"
    assert q["q2"].qrels == (("d1", 2), ("d2", 2))  # graded form
    assert q["q4"].must_abstain and q["q4"].qrels == ()
    assert q["q3"].allowed_roles == ("staff",)


def test_golden_example_with_category_map(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    ds = _load(compose_cfg, ["dataset=golden", f"dataset.corpus={EXAMPLES}/golden/corpus.jsonl",
                             f"dataset.queries={EXAMPLES}/golden/queries.jsonl",
                             f"dataset.categories={EXAMPLES}/categories.jsonl"])
    assert [x.category for x in ds.queries] == ["transport", "comparison", "uncategorized",
                                                "uncategorized"]


def test_beir_example(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    ds = _load(compose_cfg, ["+experiment=quickstart", "dataset=beir",
                             f"dataset.path={EXAMPLES}/beir",
                             "dataset.category_field=metadata.type", "chunker=none",
                             "metrics=beir"])
    # passage = (title + " " + text).strip(); an untitled document is its text
    assert ds.documents[0].text.startswith("TCP Transmission Control Protocol")
    assert ds.documents[2].text.startswith("An untitled passage")
    assert [(x.query_id, x.category) for x in ds.queries] == [("q1", "lookup"), ("q2", "lookup")]
    assert ds.n_dropped_queries == 1  # q3 has no judgement: dropped and counted


def test_csv_example(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    ds = _load(compose_cfg, ["dataset=csv", f"dataset.corpus={EXAMPLES}/csv/corpus.csv",
                             f"dataset.queries={EXAMPLES}/csv/queries.csv",
                             f"dataset.qrels={EXAMPLES}/csv/qrels.csv"])
    assert ds.documents[1].tags == ("networking", "datagrams")  # ';'-separated list cell
    q = {x.query_id: x for x in ds.queries}
    assert q["q2"].qrels == (("d2", 1),)  # an empty grade cell means 1
    assert q["q3"].must_abstain and q["q3"].expected_answer is None


@pytest.mark.parametrize("name", ["golden/corpus.jsonl", "golden/queries.jsonl",
                                  "beir/corpus.jsonl", "beir/queries.jsonl",
                                  "beir/qrels/test.tsv", "csv/corpus.csv", "csv/queries.csv",
                                  "csv/qrels.csv", "categories.jsonl"])
def test_data_page_shows_each_example(name: str) -> None:
    page = (EXAMPLES.parent / "data.md").read_text(encoding="utf-8")
    assert f"docs/examples/{name}" in page
