"""Write the labelled judge-calibration set (bench/data/squad2_calibration/) from SQuAD 2.0.

Reads SQuAD 2.0's ``dev-v2.0.json`` (its official JSON layout) and keeps one article
(``--article``, default the development set's first, Normans): every paragraph as a corpus
document and every question, answerable or not, as a golden query, with the crowdworkers'
answerability label and answer spans in ``labels.jsonl``. Text is not edited. The first
``--calibration-paragraphs`` paragraphs' questions are on the ``calibration`` split, the rest
on ``release`` (split by paragraph: no paragraph serves both). Run once by a maintainer; the
output is committed under SQuAD's licence (CC BY-SA 4.0; the folder's README.md).

    python scripts/make_judge_calibration_squad.py dev-v2.0.json bench/data/squad2_calibration
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _distinct(spans: list[dict[str, object]]) -> list[str]:
    out: list[str] = []
    for s in spans:
        text = str(s["text"])
        if text not in out:
            out.append(text)
    return out


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="SQuAD 2.0 dev-v2.0.json")
    ap.add_argument("out", type=Path)
    ap.add_argument("--article", default="Normans")
    ap.add_argument("--calibration-paragraphs", type=int, default=20)
    a = ap.parse_args()
    squad = json.loads(a.src.read_text(encoding="utf-8"))
    article = next(x for x in squad["data"] if x["title"] == a.article)
    corpus, queries, labels = [], [], []
    for n, par in enumerate(article["paragraphs"]):
        pid = f"{_slug(a.article)}-p{n:03d}"
        corpus.append({"doc_id": pid, "title": a.article, "text": par["context"]})
        split = "calibration" if n < a.calibration_paragraphs else "release"
        for qa in par["qas"]:
            answerable = not qa.get("is_impossible", False)
            answers = _distinct(qa["answers"])
            row: dict[str, object] = {
                "query_id": qa["id"], "query": qa["question"],
                "category": "answerable" if answerable else "unanswerable",
                "must_abstain": not answerable, "expected_answers": answers, "split": split}
            if answerable:
                row["relevant_document_ids"] = [pid]
            queries.append(row)
            labels.append({"query_id": qa["id"], "paragraph_id": pid, "answerable": answerable,
                           "answers": answers,
                           "plausible_answers": _distinct(qa.get("plausible_answers", []))})
    a.out.mkdir(parents=True, exist_ok=True)
    _write(a.out / "corpus.jsonl", corpus)
    _write(a.out / "queries.jsonl", queries)
    _write(a.out / "labels.jsonl", labels)


if __name__ == "__main__":
    main()
