"""The ingestion metrics on tiny hand-computed cases (expected values as arithmetic), each
library-backed one cross-checked against the arithmetic of its definition."""

from __future__ import annotations

import pytest

from bench.ingest.metrics import (
    boilerplate_pr,
    cell_accuracy,
    chunk_cuts,
    destroyed_answers,
    locate_spans,
    metadata_accuracy,
    page_emptiness,
    pii_scores,
    reading_order,
    table_scores,
    teds,
    text_fidelity,
    token_iou,
    unicode_counts,
)
from bench.ingest.metrics.pii import Span, fbeta

T2x2 = "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>dd</td></tr></table>"


def test_text_fidelity_hand_counted():
    truth = {"text": "the cat sat\n\non the mat"}
    # one substituted word of six ("cat" -> "cot"): WER 1/6; one substituted char of
    # 22 ("the cat sat on the mat" is 22 characters with its spaces): CER 1/22
    got = text_fidelity("the cot sat on the   mat", truth)
    assert got["wer"] == pytest.approx(1 / 6)
    assert got["cer"] == pytest.approx(1 / 22)
    assert got["length_ratio"] == pytest.approx(22 / 22)
    # everything lost: all three at their worst without calling jiwer on an empty string
    assert text_fidelity("  \n", truth) == {"cer": 1.0, "wer": 1.0, "length_ratio": 0.0}
    # half the words dropped: 3 deletions of 6 words, length 10 / 22
    got = text_fidelity("the cat sat", truth)
    assert got["wer"] == pytest.approx(3 / 6)
    assert got["length_ratio"] == pytest.approx(11 / 22)
    with pytest.raises(ValueError):
        text_fidelity("x", {"text": " "})


def test_cer_agrees_with_levenshtein():
    from rapidfuzz.distance import Levenshtein

    ref, hyp = "Norman conquest of 1066", "Norrnan conquest of 1O66"
    got = text_fidelity(hyp, {"text": ref})["cer"]
    assert got == pytest.approx(Levenshtein.distance(ref, hyp) / len(ref))
    # "m" -> "rn" is one substitution and one insertion; "0" -> "O" one substitution
    assert got == pytest.approx(3 / 23)


def test_page_emptiness():
    got = page_emptiness(["", "  \n", "p. 3", "x" * 40], near_empty_chars=20)
    assert got["empty_pages"] == 2 and got["near_empty_pages"] == 1
    assert got["empty_rate"] == pytest.approx(2 / 4)
    assert got["near_empty_rate"] == pytest.approx(1 / 4)
    assert page_emptiness([])["empty_rate"] == 0.0


def test_teds_hand_computed():
    # the tree: table, 2 tr, 4 td = 7 nodes
    assert teds(T2x2, T2x2) == 1.0
    # one cell text "dd" -> "d": rename cost = normalised Levenshtein 1/2
    assert teds([["a", "b"], ["c", "d"]], T2x2) == pytest.approx(1 - 0.5 / 7)
    assert teds([["a", "b"], ["c", "d"]], T2x2, structure_only=True) == 1.0
    # a whole row lost: delete tr + 2 td = 3 of max(4, 7) nodes
    assert teds([["a", "b"]], T2x2) == pytest.approx(1 - 3 / 7)
    # no table at all: only the root is left, 6 deletions
    assert teds("<p>no table</p>", T2x2) == pytest.approx(1 - 6 / 7)
    # a colspan differs: a rename of cost 1 (plus one deleted td)
    spanned = "<table><tr><td colspan='2'>a</td></tr><tr><td>c</td><td>dd</td></tr></table>"
    assert teds(spanned, T2x2) == pytest.approx(1 - 2 / 7)


