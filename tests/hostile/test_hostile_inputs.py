"""Hostile inputs, table-driven, over every entry point.

Each case writes its files into a fresh folder, runs one entry point and asserts what
docs/concepts.md promises for bad input: exit code 2, exactly one line on stderr that names the
config key or ``file:line``, no traceback, and no result presented as complete (no
``run.json`` / ``summary.parquet`` in the run folder).

Most cases run in-process (the entry function with ``SystemExit`` captured) for speed; the
cases marked ``subprocess=True`` run the real ``python -m ...`` command line.

``{d}`` in args and expected fragments is the case's folder.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cli import in_process, run_bench_main

ROOT = Path(__file__).resolve().parents[2]
BIG = "1" + "0" * 20  # 10**20: beyond int64
HUGE_DIGITS = "9" * 5000  # beyond Python's int-from-string limit (4300 digits)


# ---------------------------------------------------------------- valid inputs to spoil

def _jsonl(rows: Sequence[Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


CORPUS: list[dict[str, Any]] = [
    {"doc_id": "d1", "text": "A compiler translates source code."},
    {"doc_id": "d2", "text": "An interpreter runs source code directly."},
    {"doc_id": "d3", "text": "A linker joins object files."},
]
QUERIES: list[dict[str, Any]] = [
    {"query_id": "q1", "query": "What is a compiler?", "relevant_document_ids": ["d1"]},
    {"query_id": "q2", "query": "What joins object files?",
     "relevant_document_ids": [{"id": "d3", "grade": 2}]},
]
GOOD_CORPUS = _jsonl(CORPUS)
GOOD_QUERIES = _jsonl(QUERIES)
CSV_CORPUS = "doc_id,text\nd1,A compiler translates source code.\nd2,A linker joins files.\n"
CSV_QUERIES = "query_id,query\nq1,What is a compiler?\n"
CSV_QRELS = "query_id,doc_id,grade\nq1,d1,1\n"
BEIR_CORPUS = '{"_id": "d1", "title": "", "text": "A compiler."}\n{"_id": "d2", "text": "x y"}\n'
BEIR_QUERIES = '{"_id": "q1", "text": "What is a compiler?"}\n'
BEIR_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"
MANIFEST = json.dumps({"name": "foldoc", "fingerprint": "x"})


def _q(**change: object) -> str:
    """GOOD_QUERIES with the first query's fields changed."""
    return _jsonl([{**QUERIES[0], **change}, QUERIES[1]])


def _c(**change: object) -> str:
    return _jsonl([CORPUS[0], {**CORPUS[1], **change}, CORPUS[2]])


# ---------------------------------------------------------------- the table

BASE = ("cache_dir={d}/cache", "hydra.run.dir={d}/run")
SYN = ("dataset=synthetic", "dataset.n_docs=8", "dataset.n_queries=4")
GOLDEN = ("dataset=golden", "dataset.corpus={d}/corpus.jsonl", "dataset.queries={d}/queries.jsonl")
CSV = ("dataset=csv", "dataset.corpus={d}/corpus.csv", "dataset.queries={d}/queries.csv",
       "dataset.qrels={d}/qrels.csv")
BEIR = ("dataset=beir", "dataset.path={d}/beir")
FOLDOC = ("dataset=foldoc", "dataset.path={d}/foldoc")


@dataclass(frozen=True)
class Case:
    id: str
    entry: str  # bench | foldoc_build | evaluate | compare | sweep
    args: tuple[str, ...]
    expect: str  # fragment the one stderr line must contain ({d} = the case folder)
    files: dict[str, str | bytes] = field(default_factory=dict)
    subprocess: bool = False


def golden(cid: str, expect: str, *, corpus: str | bytes = GOOD_CORPUS,
           queries: str | bytes = GOOD_QUERIES, sub: bool = False) -> Case:
    return Case(cid, "bench", GOLDEN, expect,
                {"corpus.jsonl": corpus, "queries.jsonl": queries}, sub)


def csv_case(cid: str, expect: str, *, corpus: str | bytes = CSV_CORPUS,
             queries: str | bytes = CSV_QUERIES, qrels: str | bytes = CSV_QRELS) -> Case:
    return Case(cid, "bench", CSV, expect,
                {"corpus.csv": corpus, "queries.csv": queries, "qrels.csv": qrels})


