"""Golden JSONL loader: happy path, round trip, and every error naming file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.data.golden import GoldenDataset, read_corpus, write_golden
from bench.data.synthetic import SyntheticDataset
from bench.errors import InputError

CORPUS = [
    {"doc_id": "d1", "text": "Alpha text.", "title": "Alpha", "tags": ["x"],
     "allowed_roles": ["staff"], "tenant": ""},
    {"doc_id": "d2", "text": "Beta text."},
]
#: with a tenant on d1, every query needs its caller's tenant
TENANTED = [{**CORPUS[0], "tenant": "acme"}, CORPUS[1]]
QUERIES = [
    {"query_id": "q1", "query": "What is alpha?", "relevant_document_ids": ["d1"],
     "required_claims": ["Alpha is a letter."], "must_abstain": False, "allowed_roles": [],
     "as_of": "2024-05-01", "category": "exact_lookup", "expected_answer": "A letter."},
    {"query_id": "q2", "query": "Alpha and beta?",
     "relevant_document_ids": [{"id": "d1", "grade": 2}, {"id": "d2"}], "category": "multi_doc"},
    {"query_id": "q3", "query": "What is gamma?", "must_abstain": True,
     "relevant_document_ids": []},
]


def _write(path: Path, rows: list[object]) -> str:
    path.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows),
                    encoding="utf-8")
    return str(path)


def _load(tmp_path: Path, corpus: list[object], queries: list[object]) -> GoldenDataset:
    return GoldenDataset(corpus=_write(tmp_path / "corpus.jsonl", corpus),
                         queries=_write(tmp_path / "golden.jsonl", queries))


def test_happy_path(tmp_path: Path) -> None:
    queries = [{**q, "tenant": "acme"} for q in QUERIES]
    ds = _load(tmp_path, [*TENANTED, "\n"], queries).load()  # a blank line is not data
    assert ds.name == "golden:golden"
    assert [d.doc_id for d in ds.documents] == ["d1", "d2"]
    d1 = ds.documents[0]
    assert (d1.title, d1.tags, d1.allowed_roles, d1.tenant) == ("Alpha", ("x",), ("staff",),
                                                                 "acme")
    q1, q2, q3 = ds.queries
    assert q1.qrels == (("d1", 1),) and q1.as_of == "2024-05-01"
    assert q1.required_claims == ("Alpha is a letter.",) and q1.expected_answer == "A letter."
    assert q2.qrels == (("d1", 2), ("d2", 1)) and q2.category == "multi_doc"
    assert q3.must_abstain and q3.qrels == () and q3.category == "default"
    assert {q.tenant for q in ds.queries} == {"acme"}


def test_a_query_without_tenant_over_a_tenanted_corpus_names_its_line(tmp_path: Path) -> None:
    queries = [{**QUERIES[0], "tenant": "acme"}, QUERIES[1]]
    with pytest.raises(InputError) as err:
        _load(tmp_path, TENANTED, queries).load()
    assert err.value.line == 2
    assert err.value.message == ("query 'q2' has no tenant, but corpus documents have "
                                 "tenants: give every query its caller's tenant")
    assert _load(tmp_path, CORPUS, QUERIES).load().queries[0].tenant == ""  # none: optional


def test_round_trip_keeps_fingerprint(tmp_path: Path) -> None:
    ds = SyntheticDataset(n_docs=12, n_queries=8).load()
    write_golden(ds.documents, ds.queries, corpus=tmp_path / "c.jsonl",
                 queries_path=tmp_path / "q.jsonl")
    back = GoldenDataset(corpus=str(tmp_path / "c.jsonl"), queries=str(tmp_path / "q.jsonl"))
    loaded = back.load()
    assert loaded.documents == ds.documents
    assert loaded.queries == ds.queries
    assert loaded.fingerprint == ds.fingerprint


CORPUS_ERRORS = [
    (["{not json\n"], 1, "malformed JSON"),
    ([CORPUS[0], "[1, 2]\n"], 2, "expected a JSON object"),
    ([{"text": "no id"}], 1, "missing required field 'doc_id'"),
    ([{"doc_id": "d1"}], 1, "missing required field 'text'"),
    ([{"doc_id": "d1", "text": "t", "tittle": "typo"}], 1,
     "unknown field(s) 'tittle'; allowed fields: doc_id, text, title"),
    ([{"doc_id": "d1", "text": "  "}], 1, "field 'text' is empty"),
    ([{"doc_id": 7, "text": "t"}], 1, "field 'doc_id' must be a string"),
    ([{"doc_id": "d1", "text": "t", "tags": "x"}], 1, "field 'tags' must be a list"),
    ([{"doc_id": "d1", "text": "t", "allowed_roles": [1]}], 1,
     "field 'allowed_roles[0]' must be a string"),
    ([CORPUS[0], CORPUS[1], CORPUS[0]], 3, "duplicate doc_id 'd1' (first seen on line 1)"),
]


@pytest.mark.parametrize(("rows", "line", "fragment"), CORPUS_ERRORS)
def test_corpus_errors(tmp_path: Path, rows: list[object], line: int, fragment: str) -> None:
    with pytest.raises(InputError) as exc:
        _load(tmp_path, rows, QUERIES).load()
    path = str(tmp_path / "corpus.jsonl")
    assert str(exc.value).startswith(f"{path}:{line}: ")
    assert fragment in str(exc.value)
    assert (exc.value.path, exc.value.line) == (path, line)


def _q(**fields: object) -> dict[str, object]:
    row: dict[str, object] = {"query_id": "qx", "query": "Q?", "relevant_document_ids": ["d1"]}
    row.update(fields)
    return {k: v for k, v in row.items() if v is not None}


QUERY_ERRORS = [
    ([QUERIES[0], "oops\n"], 2, "malformed JSON"),
    ([_q(query_id=None)], 1, "missing required field 'query_id'"),
    ([_q(query=None)], 1, "missing required field 'query'"),
    ([_q(must_abstian=True)], 1, "unknown field(s) 'must_abstian'; allowed fields: query_id"),
    ([_q(relevant_document_ids=["nope"])], 1, "names unknown document 'nope'"),
    ([_q(relevant_document_ids=[{"id": "nope", "grade": 1}])], 1, "unknown document 'nope'"),
    ([_q(relevant_document_ids=["d1", "d1"])], 1, "'d1' is listed twice"),
    ([_q(relevant_document_ids=[{"id": "d1", "grade": -1}])], 1, "must be an integer >= 0"),
    ([_q(relevant_document_ids=[{"id": "d1", "grade": True}])], 1, "must be an integer >= 0"),
    ([_q(relevant_document_ids=[{"doc": "d1"}])], 1,
     "relevant_document_ids[0]: missing required field 'id'"),
    ([_q(relevant_document_ids="d1")], 1, "'relevant_document_ids' must be a list"),
    ([_q(must_abstain=True)], 1, "must_abstain is true but relevant_document_ids is not empty"),
    ([_q(relevant_document_ids=[])], 1, "relevant_document_ids is empty"),
    ([_q(relevant_document_ids=None)], 1, "relevant_document_ids is empty"),
    ([_q(must_abstain="yes")], 1, "'must_abstain' must be true or false"),
    ([_q(required_claims="one claim")], 1, "'required_claims' must be a list"),
    ([_q(as_of="last tuesday")], 1, "'as_of' must be an ISO-8601 date"),
    ([_q(category="")], 1, "field 'category' is empty"),
    ([_q(expected_answer=3)], 1, "'expected_answer' must be a string"),
    ([_q(expected_answers="France")], 1, "'expected_answers' must be a list of strings"),
    ([_q(expected_answers=["France", ""])], 1, "field 'expected_answers[1]' is empty"),
    ([_q(expected_answers=["France"], expected_answer="France")], 1,
     "give expected_answer (one reference) or expected_answers (a list), not both"),
    ([QUERIES[0], QUERIES[1], QUERIES[0]], 3, "duplicate query_id 'q1' (first seen on line 1)"),
]


@pytest.mark.parametrize(("rows", "line", "fragment"), QUERY_ERRORS)
def test_query_errors(tmp_path: Path, rows: list[object], line: int, fragment: str) -> None:
    with pytest.raises(InputError) as exc:
        _load(tmp_path, CORPUS, rows).load()
    assert str(exc.value).startswith(f"{tmp_path / 'golden.jsonl'}:{line}: ")
    assert fragment in str(exc.value)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found") as exc:
        read_corpus(tmp_path / "absent.jsonl")
    assert str(exc.value).startswith(f"{tmp_path / 'absent.jsonl'}: ")


def test_categories_mapping_replaces_the_rows_categories(tmp_path: Path) -> None:
    plain = _load(tmp_path, CORPUS, QUERIES).load()
    cats = _write(tmp_path / "cats.jsonl", [{"query_id": "q1", "category": "lookup"},
                                            {"query_id": "q3", "category": "refusal"}])
    ds = GoldenDataset(corpus=str(tmp_path / "corpus.jsonl"),
                       queries=str(tmp_path / "golden.jsonl"), categories=cats).load()
    # q2 is not in the mapping: uncategorized (and a warning), never its old category silently
    assert [q.category for q in ds.queries] == ["lookup", "uncategorized", "refusal"]
    assert ds.fingerprint != plain.fingerprint
    bad = _write(tmp_path / "bad.jsonl", [{"query_id": "q9", "category": "x"}])
    with pytest.raises(InputError, match=r"bad\.jsonl:1: query_id 'q9' is not a query"):
        GoldenDataset(corpus=str(tmp_path / "corpus.jsonl"),
                      queries=str(tmp_path / "golden.jsonl"), categories=bad).load()


SQUAD2 = Path(__file__).parent / "squad2_sample"


def test_several_reference_answers_squad2_sample(tmp_path: Path) -> None:
    ds = GoldenDataset(corpus=str(SQUAD2 / "documents.jsonl"),
                       queries=str(SQUAD2 / "golden.jsonl")).load()
    by_id = {q.query_id: q for q in ds.queries}
    q = by_id["56ddde6b9a695914005b962c"]
    assert q.references == ("10th century", "the first half of the 10th century", "10th")
    assert q.expected_answer == "10th century"  # the first: what a judge is shown
    impossible = by_id["5ad39d53604f3c001a3fe8d1"]
    assert impossible.must_abstain and impossible.references == ()
    assert (len(ds.queries), sum(q.must_abstain for q in ds.queries)) == (17, 9)
    assert sum(len(q.references) > 1 for q in ds.queries) == 3
    # written back as a list, read back equal, same fingerprint
    write_golden(ds.documents, ds.queries, corpus=tmp_path / "c.jsonl",
                 queries_path=tmp_path / "q.jsonl")
    back = GoldenDataset(corpus=str(tmp_path / "c.jsonl"),
                         queries=str(tmp_path / "q.jsonl")).load()
    assert back.queries == ds.queries and back.fingerprint == ds.fingerprint
    assert '"expected_answers": ["10th century"' in (tmp_path / "q.jsonl").read_text()


def test_one_expected_answer_keeps_the_fingerprint_of_before() -> None:
    from bench.data.base import Dataset, Document, Query, fingerprint

    docs = (Document("d1", "x"),)
    one = (Query("q1", "?", qrels=(("d1", 1),), expected_answer="a"),)
    # the serialisation before expected_answers existed, written out by hand
    import hashlib
    h = hashlib.sha256()
    h.update(json.dumps(["d1", "", "x", [], [], ""]).encode() + b"\x00")
    h.update(b"\x01queries\x01")
    h.update(json.dumps(["q1", "?", "default", [["d1", 1]], [], False, [], None, "a"]).encode()
             + b"\x00")
    assert fingerprint(docs, one) == h.hexdigest() == Dataset("t", docs, one).fingerprint
    several = (Query("q1", "?", qrels=(("d1", 1),), expected_answer="a",
                     expected_answers=("a", "b")),)
    assert fingerprint(docs, several) != h.hexdigest()