def test_teds_is_the_tree_edit_distance_of_apted():
    """The same distance apted's own bracket-notation trees give, on structure only."""
    from apted import APTED
    from apted.helpers import Tree

    a = Tree.from_text("{table{tr{td}{td}}{tr{td}{td}}}")
    b = Tree.from_text("{table{tr{td}{td}}}")
    dist = APTED(a, b).compute_edit_distance()
    assert dist == 3
    assert teds([["a", "b"]], T2x2, structure_only=True) == pytest.approx(1 - dist / 7)


def test_cell_accuracy_and_table_scores():
    assert cell_accuracy([["a", "B"], ["c", "x"]], T2x2) == pytest.approx(3 / 4)
    assert cell_accuracy([["a"]], T2x2) == pytest.approx(1 / 4)
    truth = {"tables": [{"cells": [["a", "b"], ["c", "dd"]], "html": T2x2}]}
    got = table_scores([[["zz"]], [["a", "b"], ["c", "dd"]]], truth)
    assert got["teds"] == 1.0 and got["cell_accuracy"] == 1.0 and got["tables_found"] == 1
    got = table_scores([], truth)
    assert got["teds"] == 0.0 and got["tables_found"] == 0
    assert table_scores([], {"tables": []}) == {}


BLOCKS = {"blocks": [{"text": "Alpha block opens the page here"},
                     {"text": "Beta block is the second one"},
                     {"text": "Gamma block closes the page"}]}


def test_reading_order():
    right = ("Alpha block opens the page here\nBeta block is the second one\n"
             "Gamma block closes the page")
    assert reading_order(right, BLOCKS) == {"order_distance": 0.0, "blocks_found": 1.0,
                                            "blocks_true": 3.0}
    # first two swapped: order [1, 0, 2] vs [0, 1, 2], Levenshtein 2 (two substitutions) / 3
    swapped = ("Beta block is the second one. Alpha block opens the page here. "
               "Gamma block closes the page")
    assert reading_order(swapped, BLOCKS)["order_distance"] == pytest.approx(2 / 3)
    # Gamma lost: 2 of 3 found, in order
    got = reading_order("Alpha block opens the page here Beta block is the second one", BLOCKS)
    assert got["blocks_found"] == pytest.approx(2 / 3) and got["order_distance"] == 0.0
    # an OCR slip still locates its block (fuzzy alignment)
    ocr = right.replace("second", "secand")
    assert reading_order(ocr, BLOCKS)["blocks_found"] == 1.0
    assert reading_order(right, {"blocks": [{"text": "one"}]}) == {}


def test_boilerplate_precision_recall():
    truth = {**BLOCKS, "boilerplate": [
        {"kind": "header", "text": "Site Header", "page": 1},
        {"kind": "header", "text": "Site Header", "page": 2},
        {"kind": "page_number", "text": "Page 1 of 2", "page": 1},
        {"kind": "page_number", "text": "Page 2 of 2", "page": 2}]}
    body = " ".join(b["text"] for b in BLOCKS["blocks"])
    # one header left (1 of its 2 occurrences removed) and "Page 2 of 2" left: 2 of 4 removed
    got = boilerplate_pr(f"Site Header {body} Page 2 of 2", truth)
    assert got["boilerplate_recall"] == pytest.approx(2 / 4)
    assert got["boilerplate_precision"] == 1.0
    # everything removed, and the Gamma body block with it: precision 4 / (4 + 1)
    got = boilerplate_pr(body.replace("Gamma block closes the page", ""), truth)
    assert got["boilerplate_recall"] == 1.0
    assert got["boilerplate_precision"] == pytest.approx(4 / 5)
    assert boilerplate_pr(body, BLOCKS) == {}


