"""Splits: reading them, making a grouped seeded split file, and the contamination check."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from bench.data.base import Dataset, Document, Query
from bench.data.golden import GoldenDataset, query_to_json, read_queries, write_golden
from bench.data.splits import (
    contamination,
    groups,
    make_splits,
    near_duplicates,
    normalise,
    read_split_map,
    with_splits,
)
from bench.data.splits.__main__ import main
from bench.errors import InputError


def q(qid: str, text: str, docs: tuple[str, ...] = ("d0",), split: str = "",
      category: str = "c") -> Query:
    return Query(qid, text, category, tuple((d, 1) for d in docs), split=split)


def test_normalisation_folds_case_punctuation_and_width() -> None:
    assert normalise("  What is  FOO-bar?! ") == "what is foo bar"
    assert normalise("Ｃａｆé_au lait") == "café au lait"  # NFKC full width, underscore


def test_near_duplicates_are_identical_texts_or_jaccard_at_least_09() -> None:
    words = [f"w{i}" for i in range(20)]
    texts = {
        "a": "What is a B-tree?", "b": "what is a b tree",  # identical after normalisation
        "c": " ".join(words), "d": " ".join([*words[:19], "other"]),  # 19 / 21 = 0.905
        "e": " ".join([*words[:18], "x", "y"]),  # with c: 18 / 22 = 0.82
    }
    got = {(a, b): round(j, 3) for a, b, j in near_duplicates(texts)}
    assert got == {("a", "b"): 1.0, ("c", "d"): round(19 / 21, 3)}


def test_prefix_filtering_finds_what_all_pairs_finds() -> None:
    rng = random.Random(5)
    vocab = [f"t{i}" for i in range(30)]
    texts = {}
    for i in range(120):
        base = rng.sample(vocab, rng.randint(1, 12))
        if i % 3 == 0 and texts:  # plant near-copies of an earlier text
            base = list(texts[f"q{rng.randrange(i)}"].split())
            if rng.random() < 0.5:
                base.append(rng.choice(vocab))
        texts[f"q{i}"] = " ".join(base)
    sets = {k: set(v.split()) for k, v in texts.items()}
    brute = sorted((a, b) for a, b in itertools.combinations(sorted(texts), 2)
                   if len(sets[a] & sets[b]) / len(sets[a] | sets[b]) >= 0.9
                   or normalise(texts[a]) == normalise(texts[b]))
    assert brute and [(a, b) for a, b, _ in near_duplicates(texts)] == brute


def test_the_check_fires_on_a_planted_duplicate_across_splits() -> None:
    qs = [q("q1", "How does a B-tree split a node?", ("d1",), "development"),
          q("q2", "how does a b tree split a node", ("d2",), "release"),
          q("q3", "What is Lisp?", ("d3",), "release")]
    found = contamination(qs)
    assert found.near_duplicates == (
        "q1 (development) ~ q2 (release): identical after normalisation",)
    (line,) = found.warnings()
    assert line.startswith("1 query pair(s) in two splits are near-duplicates")
    # the same pair inside one split is no contamination
    assert not contamination([q("q1", "a b c", split="release"),
                              q("q2", "A b c", split="release")]).near_duplicates


def test_the_check_fires_on_a_document_in_two_splits_and_on_release_ids_in_a_config() -> None:
    qs = [q("q1", "alpha", ("d1",), "development"), q("q2", "beta", ("d1",), "release"),
          q("q3", "gamma", ("d3",), "release")]
    found = contamination(qs, {"context": {"probe_queries": ["q3", "q1"]},
                               "regression": {"critical": {"query_ids": ["q2", "q3"]}}})
    assert found.shared_documents == ("d1: q1 (development), q2 (release)",)
    # the critical list guards release queries by design: not contamination
    assert found.release_ids_in_config == ("context.probe_queries[0] = q3",)
    assert not contamination([q("q1", "alpha")], {"x": "q1"}).found  # no splits: no check


def test_make_splits_groups_by_document_and_near_duplicate_and_is_seeded() -> None:
    qs = [q(f"q{i:02d}", f"question number {i} about topic {i}", (f"d{i // 2}",),
            category="ab"[i % 2]) for i in range(40)]
    qs.append(q("dup", "Question number 3 about topic 3", ("dx",)))  # near-dup of q03
    split = make_splits(qs, {"development": 0.5, "release": 0.5}, seed=1)
    assert split == make_splits(qs, {"development": 0.5, "release": 0.5}, seed=1)
    assert split != make_splits(qs, {"development": 0.5, "release": 0.5}, seed=2)
    for i in range(0, 40, 2):  # q(2k) and q(2k+1) share document d(k)
        assert split[f"q{i:02d}"] == split[f"q{i + 1:02d}"]
    assert split["dup"] == split["q03"]
    assert {len(g) for g in groups(qs)} == {2, 3}
    counts = {s: sum(v == s for v in split.values()) for s in ("development", "release")}
    # 19 groups of 2 (category a: q(2k)'s) and one of 3: at most one group apart
    assert abs(counts["development"] - counts["release"]) <= 3
    assert not contamination([dataclasses_split(x, split) for x in qs]).found


def dataclasses_split(query: Query, split: dict[str, str]) -> Query:
    import dataclasses

    return dataclasses.replace(query, split=split[query.query_id])


def test_golden_rows_carry_a_split_and_refuse_an_unknown_one(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    rows = [{"query_id": "q1", "query": "x", "relevant_document_ids": ["d1"],
             "split": "release"},
            {"query_id": "q2", "query": "y", "relevant_document_ids": ["d1"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    q1, q2 = read_queries(path, {"d1"})
    assert (q1.split, q2.split) == ("release", "")
    assert query_to_json(q1)["split"] == "release" and "split" not in query_to_json(q2)
    rows[1]["split"] = "test"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"q\.jsonl:2: unknown split 'test'"):
        read_queries(path, {"d1"})


def test_a_split_file_is_checked_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"query_id": "q1", "split": "release"}\n'
                    '{"query_id": "q9", "split": "release"}\n')
    with pytest.raises(InputError, match=r"s\.jsonl:2: query_id 'q9' is not a query"):
        read_split_map(path, {"q1"})
    path.write_text('{"query_id": "q1", "split": "holdout"}\n')
    with pytest.raises(InputError, match=r"s\.jsonl:1: unknown split 'holdout'"):
        read_split_map(path, {"q1"})
    path.write_text('{"query_id": "q1", "split": "release"}\n')
    ds = with_splits(Dataset("t", (Document("d0", "x"),), (q("q1", "a"), q("q2", "b"))),
                     str(path))
    assert [x.split for x in ds.queries] == ["release", ""]


def test_the_make_and_check_commands(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    docs = [Document(f"d{i}", f"text {i}") for i in range(10)]
    qs = [q(f"q{i}", f"what is thing {i}", (f"d{i // 2}",)) for i in range(10)]
    qs.append(q("q10", "What is thing 7?", ("d9",)))  # a near-duplicate of q7
    write_golden(docs, qs, corpus=tmp_path / "c.jsonl", queries_path=tmp_path / "q.jsonl")
    src = ["--golden", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl")]
    out = tmp_path / "splits.jsonl"
    assert main(["make", *src, "--out", str(out), "--shares", "development=0.5,release=0.5"]
                ) == 0
    assert "11 queries in 5 groups" in capsys.readouterr().out
    assert main(["check", *src, "--splits", str(out)]) == 0
    assert "no contamination found" in capsys.readouterr().out
    # plant the duplicate in the other split: the check finds it
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_id = {r["query_id"]: r["split"] for r in rows}
    other = "release" if by_id["q7"] == "development" else "development"
    out.write_text("".join(json.dumps({"query_id": k, "split": other if k == "q10" else v})
                           + "\n" for k, v in by_id.items()))
    assert main(["check", *src, "--splits", str(out)]) == 1
    text = capsys.readouterr().out
    assert "q10" in text and "q7" in text and "identical after normalisation" in text
    assert main(["make", *src, "--out", str(out), "--shares", "release=-1"]) == 2
    assert "must be > 0" in capsys.readouterr().err
    assert GoldenDataset(corpus=str(tmp_path / "c.jsonl"),
                         queries=str(tmp_path / "q.jsonl")).load().queries[0].split == ""


def test_check_flags_a_tuning_run_whose_config_names_release_queries(tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                    capsys) -> None:
    docs = [Document("d0", "text"), Document("d1", "more")]
    qs = [q("q1", "alpha", ("d0",), "development"), q("q2", "beta", ("d1",), "release")]
    write_golden(docs, qs, corpus=tmp_path / "c.jsonl", queries_path=tmp_path / "q.jsonl")
    src = ["--golden", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl")]
    run = tmp_path / "tuning"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"config": {"context": {"probe": ["q2"]}}}))
    assert main(["check", *src]) == 0
    capsys.readouterr()
    assert main(["check", *src, "--run", str(run)]) == 1
    assert "the run's config names release-split queries: context.probe[0] = q2" in (
        capsys.readouterr().out)
    (run / "run.json").write_text("{")
    assert main(["check", *src, "--run", str(run)]) == 2
    assert "not a readable run.json" in capsys.readouterr().err


def test_a_csv_split_column(tmp_path: Path) -> None:
    from bench.data.csv_source import CsvDataset

    (tmp_path / "c.csv").write_text("doc_id,text\nd1,one\n")
    (tmp_path / "q.csv").write_text("query_id,query,split\nq1,x,release\nq2,y,\n")
    (tmp_path / "r.csv").write_text("query_id,doc_id\nq1,d1\nq2,d1\n")
    ds = CsvDataset(corpus=str(tmp_path / "c.csv"), queries=str(tmp_path / "q.csv"),
                    qrels=str(tmp_path / "r.csv")).load()
    assert [x.split for x in ds.queries] == ["release", ""]
    (tmp_path / "q.csv").write_text("query_id,query,split\nq1,x,dev\nq2,y,\n")
    with pytest.raises(InputError, match=r"q\.csv:2: unknown split 'dev'"):
        CsvDataset(corpus=str(tmp_path / "c.csv"), queries=str(tmp_path / "q.csv"),
                   qrels=str(tmp_path / "r.csv")).load()
