from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.config.build import OptionError
from bench.embedding.static import StaticEmbedder
from bench.errors import ConfigError
from bench.generation.base import Generation, GenerationRequest
from bench.robustness.base import CASE_TYPES
from bench.robustness.study import (
    OUTCOME_SCHEMA,
    RETRIEVAL_SCHEMA,
    RobustnessStudy,
    run_configured,
)
from tests.cli import bench, bench_in_process
from tests.judge.scripted import ScriptedGenerator
from tests.robustness.fixtures import tiny_dataset


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder(model="packaged:paraphrase-MiniLM-L3-v2",
                          tokenizer="packaged:all-MiniLM-L6-v2", device="cpu")


def first_passage_title(r: GenerationRequest) -> str | Generation:
    """Answers with the first passage's title line (yes/no questions: "No"); fails the
    first reworded-duplicate request (a failure is a status, never a class)."""
    user = r.messages[-1].content
    if r.request_id.startswith("robust:reworded_duplicate:") and "q0" in r.request_id:
        return Generation(r.request_id, "", "timeout", "timeout", 0, 0, None, None, 5.0,
                          error="deadline")
    if user.rstrip().endswith("Answer yes or no."):
        return "No."
    m = re.search(r"^\[1\] (?:\[[^\]]*\] )?(.+)$", user, re.MULTILINE)
    return m.group(1) if m else "I don't know"


def test_study_writes_outcomes_poisoning_and_tables(embedder: StaticEmbedder,
                                                    tmp_path: Path) -> None:
    study = RobustnessStudy(n=6, n_poison=6, cluster_size=3, top_k=4, overlap_threshold=0.8)
    gen = ScriptedGenerator(first_passage_title)
    res = study.run(tiny_dataset(), embedder, gen, tmp_path)
    out = pq.read_table(tmp_path / "outcomes.parquet")
    assert out.schema.equals(OUTCOME_SCHEMA, check_metadata=True)
    rows = out.to_pylist()
    # every non-poison type answers all 6 sources; poisoning answers the first n attacked
    assert len(rows) == len(gen.requests) == 6 * len(CASE_TYPES)
    by_type = {t.case_type: t for t in res.types}
    assert list(by_type) == list(CASE_TYPES)
    dup = by_type["reworded_duplicate"]
    assert (dup.n, dup.failed) == (5, 1)  # the timeout is counted apart, never in n
    assert sum(r["outcome"] == "generation_failed" for r in rows) == 1
    # the first passage of an entity swap is the swapped one: the context is followed
    assert by_type["entity_swap"].answered.k == 6
    # incomplete context: the gold was removed, so the first title is never the term
    assert by_type["incomplete_context"].answered.k == 0
    for r in rows:
        if r["case_type"] == "incomplete_context":
            case = next(json.loads(x) for x in (tmp_path / "cases.jsonl").open()
                        if json.loads(x)["case_id"] == r["case_id"])
            assert len(case["context"]) == 4
            assert not {p["doc_id"] for p in case["context"]} & set(case["gold_doc_ids"])
    ret = pq.read_table(tmp_path / "poison_retrieval.parquet")
    assert ret.schema.equals(RETRIEVAL_SCHEMA, check_metadata=True)
    mono, poly = res.poison
    assert mono.case_type == "poison_mono" and poly.case_type == "poison_poly"
    # the question is in every planted passage: each cluster reaches its query's top-k
    assert mono.hijack_retrieval.k == mono.hijack_retrieval.n == 6
    # each query's own cluster (3 copies, top-4) is caught whole; a lone copy of ANOTHER
    # query's cluster in a top-k has no duplicate there and stays: the filter's blind spot
    assert mono.caught.k == 6 * 3 and mono.hijack_after_filter.k == 0
    assert mono.clean_removed.k == 0
    assert poly.caught.k < poly.caught.n
    summary = json.loads((tmp_path / "robustness.json").read_text())
    assert summary["schema_version"] == 1 and len(summary["types"]) == len(CASE_TYPES)
    md = (tmp_path / "robustness.md").read_text()
    assert "| poison_mono | 6 |" in md and "Wilson" in md and "plumbing" not in md


def test_run_configured_builds_its_generator_and_logs_the_tables(
        embedder: StaticEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.config.build as build_mod

    gen = ScriptedGenerator(first_passage_title)
    real = build_mod.build
    monkeypatch.setattr(build_mod, "build", lambda node, key, *a, **k: gen if key ==
                        "robustness.generator" else real(node, key, *a, **k))
    node = {"n": 2, "n_poison": 3, "cluster_size": 2, "top_k": 3, "cases": ["poison_mono"],
            "generator": {"_target_": "bench.generation.transformers_cpu."
                                      "TransformersCPUGenerator"}}
    with caplog.at_level("INFO", logger="bench"):
        res = run_configured(node, tiny_dataset(), embedder, tmp_path)
    assert [t.case_type for t in res.types] == ["poison_mono"] and res.types[0].n == 2
    assert (tmp_path / "robustness" / "robustness.md").exists()
    assert any("| poison_mono | 3 |" in r.getMessage() for r in caplog.records)
    with pytest.raises(ConfigError) as err:
        run_configured({"n": 2}, tiny_dataset(), embedder, tmp_path)
    assert err.value.key == "robustness.generator"


@pytest.mark.parametrize(("kwargs", "option"), [
    ({"cases": ["incomplete_context", "nope"]}, "cases"),
    ({"poison_rate": 0.0}, "poison_rate"),
    ({"poison_rate": 1.5}, "poison_rate"),
    ({"cluster_size": 1}, "cluster_size"),
    ({"as_of": "2026-13-01"}, "as_of"),
    ({"overlap_threshold": 0.0}, "overlap_threshold"),
])
def test_bad_options_name_their_key(kwargs: dict, option: str) -> None:
    with pytest.raises(OptionError) as err:
        RobustnessStudy(**kwargs)
    assert err.value.option == option


BAD_INPUT = [
    (["robustness.cases=[incomplete_context,poison_typo]"], "robustness.cases"),
    (["robustness.poison_rate=0"], "robustness.poison_rate"),
    (["robustness.generator.batch_size=0"], "robustness.generator.batch_size"),
    (["dataset=golden"], "robustness.cases"),  # no term questions: no case to build
]


@pytest.mark.parametrize(("args", "key"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line_before_any_work(args: list[str], key: str,
                                                         tmp_path: Path) -> None:
    if args == ["dataset=golden"]:  # answerable, but no expected answer naming its gold
        (tmp_path / "c.jsonl").write_text("".join(
            json.dumps({"doc_id": f"d{i}", "title": f"term {i}", "text": f"Entry {i}."}) + "\n"
            for i in range(3)))
        (tmp_path / "q.jsonl").write_text(json.dumps(
            {"query_id": "q1", "query": "What is entry 1?", "relevant_document_ids": ["d1"],
             "expected_answer": "Entry 1."}) + "\n")
        args = [*args, f"dataset.corpus={tmp_path}/c.jsonl",
                f"dataset.queries={tmp_path}/q.jsonl"]
    run = bench if args == BAD_INPUT[0][0] else bench_in_process  # tests/cli.py
    res = run("+experiment=robustness", f"cache_dir={tmp_path}/cache",
              f"hydra.run.dir={tmp_path}/r", *args)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.npy"))
