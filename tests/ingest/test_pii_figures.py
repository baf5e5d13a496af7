"""The PII scrubber's figures on a benchmark folder (bench.ingest.pii_figures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.ingest.metrics.pii import fbeta
from bench.ingest.pii_figures import main, pii_figures

pytest.importorskip("presidio_analyzer", reason="the ingest extra (pip install -e '.[ingest]')")

EMAIL = "maya.novak@example.org"
PHONE = "(212) 555-0147"
NAME = "Maya Novak"
# a number range presidio's phone recogniser takes for a phone number (as in a SQuAD text)
RANGE = "350–375"


def _folder(root: Path) -> Path:
    docs = {
        "a": (f"The plague killed {RANGE} million people.\n\nWrite to {NAME} at {EMAIL} "
              f"or call {PHONE}.", [("PERSON", NAME), ("EMAIL_ADDRESS", EMAIL),
                                    ("PHONE_NUMBER", PHONE)], "squad2"),
        "b": ("Normandy is a region in France.", [], "squad2"),
        "c": (f"Contact {EMAIL} for the FOLDOC entry.", [], "foldoc"),
    }
    (root / "truth").mkdir(parents=True)
    with (root / "manifest.jsonl").open("w") as fh:
        for d, (text, pii, source) in docs.items():
            truth = {"doc_id": d, "text": text,
                     "pii": [{"type": t, "text": x} for t, x in pii]}
            (root / "truth" / f"{d}.json").write_text(json.dumps(truth))
            fh.write(json.dumps({"doc_id": d, "file": f"files/{d}.pdf", "type": "pdf",
                                 "source": source, "truth": f"truth/{d}.json"}) + "\n")
    queries = [("q-range", ["350–375 million"], "a"),  # under the phone redaction
               ("q-mail", [EMAIL, "nobody@example.org"], "a"),  # its one reference in text
               ("q-name", [NAME], "a"),  # PERSON is never detected offline: it survives
               ("q-region", ["France"], "b"),
               ("q-absent", ["Paris"], "b"),  # no reference in the text
               ("q-foldoc", ["FOLDOC"], "c")]
    with (root / "queries.jsonl").open("w") as fh:
        for qid, answers, d in queries:
            fh.write(json.dumps({"query_id": qid, "query": "?", "category": "x",
                                 "relevant_document_ids": [d], "expected_answers": answers})
                     + "\n")
    return root


def test_figures_count_types_precision_and_destroyed_answers(tmp_path: Path) -> None:
    fig = pii_figures(_folder(tmp_path), sources=["squad2"])
    assert fig.documents == 2 and fig.documents_with_pii == 1
    types = {t.entity: t for t in fig.types}
    # 3 planted occurrences; the e-mail and phone found, the name not (no NER offline)
    assert types["PERSON"].gold == 1 and types["PERSON"].recall == 0.0
    assert types["EMAIL_ADDRESS"].recall == 1.0 and types["EMAIL_ADDRESS"].precision == 1.0
    # two phone detections: the planted number and the number range; one is right
    assert types["PHONE_NUMBER"].detected == 2 and types["PHONE_NUMBER"].precision == 0.5
    assert fig.recall == pytest.approx(2 / 3)
    assert fig.precision == pytest.approx(2 / 3)  # 2 right of 3 detections
    assert fig.fbeta == pytest.approx(fbeta(2 / 3, 2 / 3))
    assert fig.precision_ci[0] <= fig.precision <= fig.precision_ci[1]
    # 5 queries on the squad2 documents, 4 with a reference in the text; the range and the
    # e-mail answers are destroyed, the name and "France" survive
    assert fig.queries == 5 and fig.answers_in_text == 4
    assert {(d.query_id, d.by) for d in fig.destroyed} == {
        ("q-range", ("PHONE_NUMBER",)), ("q-mail", ("EMAIL_ADDRESS",))}
    assert fig.references_destroyed == 2


def test_all_sources_and_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    folder = _folder(tmp_path / "f")
    fig = pii_figures(folder)
    # the FOLDOC document's real e-mail address is a detection no planted PII backs
    assert fig.documents == 3
    assert {t.entity: t for t in fig.types}["EMAIL_ADDRESS"].precision == 0.5
    assert main([str(folder), "--source", "squad2", "--out", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "| PHONE_NUMBER | 1 | 1 | 1.000 | 2 | 1 | 0.500 |" in out
    assert json.loads((tmp_path / "p.json").read_text())["references_destroyed"] == 2
    assert main([str(tmp_path / "nowhere")]) == 2
    assert main([str(folder), "--min-score", "2"]) == 2
