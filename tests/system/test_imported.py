"""Answers produced elsewhere (Ragas, RAGChecker, FlashRAG) as ``system=imported``: each
format read, a malformed record one line naming file:line, and the imported answers checked,
accounted and compared like bench's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf
from scripted_fixture import REPO, compose_run

from bench.config.build import build
from bench.errors import InputError
from bench.system.base import SystemQuery
from bench.system.formats import read_records
from bench.system.imported import ImportedSystem


def test_ragas_jsonl_and_json(tmp_path: Path) -> None:
    rows = [{"user_input": "What is X?", "retrieved_contexts": ["X is a cat."],
             "response": "A cat.", "reference": "X is a cat."},
            {"user_input": "What is Y?", "response": "A dog."}]
    jl = tmp_path / "ds.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    a, b = read_records(jl, "ragas")
    assert (a.query, a.answer, a.references, a.contexts) == ("What is X?", "A cat.",
                                                            ("X is a cat.",), ("X is a cat.",))
    assert a.context_ids == (None,) and b.contexts == () and b.line == 2
    js = tmp_path / "ds.json"
    js.write_text(json.dumps({"samples": rows}, indent=2))
    assert [r.query for r in read_records(js, "ragas")] == ["What is X?", "What is Y?"]


@pytest.mark.parametrize(("fmt", "text", "line", "what"), [
    ("ragas", '{"user_input": "q", "response": "a"}\n{"user_input": "q2"}\n', 2,
     "'response' must be text"),
    ("ragas", '{"user_input": "q", "response": "a"}\n\n{oops\n', 3, "not JSON"),
    ("ragas", '{"user_input": "q", "response": "a", "retrieved_contexts": "x"}\n', 1,
     "'retrieved_contexts' must be a list of texts"),
    ("flashrag", '{"id": "1", "question": "q", "output": {"pred": "a"}}\n'
                 '{"id": "2", "question": "q", "output": {"pred": 3}}\n', 2, "output.pred"),
    ("flashrag", '{"question": "q", "output": {"pred": "a"}}\n', 1, "'id' is missing"),
])
def test_a_malformed_record_names_file_and_line(tmp_path: Path, fmt: str, text: str,
                                                line: int, what: str) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_records(path, fmt)
    assert err.value.line == line and err.value.path == str(path)
    assert what in str(err.value) and str(err.value).startswith(f"{path}:{line}: ")


def test_ragchecker_record_lines_inside_the_json(tmp_path: Path) -> None:
    good = {"query_id": "a", "query": "q", "gt_answer": "g", "response": "r",
            "retrieved_context": [{"doc_id": "d1", "text": "t"}]}
    bad = {"query": "q", "response": "r"}
    path = tmp_path / "rc.json"
    path.write_text('{"results": [\n' + json.dumps(good) + ",\n" + json.dumps(bad) + "\n]}\n")
    with pytest.raises(InputError) as err:
        read_records(path, "ragchecker")
    assert err.value.line == 3  # the line the malformed result opens on
    assert "'query_id' is missing" in str(err.value)
    path.write_text(json.dumps({"results": [good]}))
    (r,) = read_records(path, "ragchecker")
    assert r.query_id == "a" and r.context_ids == ("d1",) and r.references == ("g",)


def test_records_match_queries_by_id_then_text(tmp_path: Path) -> None:
    path = tmp_path / "fr.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "q1", "question": "first?", "golden_answers": ["x"],
         "output": {"pred": "one", "retrieval_result": [{"id": "d1", "contents": "c"}]}},
        {"id": "zz", "question": "second?", "output": {"pred": "two"}}]) + "\n")
    s = ImportedSystem(path=str(path), format="flashrag")
    s.preflight()
    one, two, none = s.ask([SystemQuery("q1", "ignored"), SystemQuery("q2", " second? "),
                            SystemQuery("q3", "third?")])
    assert (one.answer, one.doc_ids, one.passages) == ("one", ("d1",), ("c",))
    assert two.answer == "two" and two.doc_ids == ()
    assert none.status == "failed" and "no record" in (none.error or "")


def _ragchecker_file(path: Path) -> list[Any]:
    src = build(OmegaConf.load(REPO / "conf/dataset/synthetic.yaml"), "dataset")
    d = src.load()
    results = []
    for q in d.queries[1:]:  # the first query has no record: failed, never dropped
        gold = [x for x, _ in sorted(q.qrels, key=lambda r: -r[1])]
        results.append({"query_id": q.query_id, "query": q.text,
                        "gt_answer": q.expected_answer or "", "response":
                        q.expected_answer or "I don't know.",
                        "retrieved_context": [{"doc_id": x, "text": f"passage {x}"}
                                              for x in gold]})
    path.write_text(json.dumps({"results": results}, indent=1))
    return list(d.queries)


def test_imported_answers_are_scored_like_bench_own(tmp_path: Path) -> None:
    path = tmp_path / "ragchecker.json"
    queries = _ragchecker_file(path)
    result = compose_run(["system=imported", f"system.path={path}",
                          "system.format=ragchecker"], tmp_path / "cache", tmp_path / "run")
    configs = {c["label"]: c for c in
               pq.read_table(result.run_dir / "configs.parquet").to_pylist()}
    ranking, answered = configs["system(imported)"], configs["system(imported)>answer"]
    assert ranking["kind"] == "system" and answered["kind"] == "generated"
    assert ranking["e2e_p50_ms"] is None  # no latency is known for imported answers
    rows = pq.read_table(result.run_dir / "per_query.parquet").to_pylist()
    f1 = {r["query_id"]: r for r in rows
          if r["config_id"] == answered["config_id"] and r["metric"] == "token_f1"}
    assert f1[queries[0].query_id]["status"] == "failed"
    assert all(r["value"] == pytest.approx(1.0) for q, r in f1.items()
               if q != queries[0].query_id)
    ndcg = [r for r in rows if r["config_id"] == ranking["config_id"]
            and r["metric"] == "ndcg@10" and r["status"] == "scored"]
    assert ndcg and all(r["value"] == pytest.approx(1.0) for r in ndcg)
    comps = pq.read_table(result.run_dir / "comparisons.parquet").to_pylist()
    assert any(r["config_id"] == ranking["config_id"] for r in comps)


# --- hostile files (issue 38): one line naming file(:line), never a traceback --------------

FLASH = ('{"id": "q1", "question": "first?", "output": {"pred": "one"}}\n'
         '{"id": "q2", "question": "second?", "output": {"pred": "two"}}\n')


@pytest.mark.parametrize(("fmt", "name", "data", "line", "what"), [
    ("flashrag", "empty.jsonl", b"", 0, "no records"),
    ("ragchecker", "empty.json", b"", 1, "not JSON"),
    ("flashrag", "utf8.jsonl", FLASH.encode().replace(b"second", b"sec\xffnd"), 2,
     "invalid UTF-8 (byte 0xff"),
    ("flashrag", "dup.jsonl", (FLASH + '{"id": "q1", "question": "again?", "output": '
                               '{"pred": "three"}}\n').encode(), 3,
     "duplicate record id 'q1' (first at line 1)"),
    ("ragas", "dup.jsonl", b'{"user_input": "What is X?", "response": "a"}\n'
                           b'{"user_input": " What  is X? ", "response": "b"}\n', 2,
     "duplicate query text 'What is X?'"),
])
def test_a_hostile_answers_file_is_one_line(tmp_path: Path, fmt: str, name: str, data: bytes,
                                            line: int, what: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError) as err:
        read_records(path, fmt)
    assert err.value.line == line and what in str(err.value)
    assert "\n" not in str(err.value)


def test_a_utf8_bom_is_accepted_as_the_dataset_readers_do(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + FLASH.encode())
    assert [r.query_id for r in read_records(path, "flashrag")] == ["q1", "q2"]
    js = tmp_path / "bom.json"
    js.write_bytes(b"\xef\xbb\xbf" + json.dumps({"results": [
        {"query_id": "a", "query": "q", "response": "r"}]}).encode())
    assert read_records(js, "ragchecker")[0].query_id == "a"
