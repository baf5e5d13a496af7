"""BEIR folder loader: happy path, dropped-query log line, errors naming file:line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from bench.chunking.base import chunk_text_field
from bench.config.build import OptionError
from bench.data.beir import BeirDataset
from bench.errors import InputError

HEADER = "query-id\tcorpus-id\tscore\n"
CORPUS = [{"_id": "d1", "title": "Alpha", "text": "Alpha text.", "metadata": {"url": "u"}},
          {"_id": "d2", "title": "", "text": "Beta text."},
          {"_id": "d3", "title": "Gamma only", "text": ""}]
QUERIES = [{"_id": "q1", "text": "alpha?", "metadata": {}}, {"_id": "q2", "text": "beta?"},
           {"_id": "q3", "text": "no qrels here"}, {"_id": "q4", "text": "judged irrelevant"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq2\td2\t1\nq4\td3\t0\n"


def _folder(tmp_path: Path, corpus: list[object] | None = None,
            queries: list[object] | None = None, qrels: str = QRELS,
            split: str = "test") -> Path:
    def lines(rows: list[object]) -> str:
        return "".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows)

    (tmp_path / "corpus.jsonl").write_text(lines(corpus if corpus is not None else CORPUS))
    (tmp_path / "queries.jsonl").write_text(lines(queries if queries is not None else QUERIES))
    (tmp_path / "qrels").mkdir(exist_ok=True)
    (tmp_path / "qrels" / f"{split}.tsv").write_text(qrels)
    return tmp_path


def test_happy_path(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = _folder(tmp_path)
    with caplog.at_level(logging.INFO, logger="bench.data.beir"):
        ds = BeirDataset(path=str(root)).load()
    assert ds.doc_ids == ["d1", "d2", "d3"]
    # passages joined as BEIR/MTEB do: (title + " " + text).strip(); titles kept for display
    assert [d.text for d in ds.documents] == ["Alpha Alpha text.", "Beta text.", "Gamma only"]
    assert [d.title for d in ds.documents] == ["Alpha", "", "Gamma only"]
    assert all(d.title_in_text for d in ds.documents)
    assert chunk_text_field(ds.documents[0]) == "Alpha Alpha text."  # no second title
    assert [q.query_id for q in ds.queries] == ["q1", "q2"]
    assert ds.queries[0].qrels == (("d1", 2), ("d2", 1))
    assert ds.queries[0].category == "default" and not ds.queries[0].must_abstain
    # q3 has no judgement, q4 only a score-0 one: both dropped, counted on the record and logged
    assert ds.n_dropped_queries == 2
    assert ds.dropped_reason == ("no positive judgement in qrels/test.tsv (1 with only score-0 "
                                 "judgements, 1 not judged)")
    assert "2 dropped" in caplog.text


def test_categories_from_a_mapping_file(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                        ) -> None:
    root = _folder(tmp_path)
    mapping = tmp_path / "cats.jsonl"
    mapping.write_text('{"query_id": "q1", "category": "easy"}\n'
                       '{"query_id": "q3", "category": "dropped later"}\n')
    with caplog.at_level(logging.WARNING):
        ds = BeirDataset(path=str(root), categories=str(mapping)).load()
    assert [(q.query_id, q.category) for q in ds.queries] == [("q1", "easy"),
                                                              ("q2", "uncategorized")]
    assert "1 of 2 queries have no category" in caplog.text


@pytest.mark.parametrize("rows,line,words", [
    ('{"query_id": "q9", "category": "x"}\n', 1, "not a query of this dataset"),
    ('{"query_id": "q1", "category": "x"}\n{"query_id": "q1", "category": "y"}\n', 2,
     "mapped twice"),
    ('{"query_id": "q1"}\n', 1, "missing required field 'category'"),
])
def test_bad_category_mapping_names_file_and_line(tmp_path: Path, rows: str, line: int,
                                                  words: str) -> None:
    mapping = tmp_path / "cats.jsonl"
    mapping.write_text(rows)
    with pytest.raises(InputError, match=words) as err:
        BeirDataset(path=str(_folder(tmp_path)), categories=str(mapping)).load()
    assert err.value.one_line().startswith(f"{mapping}:{line}:")


def test_categories_from_a_query_field(tmp_path: Path) -> None:
    queries = [{"_id": "q1", "text": "a?", "metadata": {"type": "lookup"}},
               {"_id": "q2", "text": "b?", "metadata": {"type": "reasoning"}}]
    root = _folder(tmp_path, queries=queries, qrels=HEADER + "q1\td1\t1\nq2\td2\t1\n")
    ds = BeirDataset(path=str(root), category_field="metadata.type").load()
    assert [q.category for q in ds.queries] == ["lookup", "reasoning"]


@pytest.mark.parametrize("kwargs,option,words", [
    ({"path": None}, "path", "set dataset.path=DIR"),
    ({"path": "???"}, "path", "set dataset.path=DIR"),
    ({"path": "x", "categories": "c.jsonl", "category_field": "t"}, "categories", "not both"),
])
def test_bad_options(kwargs: dict[str, object], option: str, words: str) -> None:
    with pytest.raises(OptionError, match=words) as err:
        BeirDataset(**kwargs)  # type: ignore[arg-type]
    assert err.value.option == option


def test_split_selects_the_qrels_file(tmp_path: Path) -> None:
    root = _folder(tmp_path, qrels="query-id\tcorpus-id\tscore\nq3\td3\t1\n", split="dev")
    ds = BeirDataset(path=str(root), split="dev").load()
    assert [q.query_id for q in ds.queries] == ["q3"]
    assert ds.name.endswith(":dev")


QRELS_ERRORS = [
    (HEADER + "q1\tmissing\t1\n", 2, "corpus-id 'missing' is not in corpus.jsonl"),
    (HEADER + "q1\td1\t1\nq9\td1\t1\n", 3, "query-id 'q9' is not in queries.jsonl"),
    ("qid\tdid\tscore\nq1\td1\t1\n", 1, "expected the header"),
    (HEADER + "q1\td1\n", 2, "expected 3 tab-separated columns, got 2"),
    (HEADER + "q1\td1\thigh\n", 2, "column 'score' must be an integer >= 0"),
    (HEADER + "q1\td1\t-1\n", 2, "must be an integer >= 0"),
    (HEADER + "q1\td1\t1\nq1\td1\t2\n", 3,
     "duplicate judgement for ('q1', 'd1') (first on line 2)"),
]


@pytest.mark.parametrize(("qrels", "line", "fragment"), QRELS_ERRORS)
def test_qrels_errors(tmp_path: Path, qrels: str, line: int, fragment: str) -> None:
    root = _folder(tmp_path, qrels=qrels)
    with pytest.raises(InputError) as exc:
        BeirDataset(path=str(root)).load()
    assert str(exc.value).startswith(f"{root / 'qrels' / 'test.tsv'}:{line}: ")
    assert fragment in str(exc.value)


JSONL_ERRORS = [
    ("corpus", [CORPUS[0], "{bad\n"], 2, "malformed JSON"),
    ("corpus", [{"title": "t", "text": "x"}], 1, "missing required field '_id'"),
    ("corpus", [{"_id": "d1", "title": "t"}], 1, "missing required field 'text'"),
    ("corpus", [CORPUS[0], CORPUS[0]], 2, "duplicate _id 'd1' (first seen on line 1)"),
    ("corpus", [{"_id": 5, "text": "x"}], 1, "field '_id' must be a string"),
    ("queries", [QUERIES[0], QUERIES[0]], 2, "duplicate _id 'q1'"),
    ("queries", [{"_id": "q1"}], 1, "missing required field 'text'"),
    ("queries", [{"_id": "q1", "text": ""}], 1, "field 'text' is empty"),
]


@pytest.mark.parametrize(("which", "rows", "line", "fragment"), JSONL_ERRORS)
def test_jsonl_errors(tmp_path: Path, which: str, rows: list[object], line: int,
                      fragment: str) -> None:
    root = (_folder(tmp_path, corpus=rows) if which == "corpus"
            else _folder(tmp_path, queries=rows))
    with pytest.raises(InputError) as exc:
        BeirDataset(path=str(root)).load()
    assert str(exc.value).startswith(f"{root / f'{which}.jsonl'}:{line}: ")
    assert fragment in str(exc.value)


def test_missing_split(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    with pytest.raises(InputError, match="file not found"):
        BeirDataset(path=str(root), split="train").load()


SQUAD2 = Path(__file__).parent / "squad2_sample" / "beir"


def test_answers_file_squad2_sample(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="bench.data.beir"):
        ds = BeirDataset(path=str(SQUAD2), answers=str(SQUAD2 / "answers.jsonl")).load()
    # the 9 unanswerable questions have no qrels line: dropped (and their answer rows skipped)
    assert (len(ds.queries), ds.n_dropped_queries) == (8, 9)
    by_id = {q.query_id: q for q in ds.queries}
    assert by_id["56ddde6b9a695914005b9629"].references == (
        "10th and 11th centuries", "in the 10th and 11th centuries")
    assert by_id["56ddde6b9a695914005b9629"].expected_answer == "10th and 11th centuries"
    assert by_id["56ddde6b9a695914005b9628"].references == ("France",)
    assert "reference answers for 8 of the 8 kept queries" in caplog.text
    without = BeirDataset(path=str(SQUAD2)).load()
    assert all(q.references == () for q in without.queries)
    assert without.fingerprint != ds.fingerprint


@pytest.mark.parametrize(("rows", "line", "fragment"), [
    ('{"query_id": "q1"}\n', 1, "missing required field 'answers'"),
    ('{"answers": ["a"]}\n', 1, "missing required field 'query_id'"),
    ('{"query_id": "q9", "answers": ["a"]}\n', 1, "query_id 'q9' is not in queries.jsonl"),
    ('{"query_id": "q1", "answers": ["a"]}\n{"query_id": "q1", "answers": []}\n', 2,
     "duplicate query_id 'q1' (first seen on line 1)"),
    ('{"query_id": "q1", "answers": "a"}\n', 1, "'answers' must be a list of strings"),
    ('{"query_id": "q1", "answers": null}\n', 1, "'answers' must be a list of strings"),
    ('{"query_id": "q1", "answers": ["a", 2]}\n', 1, "'answers[1]' must be a string"),
])
def test_answers_file_errors(tmp_path: Path, rows: str, line: int, fragment: str) -> None:
    root = _folder(tmp_path)
    (tmp_path / "answers.jsonl").write_text(rows)
    with pytest.raises(InputError) as exc:
        BeirDataset(path=str(root), answers=str(tmp_path / "answers.jsonl")).load()
    assert str(exc.value).startswith(f"{tmp_path / 'answers.jsonl'}:{line}: ")
    assert fragment in str(exc.value)


def test_answers_of_a_dropped_query_are_skipped(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    (tmp_path / "answers.jsonl").write_text(
        '{"query_id": "q3", "answers": ["x"]}\n{"query_id": "q1", "answers": ["alpha"]}\n')
    ds = BeirDataset(path=str(root), answers=str(tmp_path / "answers.jsonl")).load()
    assert {q.query_id: q.references for q in ds.queries} == {"q1": ("alpha",), "q2": ()}