def test_unicode_counts():
    # tokens: "ﬁne" (ligature: NFKC "fine"), "pаypal" (Cyrillic а), "ok", "a", "b"
    text = "ﬁne pаypal ok a\u200bb"
    got = unicode_counts(text)
    assert got["tokens"] == 5
    assert got["nfkc_disagree"] == 1 and got["nfkc_disagree_rate"] == pytest.approx(1 / 5)
    assert got["mixed_script"] == 1 and got["mixed_script_rate"] == pytest.approx(1 / 5)
    assert got["invisible"] == 1 and got["invisible_rate"] == pytest.approx(1 / len(text))
    # Japanese mixes Han and kana in one word: not a mixed-script token
    assert unicode_counts("東京タワー")["mixed_script"] == 0
    assert unicode_counts("")["invisible_rate"] == 0.0


def test_fbeta_and_pii_scores():
    # F-beta of P = 0.5, R = 1 with beta 2.5: (1 + 6.25) * 0.5 / (6.25 * 0.5 + 1)
    assert fbeta(0.5, 1.0) == pytest.approx(7.25 * 0.5 / 4.125)
    text = "Call Ann Lee at ann@example.org or ann@example.org today"
    truth = {"pii": [{"type": "PERSON", "text": "Ann Lee"},
                     {"type": "EMAIL_ADDRESS", "text": "ann@example.org"}]}
    first = text.index("ann@")
    second = text.index("ann@", first + 1)
    detected = [Span(first, first + 15, "EMAIL_ADDRESS", 1.0),
                Span(second, second + 15, "EMAIL_ADDRESS", 1.0),
                Span(0, 4, "DATE_TIME", 0.5)]  # a false alarm on "Call"
    got = pii_scores(text, detected, truth)
    # 3 gold spans (the name once, the e-mail twice), 2 found; 2 of 3 detections right
    assert got["pii_in_text"] == 3 and got["pii_recall"] == pytest.approx(2 / 3)
    assert got["pii_precision"] == pytest.approx(2 / 3)
    assert got["recall_PERSON"] == 0.0 and got["recall_EMAIL_ADDRESS"] == 1.0
    assert got["pii_fbeta"] == pytest.approx(fbeta(2 / 3, 2 / 3))
    assert destroyed_answers("In 1066 at ann@example.org", "In 1066 at <EMAIL_ADDRESS>",
                             ["1066", "ann@example.org", "absent"]) == 1


def test_presidio_pattern_recognisers_offline():
    """presidio's recognisers without an NLP engine: e-mail and phone found, a name not."""
    from bench.ingest.metrics import scrub_pii

    text = "Write to Maya Novak at maya.novak@example.org or call (212) 555-0147."
    scrubbed, spans = scrub_pii(text)
    assert scrubbed == "Write to Maya Novak at <EMAIL_ADDRESS> or call <PHONE_NUMBER>."
    assert [s.entity for s in spans] == ["EMAIL_ADDRESS", "PHONE_NUMBER"]


def test_language_match():
    from bench.ingest.metrics import language_match

    got = language_match("The Normans gave their name to Normandy, a region in France.",
                         {"language": "en"})
    assert got == {"detected": "en", "language_match": 1.0}
    got = language_match("Die Normannen gaben der Normandie ihren Namen.", {"language": "en"})
    assert got == {"detected": "de", "language_match": 0.0}
    assert language_match("x", {}) == {}


def test_chunk_cuts():
    truth = {"blocks": [{"text": "A Heading"}, {"text": "One sentence. Two sentences."}],
             "tables": [{"cells": [["Year", "Value"], ["1066", "12"]]}]}
    chunks = ["A Heading", "One sentence. Two", "sentences.", "Year Value 1066", "12"]
    got = chunk_cuts(chunks, truth)
    # 4 boundaries: after the heading (a block end), after "Two" (a cut), after
    # "sentences." (sentence end), after "1066" (a cut)
    assert got["boundaries"] == 4 and got["sentence_cuts"] == 2
    assert got["sentence_cut_rate"] == pytest.approx(2 / 4)
    assert got["tables_cut"] == 1 and got["tables_lost"] == 0
    whole = chunk_cuts(["A Heading", "Year Value 1066 12."], truth)
    assert whole["tables_cut"] == 0 and whole["sentence_cuts"] == 0


