"""Chunk quality and the extractive answer bound of a parsed run (bench.parsing.quality)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.chunking.base import ChunkTable
from bench.parsing.base import Block, ParsedDocument, ParseStatus, RawFile
from bench.parsing.dataset import ParseOutcome
from bench.parsing.quality import answer_in, chunk_rows, heading_match, parsed_metadata

pytest.importorskip("rapidfuzz", reason="the ingest extra (pip install -e '.[ingest]')")

INTRO = "Black Death"
BODY = "The plague spread in 1347. It killed many."
SECOND = "Aftermath"
LATER = "Wages rose after it"
TEXT = f"{INTRO}\n\n{BODY}\n\n{SECOND}\n\n{LATER}."
TRUTH = {"doc_id": "d", "title": "Black Death", "date": "2024-01-01",
         "blocks": [{"kind": "heading", "text": INTRO}, {"kind": "paragraph", "text": BODY},
                    {"kind": "heading", "text": SECOND},
                    {"kind": "paragraph", "text": LATER + "."}],
         "tables": [], "text": TEXT}


def _table(pieces: list[tuple[int, int, str]]) -> ChunkTable:
    n = len(pieces)
    return ChunkTable(doc_idx=np.zeros(n, np.int32),
                      start_char=np.asarray([s for s, _, _ in pieces], np.int32),
                      end_char=np.asarray([e for _, e, _ in pieces], np.int32),
                      n_tokens=np.ones(n, np.int32), section=tuple(p for _, _, p in pieces),
                      text=tuple(TEXT[s:e] for s, e, _ in pieces))


def test_heading_match_places_chunks_in_the_truth_text() -> None:
    second = TEXT.index(SECOND)
    later = TEXT.index(LATER)
    # chunk 1 sits under INTRO, chunk 2 (starts at SECOND) and 3 (its body) under SECOND
    chunks = [TEXT[:second], TEXT[second:], TEXT[later:]]
    assert heading_match(chunks, [INTRO, f"{INTRO} > {SECOND}", SECOND], TRUTH) == (1.0, 1.0)
    # a chunker that keeps no heading: every chunk sits under one, all three miss
    assert heading_match(chunks, ["", "", ""], TRUTH) == (0.0, 1.0)
    # case and spacing do not count; the wrong section does
    assert heading_match(chunks, ["black  death", INTRO, SECOND], TRUTH) == (2 / 3, 1.0)
    # a parse that dropped the heading still owes it: its chunk sits under INTRO
    assert heading_match([BODY], [""], TRUTH) == (0.0, 1.0)
    # a garbled start (OCR) cannot be placed: left out, and counted in the placed share
    assert heading_match(["Tne plaque spreab in I347.", BODY], ["", INTRO], TRUTH) == (
        1.0, 0.5)
    assert heading_match([], [], TRUTH) == (None, None)


def test_parsed_metadata_reads_the_first_heading_and_iso_date() -> None:
    doc = ParsedDocument("d", "d.pdf", "p", ParseStatus.OK, text="x",
                         blocks=(Block("Intro text, long enough", 1, 0),
                                 Block(SECOND, 1, 1, kind="heading")))
    assert parsed_metadata(doc) == (SECOND, None)
    plain = ParsedDocument("d", "d.pdf", "p", ParseStatus.OK, text="Dated 2024-01-01 here",
                           blocks=(Block("Black Death\nThe plague", 1, 0),))
    assert parsed_metadata(plain) == ("Black Death", "2024-01-01")
    failed = ParsedDocument("d", "d.pdf", "p", ParseStatus.EMPTY)
    assert parsed_metadata(failed) == ("", None)


def test_chunk_rows_scores_cuts_headings_and_metadata(tmp_path: Path) -> None:
    rec = ParsedDocument("d", "d.pdf", "p", ParseStatus.OK, text=TEXT,
                         blocks=(Block(INTRO, 1, 0, kind="heading"), Block(BODY, 1, 1),
                                 Block(SECOND, 1, 2, kind="heading"),
                                 Block(LATER + ".", 1, 3)))
    f = RawFile("d", tmp_path / "d.pdf", "pdf", "0" * 64, 1, "one_column", "squad2")
    outcome = ParseOutcome("p", (f,), (rec,), 0.0, 1, 1.0)
    mid = TEXT.index("It killed")  # the first chunk ends after a full stop: no cut
    cut = TEXT.index("rose") + 4  # the second ends inside a sentence: a cut
    chunks = _table([(0, mid, INTRO), (mid, cut, SECOND), (cut, len(TEXT), SECOND)])
    (row,) = chunk_rows("dense", chunks, outcome, [TRUTH])
    assert row["chunks"] == 3 and row["boundaries"] == 2
    assert row["sentence_cuts"] == 1 and row["sentence_cut_rate"] == 1 / 2
    # chunk 2 starts inside BODY (under INTRO) but carries SECOND; chunk 3's start
    # (" after it.") is too short to place it: 1 of 2 placed chunks right
    assert row["heading_match"] == 1 / 2 and row["heading_placed"] == pytest.approx(2 / 3)
    assert row["title_match"] == 1.0
    assert row["date_match"] == 0.0  # the truth's date is in no parsed text
    assert row["tables_cut"] is None  # the truth has no table
    # a document without truth gives no row
    assert chunk_rows("dense", chunks, outcome, [None]) == []


def test_answer_in_needs_whole_normalised_tokens() -> None:
    assert answer_in(["The plague spread in 1347."], ["in 1347"])
    assert answer_in(["", "the Black-Death killed"], ["nothing", "blackdeath"])
    assert not answer_in(["in 13470 it spread"], ["1347"])  # a token prefix is not the answer
    assert not answer_in(["The plague"], ["", "  "])  # references that normalise to nothing
