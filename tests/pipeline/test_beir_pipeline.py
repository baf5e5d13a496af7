"""A BEIR folder end to end: whole documents, categories from a mapping file, dropped queries
counted in run.json and the report, an MTEB results file per config (seconds, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from bench.pipeline.run import run

TOPICS = ["volcano lava eruption magma", "violin string bow orchestra",
          "glacier ice melting cold", "compiler parser syntax tree"]


def _beir(root: Path) -> tuple[Path, Path]:
    docs = [{"_id": f"d{t}{k}", "title": f"Note {t}.{k}",
             "text": f"{TOPICS[t]} " * (k + 1) + f"number {k}"}
            for t in range(len(TOPICS)) for k in range(3)]
    queries = [{"_id": f"q{t}", "text": TOPICS[t].split()[0]} for t in range(len(TOPICS))]
    queries += [{"_id": "q_unjudged", "text": "nothing"}, {"_id": "q_zero", "text": "zero"}]
    qrels = ["query-id\tcorpus-id\tscore"]
    qrels += [f"q{t}\td{t}{k}\t{2 if k == 0 else 1}" for t in range(len(TOPICS))
              for k in range(2)]
    qrels.append("q_zero\td00\t0")
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    cats = root.parent / "categories.jsonl"
    cats.write_text("".join(json.dumps({"query_id": f"q{t}",
                                        "category": "science" if t != 1 else "music"}) + "\n"
                            for t in range(len(TOPICS))))
    return root, cats


def test_beir_folder_end_to_end(tmp_path: Path, compose_cfg) -> None:  # type: ignore[no-untyped-def]
    root, cats = _beir(tmp_path / "beir")
    cfg = compose_cfg(["dataset=beir", f"dataset.path={root}", f"dataset.categories={cats}",
                       "chunker=none", f"cache_dir={tmp_path / 'cache'}",
                       "metrics.bootstrap_resamples=200"])
    res = run(cfg, tmp_path / "run")
    manifest = json.loads((res.run_dir / "run.json").read_text())
    ds = manifest["dataset"]
    assert (ds["documents"], ds["chunks"], ds["queries"]) == (12, 12, 4)
    reason = ("no positive judgement in qrels/test.tsv (1 with only score-0 judgements, "
              "1 not judged)")
    assert (ds["dropped_queries"], ds["dropped_reason"]) == (2, reason)
    report = (res.run_dir / "report.md").read_text()
    assert f"2 queries of the source were left out: {reason}." in report
    summary = pq.read_table(res.run_dir / "summary.parquet").to_pylist()
    scopes = {r["scope"] for r in summary}
    assert {"all", "category:science", "category:music"} <= scopes
    (cid, name), = manifest["mteb_results"].items()
    mteb = json.loads((res.run_dir / name).read_text())
    ndcg = next(r["mean"] for r in summary if r["config_id"] == cid and r["scope"] == "all"
                and r["metric"] == "ndcg@10")
    recall = next(r["mean"] for r in summary if r["config_id"] == cid and r["scope"] == "all"
                  and r["metric"] == "recall@100")
    assert mteb["task_name"] == "beir:beir:test"
    scores = mteb["scores"]["test"][0]
    assert scores["main_score"] == scores["ndcg_at_10"] == ndcg
    assert scores["recall_at_100"] == recall
