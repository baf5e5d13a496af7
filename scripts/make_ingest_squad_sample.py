"""Write the SQuAD 2.0 sample the ingestion benchmark ships (bench/ingest/data/squad2/).

Reads a SQuAD 2.0 folder in the golden layout (``documents.jsonl``, ``answers.jsonl``, as the
project's SQuAD 2.0 conversion writes it) and keeps the first ``--per-article`` paragraphs of
every article and, of each kept paragraph, its first ``--per-paragraph`` answerable questions
with every distinct gold answer. Text is not edited. Run once by a maintainer; the output is
committed (CC BY-SA 4.0, like its source: see the folder's README.md).

    python scripts/make_ingest_squad_sample.py SQUAD_DIR bench/ingest/data/squad2
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--per-article", type=int, default=12)
    ap.add_argument("--per-paragraph", type=int, default=4)
    a = ap.parse_args()
    paragraphs = [json.loads(line) for line in
                  (a.src / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = {}
    for line in (a.src / "golden.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        queries[q["query_id"]] = q["query"]
    per_article: dict[str, int] = defaultdict(int)
    kept: list[dict[str, str]] = []
    for p in paragraphs:
        article = p["doc_id"].rsplit("-p", 1)[0]
        if per_article[article] < a.per_article:
            per_article[article] += 1
            kept.append({"paragraph_id": p["doc_id"], "title": p["title"], "text": p["text"]})
    ids = {p["paragraph_id"] for p in kept}
    per_paragraph: dict[str, int] = defaultdict(int)
    questions = []
    for line in (a.src / "answers.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        pid = r["paragraph_id"]
        if r["is_impossible"] or pid not in ids or per_paragraph[pid] >= a.per_paragraph:
            continue
        per_paragraph[pid] += 1
        questions.append({"query_id": r["query_id"], "paragraph_id": pid,
                          "question": queries[r["query_id"]], "answers": r["answers"]})
    a.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("paragraphs.jsonl", kept), ("questions.jsonl", questions)):
        with (a.out / name).open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(kept)} paragraphs, {len(questions)} questions -> {a.out}")


if __name__ == "__main__":
    main()
