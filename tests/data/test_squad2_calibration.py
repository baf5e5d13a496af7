"""The shipped judge-calibration set: SQuAD 2.0's Normans article with its human
answerability labels, and the rule deciding which judge verdicts those labels apply to."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from bench.data.squad2_calibration import (
    HERE,
    NAME,
    Squad2Calibration,
    human_labels,
    read_labels,
)
from bench.data.squad2_calibration.__main__ import main


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def test_the_set_and_its_labels_agree() -> None:
    ds = Squad2Calibration().load()
    labels = read_labels()
    assert ds.name == NAME and len(ds.documents) == 39 and len(ds.queries) == 208
    assert Counter((q.split, q.category) for q in ds.queries) == {
        ("calibration", "answerable"): 53, ("calibration", "unanswerable"): 67,
        ("release", "answerable"): 43, ("release", "unanswerable"): 45}
    text = {d.doc_id: d.text for d in ds.documents}
    for q in ds.queries:
        lab = labels[q.query_id]
        assert lab.answerable is not q.must_abstain
        if lab.answerable:
            # the annotators' spans are spans of the question's paragraph, its one qrel
            assert q.qrels == ((lab.paragraph_id, 1),)
            assert all(a in text[lab.paragraph_id] for a in lab.answers)
            assert q.references == lab.answers
        else:
            assert q.qrels == () and lab.answers == ()
            assert all(a in text[lab.paragraph_id] for a in lab.plausible_answers)
    # no paragraph serves both splits
    split_of: dict[str, set[str]] = {}
    for q in ds.queries:
        split_of.setdefault(labels[q.query_id].paragraph_id, set()).add(q.split)
    assert all(len(s) == 1 for s in split_of.values())
    assert "CC BY-SA 4.0" in (HERE / "README.md").read_text()


def _row(qid: str, doc: str, text: str, metric: str = "context_relevance",
         judge: str = "context_relevance") -> dict[str, object]:
    return {"item_id": f"c:{qid}:{metric}", "query_id": qid, "metric": metric, "judge": judge,
            "rubric_judge": judge, "context": [{"doc_id": doc, "text": text}]}


def test_labels_apply_only_to_the_questions_own_paragraph() -> None:
    labels = read_labels()
    ds = Squad2Calibration().load()
    text = {d.doc_id: d.text for d in ds.documents}
    yes = next(lab for lab in labels.values() if lab.answerable)
    no = next(lab for lab in labels.values() if not lab.answerable)
    other = next(d for d in text if d != yes.paragraph_id)
    span = yes.answers[0]
    rows = [
        _row(yes.query_id, yes.paragraph_id, text[yes.paragraph_id]),   # labelled: true
        _row(no.query_id, no.paragraph_id, text[no.paragraph_id][:40]),  # labelled: false
        _row(yes.query_id, other, text[other]),                          # another paragraph
        _row(yes.query_id, yes.paragraph_id,                             # span cut off
             text[yes.paragraph_id].replace(span, "")),
        _row(yes.query_id, yes.paragraph_id, "x", metric="faithfulness", judge="faithfulness"),
        _row("no-such-question", yes.paragraph_id, "x"),
        {**_row(no.query_id, no.paragraph_id, "x"), "context": []},
    ]
    # an ensemble of context_relevance judges is labelled like the judge
    rows.append({**_row(no.query_id, no.paragraph_id, "x"), "judge": "ensemble",
                 "item_id": "e"})
    got, skipped = human_labels(rows)
    assert got == [{"item_id": rows[0]["item_id"], "human": True},
                   {"item_id": rows[1]["item_id"], "human": False},
                   {"item_id": "e", "human": False}]
    assert skipped == {"other_passage": 1, "span_not_in_passage": 1, "other_metric": 1,
                       "no_label": 1, "not_one_passage": 1}


def test_cli_writes_labels_and_refuses_a_file_it_cannot_label(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    no = next(lab for lab in read_labels().values() if not lab.answerable)
    labelling = tmp_path / "judge_labelling.jsonl"
    labelling.write_text(json.dumps(_row(no.query_id, no.paragraph_id, "x")) + "\n")
    out = tmp_path / "labels.jsonl"
    assert main([str(labelling), "-o", str(out)]) == 0
    assert [json.loads(x) for x in out.read_text().splitlines()] == [
        {"item_id": f"c:{no.query_id}:context_relevance", "human": False}]
    labelling.write_text(json.dumps(_row(no.query_id, "elsewhere", "x")) + "\n")
    assert main([str(labelling)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[-1].startswith(f"{labelling}:")  # one line naming the file
    assert "other_passage" in err[-1]
