"""The ingestion benchmark builder on a small N: the INGEST_LAYOUT folder, truth consistent
with the files, queries loadable by the golden reader, same bytes twice, one-line errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.data.base import Document, Query
from bench.data.golden import read_corpus, read_queries, write_golden
from bench.ingest import build as B
from bench.ingest.rst import rst_blocks
from bench.ingest.sources import SQUAD_SAMPLE, python_doc_pages

LONG = ("A compiler translates a program written in one language into another language. "
        "It runs before the program does. The output is often machine code for a processor. ")


def _foldoc(tmp: Path) -> Path:
    """A FOLDOC-shaped folder: six entries (over the 300 characters the builder asks of an
    entry), one query each, and an abstention query."""
    folder = tmp / "foldoc"
    folder.mkdir()
    docs = [Document(f"e{k}", f"{LONG}{LONG}Entry number {k} ends here.\n\nSecond paragraph {k}.",
                     title=f"term{k}") for k in range(6)]
    qs = [Query(f"q{k}", f"what is term{k}?", category="exact_lookup",
                qrels=((f"e{k}", 1),), expected_answer=f"Entry number {k}") for k in range(6)]
    qs.append(Query("qa", "unknown?", category="abstain", must_abstain=True))
    write_golden(docs, qs, corpus=folder / "corpus.jsonl", queries_path=folder / "queries.jsonl")
    return folder


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("ingest")
    foldoc = _foldoc(tmp)
    opts = B.BuildOptions(n_squad=9, n_foldoc=2, n_real=0, real="none", pii_share=0.5)
    for name in ("a", "b"):
        B.build(tmp / name, opts, squad=SQUAD_SAMPLE, foldoc=foldoc, cache_dir=None)
    return tmp / "a", tmp / "b"


def test_same_bytes_twice(built: tuple[Path, Path]):
    a, b = built
    da, db = _digest(a), _digest(b)
    assert da == db
    # 11 files + 11 truth files + manifest, queries, oracle corpus, build.json
    assert len(da) == 11 + 11 + 4


def test_layout_and_truth(built: tuple[Path, Path]):
    out = built[0]
    manifest = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    # 9 SQuAD documents deal each of the 9 layouts once
    squad = [m for m in manifest if m["source"] == "squad2"]
    kinds = sorted((m["type"], m["layout"]) for m in squad)
    assert kinds == sorted([("pdf", "one_column"), ("pdf", "two_column"),
                            ("pdf", "headers_footers"), ("pdf", "table"), ("pdf", "footnotes"),
                            ("png", "scan"), ("pdf", "scan"), ("html", "html_boilerplate"),
                            ("docx", "docx")])
    assert sum(m["source"] == "foldoc" for m in manifest) == 2
    magic = {"pdf": b"%PDF", "png": b"\x89PNG", "docx": b"PK", "html": b"<!DOCTYPE"}
    planted = 0
    for m in manifest:
        data = (out / m["file"]).read_bytes()
        assert data.startswith(magic[m["type"]]), m["file"]
        truth = json.loads((out / m["truth"]).read_text())
        assert truth["doc_id"] == m["doc_id"]
        assert truth["text"] == "\n\n".join(b["text"] for b in truth["blocks"])
        assert truth["language"] == "en" and truth["pages"] >= 1
        for p in truth["pii"]:
            assert p["text"] in truth["text"]
        planted += bool(truth["pii"])
        if m["layout"] == "headers_footers":
            n = truth["pages"]
            assert sorted(b["kind"] for b in truth["boilerplate"]) == sorted(
                ["header", "footer", "page_number"] * n)
            assert {b["text"] for b in truth["boilerplate"]} >= {f"Page {n} of {n}"}
        if m["layout"] in ("table", "docx", "html_boilerplate"):
            (table,) = truth["tables"]
            assert table["cells"][0] == ["Section", "Words", "Sentences", "Opens with"]
            assert any(b["kind"] == "table" for b in truth["blocks"])
        if m["layout"] == "footnotes":
            assert [b["kind"] for b in truth["blocks"]].count("footnote") >= 1
        if m["type"] == "html":
            assert data.decode("utf-8").count(truth["blocks"][1]["text"][:40]) == 1
    assert planted >= 1


def test_queries_and_oracle_load(built: tuple[Path, Path]):
    out = built[0]
    corpus = read_corpus(out / "oracle_corpus.jsonl")
    queries = read_queries(out / "queries.jsonl", {d.doc_id for d in corpus})
    by_id = {d.doc_id: d for d in corpus}
    assert {q.category for q in queries} == {"squad2", "exact_lookup"}
    for q in queries:
        text = by_id[q.qrels[0][0]].text.casefold()
        assert q.references and all(a.casefold() in text for a in q.references)
    # the FOLDOC abstention query and the queries of entries left out are not kept
    assert all(not q.must_abstain for q in queries)


def test_up_to_date_and_bad_arguments(built: tuple[Path, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]):
    opts = B.BuildOptions(n_squad=9, n_foldoc=2, n_real=0, real="none", pii_share=0.5)
    assert B.build(built[0], opts, squad=SQUAD_SAMPLE, foldoc=tmp_path, cache_dir=None) is None
    for argv, needle in (
            (["--out", str(tmp_path / "o"), "--n-squad", "-1"], "--n-squad"),
            (["--out", str(tmp_path / "o"), "--pii-share", "2"], "--pii-share"),
            (["--out", str(tmp_path / "o"), "--foldoc", str(tmp_path / "none")], "make data"),
            (["--out", str(tmp_path / "o"), "--squad", str(tmp_path)], "paragraphs.jsonl")):
        assert B.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and needle in err


def test_rst_blocks_strip_markup():
    src = """:mod:`spam` --- Eggs
===================

.. module:: spam
   :synopsis: A module.

.. index:: single: spam

The :func:`~spam.eat` function takes ``n`` *small* eggs, see `docs <https://x.y>`_::

   >>> eat(1)

.. note::

   Eggs are **fresh**.

.. versionadded:: 3.2

* one item
"""
    assert rst_blocks(src) == [
        ("heading", "spam --- Eggs"),
        ("paragraph", "The eat function takes n small eggs, see docs:"),
        ("paragraph", ">>> eat(1)"),
        ("paragraph", "Note"),
        ("paragraph", "Eggs are fresh."),
        ("paragraph", "New in version 3.2."),
        ("paragraph", "one item"),
    ]


def test_python_doc_pages_pairs_html_with_source(tmp_path: Path):
    root = tmp_path / "html"
    (root / "_sources" / "library").mkdir(parents=True)
    (root / "library").mkdir()
    body = "Title\n=====\n\n" + "Some text. " * 300
    for name in ("a", "b", "c"):
        (root / "_sources" / "library" / f"{name}.rst.txt").write_text(body)
    for name in ("a", "b"):  # c has no rendered page: skipped
        (root / "library" / f"{name}.html").write_text("<html></html>")
    docs = python_doc_pages(root, 5)
    assert [d.doc_id for d in docs] == ["pydoc-a", "pydoc-b"]
    assert docs[0].blocks[0].text == "Title" and docs[0].raw_type == "html"