def beir(cid: str, expect: str, *, corpus: str | bytes = BEIR_CORPUS,
         queries: str | bytes = BEIR_QUERIES, qrels: str | bytes | None = BEIR_QRELS,
         sub: bool = False) -> Case:
    files: dict[str, str | bytes] = {"beir/corpus.jsonl": corpus, "beir/queries.jsonl": queries}
    if qrels is not None:
        files["beir/qrels/test.tsv"] = qrels
    return Case(cid, "bench", BEIR, expect, files, sub)


def foldoc(cid: str, expect: str, *, manifest: str | bytes | None = MANIFEST,
           corpus: str | bytes = GOOD_CORPUS, queries: str | bytes = GOOD_QUERIES,
           args: tuple[str, ...] = ()) -> Case:
    files: dict[str, str | bytes] = {"foldoc/corpus.jsonl": corpus,
                                     "foldoc/queries.jsonl": queries}
    if manifest is not None:
        files["foldoc/manifest.json"] = manifest
    return Case(cid, "bench", FOLDOC + args, expect, files)


def cfg(cid: str, expect: str, *args: str, sub: bool = False,
        files: dict[str, str | bytes] | None = None) -> Case:
    return Case(cid, "bench", SYN + args, expect, files or {}, sub)


def gate(spec: str) -> str:
    return f"+gates=[{spec}]"