def test_token_iou_and_locate():
    text = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"
    spans = locate_spans(text, ["w2 w3 w4", "w4 w5", "nope"])
    assert spans == [(6, 14), (12, 17), None]
    excerpt = locate_spans(text, ["w3 w4 w5 w6"])[0]
    assert excerpt is not None
    got = token_iou(text, [s for s in spans if s], [excerpt])
    # retrieved tokens {2,3,4,5}, relevant {3,4,5,6}: 3 shared, 5 in the union
    assert got["token_iou"] == pytest.approx(3 / 5)
    assert got["token_precision"] == pytest.approx(3 / 4)
    assert got["token_recall"] == pytest.approx(3 / 4)


def test_metadata_accuracy():
    truth = {"title": "Black Death", "date": "2024-01-01"}
    assert metadata_accuracy(" black  death", "2024-01-01", truth) == {
        "title_match": 1.0, "date_match": 1.0}
    assert metadata_accuracy("Plague", None, {"title": "Black Death", "date": None}) == {
        "title_match": 0.0}


def test_summarise_slices_and_missing_values():
    from bench.ingest.metrics.aggregate import summarise

    rows = [{"type": "pdf", "layout": "table", "cer": 0.1, "teds": 0.5},
            {"type": "pdf", "layout": "one_column", "cer": 0.3},
            {"type": "html", "layout": "html_boilerplate", "cer": 0.2, "teds": 1.0}]
    got = {(s.metric, s.slice_key, s.slice_value): s for s in summarise(rows, ["cer", "teds"])}
    assert got[("cer", "", "")].mean == pytest.approx((0.1 + 0.3 + 0.2) / 3)
    assert got[("cer", "type", "pdf")].mean == pytest.approx((0.1 + 0.3) / 2)
    # TEDS: the one-column document has none, so it is neither 0 nor 1 in the mean
    assert got[("teds", "", "")].mean == pytest.approx((0.5 + 1.0) / 2)
    assert got[("teds", "", "")].n == 2
    assert ("teds", "layout", "one_column") not in got
    s = got[("cer", "", "")]
    assert s.ci_low <= s.mean <= s.ci_high


def test_a_grid_is_scored_against_the_truth_grid_and_html_against_html():
    """A text-layer parser's grid has no <thead>/<th>: it is compared with the truth's cells,
    so the exact grid scores 1 (against the HTML it scores 0.56: thead, tbody and the th -> td
    renames); an extracted HTML table is still compared with the truth's HTML."""
    html = ("<table><thead><tr><th>a</th><th>b</th></tr></thead>"
            "<tbody><tr><td>c</td><td>dd</td></tr></tbody></table>")
    truth = {"tables": [{"cells": [["a", "b"], ["c", "dd"]], "html": html}]}
    grid = [["a", "b"], ["c", "dd"]]
    assert teds(grid, html) < 1.0  # the mismatch the reference choice avoids
    got = table_scores([grid], truth)
    assert got["teds"] == 1.0 and got["teds_struct"] == 1.0 and got["cell_accuracy"] == 1.0
    assert table_scores([html], truth)["teds"] == 1.0
    plain = "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>dd</td></tr></table>"
    assert table_scores([plain], truth)["teds"] < 1.0  # HTML without the header markup


def test_repeated_block_texts_are_matched_in_order():
    """A short block whose text also occurs inside an earlier block (a function name, then its
    heading) is matched after the previous block: the truth's own text scores 0; a real swap
    still scores above 0."""
    blocks = ["secrets.choice(seq) returns a random element", "Other functions", "choice"]
    truth = {"blocks": [{"text": b} for b in blocks]}
    same = " ".join(blocks)
    assert reading_order(same, truth)["order_distance"] == 0.0
    swapped = " ".join([blocks[1], blocks[0], blocks[2]])
    assert reading_order(swapped, truth)["order_distance"] > 0.0