def _corrupted_per_query() -> bytes:
    """A baseline per_query.parquet whose footer and schema are intact and whose ``value``
    column's data page is not (its page header overwritten): only a read of the column
    finds it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 40
    t = pa.table({"config_id": ["c1"] * n, "query_id": [f"q{i}" for i in range(n)],
                  "category": ["x"] * n, "metric": ["ndcg@10"] * n,
                  "value": [0.5 + i / 1000 for i in range(n)], "status": ["scored"] * n})
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="snappy")
    data = bytearray(buf.getvalue())
    meta = pq.ParquetFile(io.BytesIO(bytes(data))).metadata.row_group(0)
    col = next(meta.column(i) for i in range(meta.num_columns)
               if meta.column(i).path_in_schema == "value")
    data[col.data_page_offset + 2:col.data_page_offset + 12] = b"\xff" * 10
    return bytes(data)


FLASH = ('{"id": "q1", "question": "first?", "output": {"pred": "one"}}\n'
         '{"id": "q2", "question": "second?", "output": {"pred": "two"}}\n')
IMPORTED = ("system=imported", "system.path={d}/answers.jsonl", "system.format=flashrag")


CASES: list[Case] = [
    # --- config keys: `+`-added keys unknown to the schema
    cfg("plus-top-level", "config key foo:", "+foo=1", sub=True),
    cfg("plus-metrics", "config key metrics.foo:", "+metrics.foo=1"),
    cfg("plus-disabled-stage", "config key reranker.top_k:", "+reranker.top_k=5"),
    cfg("plus-embedder", "config key embedder.bogus:", "+embedder.bogus=1"),
    cfg("plus-index", "config key index.bogus:", "+index.bogus=1"),
    cfg("plus-dataset", "config key dataset.bogus:", "+dataset.bogus=1"),
    cfg("plus-gate-key", "bogus", gate("{metric:ndcg@10,min:0.1,bogus:1}")),
    # --- config keys: values
    cfg("batch-size-zero", "config key embedder.batch_size:", "embedder.batch_size=0"),
    cfg("max-seq-beyond-model", "config key embedder.max_seq_length:",
        "embedder.max_seq_length=100000", sub=True),
    cfg("precision-fp16-on-cpu", "config key embedder.precision:", "embedder.precision=fp16",
        "device=cpu"),
    cfg("device-wrong-case", "config key device:", "device=CUDA"),
    cfg("device-unknown", "config key device:", "device=tpu"),
    cfg("retriever-k-int64-overflow", "config key retriever.k:", f"retriever.k={BIG}"),
    cfg("dataset-n-docs-overflow", "config key dataset.n_docs:", f"dataset.n_docs={BIG}"),
    cfg("dataset-n-docs-too-small", "config key dataset.n_docs:", "dataset.n_docs=1"),
    cfg("seed-overflow", "config key seed:", f"seed={BIG}"),
    cfg("seed-negative", "config key seed:", "seed=-1"),
    cfg("relevance-level-overflow", "config key metrics.relevance_level:",
        f"metrics.relevance_level={BIG}"),
    cfg("relevance-level-zero", "config key metrics.relevance_level:",
        "metrics.relevance_level=0"),
    cfg("resamples-overflow", "config key metrics.bootstrap_resamples:",
        f"metrics.bootstrap_resamples={BIG}"),
    cfg("resamples-too-few", "config key metrics.bootstrap_resamples:",
        "metrics.bootstrap_resamples=10"),
    cfg("confidence-nan", "config key metrics.confidence:", "metrics.confidence=nan"),
    cfg("confidence-one", "config key metrics.confidence:", "metrics.confidence=1.0"),
    cfg("category-weight-negative", "config key metrics.category_weights.exact_lookup:",
        "+metrics.category_weights.exact_lookup=-1"),
    cfg("metric-cutoff-overflow", "config key metrics.names[0]:",
        f"metrics.names=[ndcg@{BIG}]"),
    cfg("metric-unknown", "config key metrics.names[1]:", "metrics.names=[ndcg@10,bleu]"),
    cfg("metric-wrong-case", "config key metrics.names[0]:", "metrics.names=[NDCG@10]"),
    cfg("metric-non-canonical", "config key metrics.names[0]:", "metrics.names=[ndcg@010]"),
    cfg("metric-listed-twice", "config key metrics.names[1]:", "metrics.names=[mrr,mrr]"),
    cfg("metric-none", "config key metrics.names:", "metrics.names=[]"),
    cfg("cache-dir-is-file", "config key cache_dir:", "cache_dir={d}/afile",
        files={"afile": "not a folder\n"}),
    cfg("cache-dir-under-file", "config key cache_dir:", "cache_dir={d}/afile/sub",
        files={"afile": "not a folder\n"}, sub=True),
    cfg("index-option-unknown", "index", "index=nosuch"),
    # --- gates that could never fire
    cfg("gate-scope-wrong-case", "config key gates[0].scope:", gate("{metric:ndcg@10,scope:ALL,"
                                                                     "min:0.1}")),
    cfg("gate-category-wrong-case", "config key gates[0].scope:",
        gate("{metric:ndcg@10,scope:'Category:exact_lookup',min:0.1}")),
    cfg("gate-scope-unknown", "config key gates[0].scope:",
        gate("{metric:ndcg@10,scope:overall,min:0.1}")),
    cfg("gate-scope-empty-category", "config key gates[0].scope:",
        gate("{metric:ndcg@10,scope:'category:',min:0.1}")),
    cfg("gate-metric-not-computed", "config key gates[0].metric:",
        gate("{metric:ndcg@5,min:0.1}"), sub=True),
    cfg("gate-metric-wrong-case", "config key gates[0].metric:", gate("{metric:MRR,min:0.1}")),
    # an answer / judge / filter gate on a run with no config that computes it (plan time)
    cfg("gate-judge-metric-no-generator", "config key gates[0].metric: no config of this run "
        "computes faithfulness", gate("{metric:faithfulness,min:0.85}"), sub=True),
    cfg("gate-filter-metric-no-filter", "config key gates[0].metric: no config of this run "
        "computes false_exclusion_rate", gate("{metric:false_exclusion_rate,max:0.02}")),
    cfg("metric-answer-in-names", "config key metrics.names[1]:",
        "metrics.names=[ndcg@10,faithfulness]"),
    cfg("gate-metric-unknown", "config key gates[0].metric:", gate("{metric:bleu,min:0.1}")),
    cfg("gate-no-bound", "config key gates[0]:", gate("{metric:mrr}")),
    cfg("gate-min-above-max", "config key gates[0]:", gate("{metric:mrr,min:0.9,max:0.1}")),
    cfg("gate-bound-nan", "config key gates[0].min:", gate("{metric:mrr,min:nan}")),
    # --- golden JSONL
    golden("golden-empty-corpus", "{d}/corpus.jsonl: no documents", corpus="", sub=True),
    golden("golden-blank-corpus", "{d}/corpus.jsonl: no documents", corpus="\n  \n\n"),
    golden("golden-empty-queries", "{d}/queries.jsonl: no queries", queries=""),
    golden("golden-utf8-corpus", "{d}/corpus.jsonl:2: invalid UTF-8",
           corpus=GOOD_CORPUS.encode().replace(b"interpreter", b"interpr\xffter"), sub=True),
    golden("golden-utf8-queries", "{d}/queries.jsonl:1: invalid UTF-8",
           queries=GOOD_QUERIES.encode().replace(b"compiler?", b"compil\xc3\x28r?")),
    golden("golden-duplicate-key-corpus", "{d}/corpus.jsonl:1: malformed JSON: duplicate key",
           corpus='{"doc_id": "d1", "text": "a", "text": "b"}\n'),
    golden("golden-duplicate-key-queries", "{d}/queries.jsonl:2: malformed JSON: duplicate key",
           queries=_jsonl(QUERIES[:1]) + '{"query_id": "q2", "query_id": "q3", "query": "x", '
                                         '"relevant_document_ids": ["d2"]}\n'),
    golden("golden-duplicate-key-nested", "{d}/queries.jsonl:1: malformed JSON: duplicate key",
           queries='{"query_id": "q1", "query": "x", "relevant_document_ids": '
                   '[{"id": "d1", "id": "d2"}]}\n'),
    golden("golden-doc-id-trailing-space", "{d}/corpus.jsonl:2: field 'doc_id'",
           corpus=_c(doc_id="d2 ")),
    golden("golden-doc-id-inner-space", "{d}/corpus.jsonl:2: field 'doc_id'",
           corpus=_c(doc_id="d 2")),
    golden("golden-doc-id-newline", "{d}/corpus.jsonl:2: field 'doc_id'",
           corpus=_c(doc_id="d2\n")),
    golden("golden-query-id-leading-tab", "{d}/queries.jsonl:1: field 'query_id'",
           queries=_q(query_id="\tq1")),
    golden("golden-relevant-id-space", "{d}/queries.jsonl:1: field 'relevant_document_ids[0]'",
           queries=_q(relevant_document_ids=["d1 "])),
    golden("golden-grade-overflow", "{d}/queries.jsonl:1: field 'relevant_document_ids[0].grade'",
           queries=_q(relevant_document_ids=[{"id": "d1", "grade": 10**30}])),
    golden("golden-grade-huge-digits", "{d}/queries.jsonl:1: malformed JSON",
           queries='{"query_id": "q1", "query": "x", "relevant_document_ids": '
                   f'[{{"id": "d1", "grade": {HUGE_DIGITS}}}]}}\n'),
    golden("golden-grade-negative", "{d}/queries.jsonl:1: field 'relevant_document_ids[0].grade'",
           queries=_q(relevant_document_ids=[{"id": "d1", "grade": -1}])),
    golden("golden-grade-float", "{d}/queries.jsonl:1: field 'relevant_document_ids[0].grade'",
           queries=_q(relevant_document_ids=[{"id": "d1", "grade": 1.5}])),
    golden("golden-nan", "{d}/queries.jsonl:1: malformed JSON: NaN",
           queries='{"query_id": "q1", "query": "x", "relevant_document_ids": '
                   '[{"id": "d1", "grade": NaN}]}\n'),
    golden("golden-malformed", "{d}/corpus.jsonl:3: malformed JSON",
           corpus=GOOD_CORPUS.replace('"d3"', '"d3')),
    golden("golden-deeply-nested", "{d}/corpus.jsonl:1: malformed JSON",
           corpus="[" * 100_000 + "]" * 100_000 + "\n"),
    golden("golden-array-line", "{d}/corpus.jsonl:1: expected a JSON object",
           corpus='["d1", "text"]\n'),
    golden("golden-duplicate-doc-id", "{d}/corpus.jsonl:2: duplicate doc_id",
           corpus=_c(doc_id="d1")),
    golden("golden-unknown-field", "{d}/corpus.jsonl:2: unknown field", corpus=_c(txet="x")),
    golden("golden-unknown-doc", "{d}/queries.jsonl:1: relevant_document_ids[0] names unknown",
           queries=_q(relevant_document_ids=["d9"])),
    Case("golden-corpus-missing", "bench", GOLDEN, "{d}/corpus.jsonl: file not found",
         {"queries.jsonl": GOOD_QUERIES}),
    Case("golden-corpus-is-dir", "bench", GOLDEN, "{d}/corpus.jsonl: file not found",
         {"corpus.jsonl/x": "", "queries.jsonl": GOOD_QUERIES}),
    # --- CSV
    csv_case("csv-header-only-corpus", "{d}/corpus.csv: no documents", corpus="doc_id,text\n"),
    csv_case("csv-empty-file", "{d}/corpus.csv:1: empty file", corpus=""),
    csv_case("csv-header-only-queries", "{d}/queries.csv: no queries", queries="query_id,query\n",
             qrels="query_id,doc_id\n"),
    csv_case("csv-utf8", "{d}/corpus.csv:3: invalid UTF-8",
             corpus=CSV_CORPUS.encode().replace(b"linker", b"link\xe9r")),
    csv_case("csv-doc-id-space", "{d}/corpus.csv:2: column 'doc_id'",
             corpus="doc_id,text\nd1 ,A compiler.\nd2,A linker.\n"),
    csv_case("csv-qrels-id-space", "{d}/qrels.csv:2: column 'doc_id'",
             qrels="query_id,doc_id,grade\nq1, d1,1\n"),
    csv_case("csv-grade-overflow", "{d}/qrels.csv:2: field 'grade'",
             qrels=f"query_id,doc_id,grade\nq1,d1,{BIG}\n"),
    csv_case("csv-grade-huge-digits", "{d}/qrels.csv:2: column 'grade'",
             qrels=f"query_id,doc_id,grade\nq1,d1,{HUGE_DIGITS}\n"),
    csv_case("csv-unknown-column", "{d}/corpus.csv:1: unknown column",
             corpus="doc_id,text,txet\nd1,a,b\n"),
    # --- BEIR folder
    beir("beir-empty-corpus", "{d}/beir/corpus.jsonl: no documents", corpus=""),
    beir("beir-empty-queries", "{d}/beir/queries.jsonl: no queries", queries="\n"),
    beir("beir-no-positive-qrel", "{d}/beir/qrels/test.tsv: no query has a positive",
         qrels="query-id\tcorpus-id\tscore\nq1\td1\t0\n", sub=True),
    beir("beir-qrels-utf8", "{d}/beir/qrels/test.tsv:2: invalid UTF-8",
         qrels=b"query-id\tcorpus-id\tscore\nq1\td1\xff\t1\n"),
    beir("beir-id-space", "{d}/beir/corpus.jsonl:2: field '_id'",
         corpus=BEIR_CORPUS.replace('"d2"', '"d 2"')),
    beir("beir-score-overflow", "{d}/beir/qrels/test.tsv:2: field 'score'",
         qrels=f"query-id\tcorpus-id\tscore\nq1\td1\t{BIG}\n"),
    beir("beir-duplicate-key", "{d}/beir/queries.jsonl:1: malformed JSON: duplicate key",
         queries='{"_id": "q1", "_id": "q2", "text": "x"}\n'),
    beir("beir-qrels-missing", "{d}/beir/qrels/test.tsv: file not found", qrels=None),
    # --- FOLDOC folder
    foldoc("foldoc-manifest-malformed", "{d}/foldoc/manifest.json:1: malformed JSON",
           manifest="{not json"),
    foldoc("foldoc-manifest-duplicate-key", "{d}/foldoc/manifest.json: malformed JSON: duplicate",
           manifest='{"name": "a", "name": "b"}'),
    foldoc("foldoc-manifest-not-object", "{d}/foldoc/manifest.json:1: expected a JSON object",
           manifest="[]"),
    foldoc("foldoc-manifest-utf8", "{d}/foldoc/manifest.json:1: invalid UTF-8",
           manifest=b'{"name": "\xff"}'),
    foldoc("foldoc-empty-corpus", "{d}/foldoc/corpus.jsonl: no documents", corpus=""),
    foldoc("foldoc-not-built", "{d}/foldoc", manifest=None),
    foldoc("foldoc-max-docs-zero", "config key dataset.max_docs:", args=("dataset.max_docs=0",)),
    foldoc("foldoc-max-queries-overflow", "config key dataset.max_queries:",
           args=(f"dataset.max_queries={BIG}",)),
    # --- python -m bench.data.foldoc build
    Case("foldoc-build-deb-missing", "foldoc_build",
         ("build", "--out", "{d}/out", "--deb", "{d}/nope.deb"), "--deb {d}/nope.deb"),
    Case("foldoc-build-bad-seed", "foldoc_build", ("build", "--out", "{d}/out", "--seed", "x"),
         "--seed"),
    Case("foldoc-build-seed-overflow", "foldoc_build",
         ("build", "--out", "{d}/out", "--seed", BIG), "--seed"),
    Case("foldoc-build-n-docs-zero", "foldoc_build",
         ("build", "--out", "{d}/out", "--n-docs", "0"), "--n-docs"),
    Case("foldoc-build-out-under-file", "foldoc_build",
         ("build", "--out", "{d}/afile/out", "--deb", "{d}/afile"), "--out {d}/afile/out",
         {"afile": "x"}),
    Case("foldoc-build-no-out", "foldoc_build", ("build",), "--out", subprocess=True),
    # --- others' entry points: only the cases that already behave (see the report)
    Case("evaluate-qrels-missing", "evaluate", ("{d}/nope.txt", "{d}/run.txt"), "{d}/nope.txt",
         {"run.txt": "q1 Q0 d1 1 0.5 t\n"}),
    Case("evaluate-qrels-grade-overflow", "evaluate", ("{d}/qrels.txt", "{d}/run.txt"),
         "{d}/qrels.txt:1", {"qrels.txt": f"q1 0 d1 {BIG}\n", "run.txt": "q1 Q0 d1 1 0.5 t\n"}),
    Case("evaluate-qrels-utf8", "evaluate", ("{d}/qrels.txt", "{d}/run.txt"), "{d}/qrels.txt:2",
         {"qrels.txt": b"q1 0 d1 1\n\xff\xfe\n", "run.txt": "q1 Q0 d1 1 0.5 t\n"}),
    Case("evaluate-run-nan", "evaluate", ("{d}/qrels.txt", "{d}/run.txt"), "{d}/run.txt:1",
         {"qrels.txt": "q1 0 d1 1\n", "run.txt": "q1 Q0 d1 1 nan t\n"}),
    Case("evaluate-run-short-line", "evaluate", ("{d}/qrels.txt", "{d}/run.txt"),
         "{d}/run.txt:1", {"qrels.txt": "q1 0 d1 1\n", "run.txt": "q1 Q0 d1 1 0.5\n"}),
    Case("evaluate-metric-unknown", "evaluate", ("{d}/qrels.txt", "{d}/run.txt", "-m", "bleu"),
         "bleu", {"qrels.txt": "q1 0 d1 1\n", "run.txt": "q1 Q0 d1 1 0.5 t\n"}),
    Case("evaluate-no-args", "evaluate", (), "the following arguments are required"),
    Case("evaluate-relevance-level-not-int", "evaluate",
         ("{d}/qrels.txt", "{d}/run.txt", "--relevance-level", "x"), "--relevance-level",
         {"qrels.txt": "q1 0 d1 1\n", "run.txt": "q1 Q0 d1 1 0.5 t\n"}),
    Case("compare-no-args", "compare", (), "the following arguments are required",
         subprocess=True),
    Case("compare-run-missing", "compare", ("{d}/a", "{d}/b"), "{d}/a"),
    Case("compare-run-dir-empty", "compare", ("{d}/a", "{d}/a"), "{d}/a/per_query.parquet",
         {"a/.keep": ""}),
    Case("sweep-dir-missing", "sweep", ("{d}/nope",), "{d}/nope"),
    # --- the served surfaces (issue 38)
    cfg("imported-empty-file", "{d}/answers.jsonl: no records", *IMPORTED,
        files={"answers.jsonl": ""}),
    cfg("imported-utf8", "{d}/answers.jsonl:2: invalid UTF-8", *IMPORTED,
        files={"answers.jsonl": FLASH.encode().replace(b"second", b"sec\xffnd")}),
    cfg("imported-duplicate-id", "{d}/answers.jsonl:3: duplicate record id 'q1'", *IMPORTED,
        files={"answers.jsonl": FLASH + '{"id": "q1", "question": "x?", "output": '
                                        '{"pred": "y"}}\n'}),
    cfg("gates-against-corrupt-column", "config key gates_against: ",
        "gates_against={d}/base", "regression.gates=[{metric:ndcg@10,max_drop:0.05}]",
        files={"base/per_query.parquet": _corrupted_per_query()}),
    cfg("capacity-config-unknown", "config key capacity.config: no config 'nosuch'",
        "capacity.config=nosuch"),
    cfg("capacity-config-unknown-plan-only", "config key capacity.config: no config 'nosuch'",
        "capacity.config=nosuch", "plan_only=true"),
    Case("compare-gate-malformed-yaml", "compare",
         ("--gate", "{d}/rules.yaml", "{d}/a", "{d}/b"), "{d}/rules.yaml:3: not readable YAML",
         {"rules.yaml": "regression:\n  gates: [{metric: ndcg@10, max_drop: 0.05}\n",
          "a/.keep": "", "b/.keep": ""}, subprocess=True),
]


# ---------------------------------------------------------------- running one case

def _entry(name: str) -> Callable[[list[str]], int]:
    if name == "bench":
        return run_bench_main
    if name == "foldoc_build":
        from bench.data.foldoc.cli import main as foldoc_main
        return foldoc_main
    if name == "evaluate":
        from bench.evaluate import main as evaluate_main
        return evaluate_main
    if name == "compare":
        from bench.compare import main as compare_main
        return compare_main
    if name == "sweep":
        from bench.report.sweep import main as sweep_main
        return sweep_main
    raise AssertionError(name)


MODULES = {"bench": "bench", "foldoc_build": "bench.data.foldoc", "evaluate": "bench.evaluate",
           "compare": "bench.compare", "sweep": "bench.report.sweep"}


def _in_process(entry: str, argv: list[str]) -> tuple[int, str]:
    res = in_process(_entry(entry), argv)
    return res.returncode, res.stderr


def _subprocess(entry: str, argv: list[str], cwd: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "kernels"),
                                                        os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run([sys.executable, "-m", MODULES[entry], *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr


def _materialise(case: Case, d: Path) -> list[str]:
    for name, content in case.files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    args = (*BASE, *case.args) if case.entry == "bench" else case.args
    return [a.replace("{d}", str(d)) for a in args]


def _stderr_lines(stderr: str) -> list[str]:
    # tqdm's carriage-return bars are not lines; nothing else may precede the error
    return [ln for ln in stderr.splitlines() if ln.strip()]


def test_corpus_is_large_and_covers_every_entry_point() -> None:
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.entry for c in CASES} == set(MODULES)
    datasets = {a for c in CASES for a in c.args if a.startswith("dataset=")}
    assert datasets == {"dataset=synthetic", "dataset=golden", "dataset=csv", "dataset=beir",
                        "dataset=foldoc"}
    assert sum(c.subprocess for c in CASES) >= 5


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case: Case, tmp_path: Path) -> None:
    argv = _materialise(case, tmp_path)
    if case.subprocess:
        code, stderr = _subprocess(case.entry, argv, tmp_path)
    else:
        code, stderr = _in_process(case.entry, argv)
    lines = _stderr_lines(stderr)
    if os.environ.get("HOSTILE_SHOW"):
        print(f"\n{case.id}: {stderr.strip()}")
    assert "Traceback" not in stderr, stderr[-2000:]
    assert code == 2, f"exit {code}; stderr: {stderr[-1000:]}"
    assert len(lines) == 1, f"stderr is not one line: {lines}"
    expect = case.expect.replace("{d}", str(tmp_path))
    assert expect in lines[0], f"{expect!r} not in {lines[0]!r}"
    inputs = {tmp_path / name for name in case.files}  # a case's own input files are not output
    for leftover in ("run.json", "summary.parquet", "per_query.parquet"):
        written = [p for p in tmp_path.rglob(leftover) if p not in inputs]
        assert not written, f"{leftover} written for a failed run"
