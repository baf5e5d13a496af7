"""CSV loader: happy path (list cells, booleans, multi-line cells) and file:line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.data.csv_source import CsvDataset
from bench.errors import InputError

CORPUS = ('doc_id,text,title,tags,allowed_roles,tenant\n'
          'd1,"Alpha text,\nspanning two lines.",Alpha,x;y,staff,\n'
          'd2,Beta text.,,,,\n')
#: with a tenant on d1, every query needs its caller's tenant
TENANTED = CORPUS.replace("x;y,staff,\n", "x;y,staff,acme\n")
QUERIES = ("query_id,query,category,must_abstain,required_claims,allowed_roles,as_of,"
           "expected_answer\n"
           "q1,What is alpha?,exact_lookup,false,Alpha is a letter.;It comes first.,,2024-01-31,"
           "A letter.\n"
           "q2,What is gamma?,unanswerable,TRUE,,admin,,\n"
           "\n"
           "q3,Alpha and beta?,,no,,,,\n")
QRELS = "query_id,doc_id,grade\nq1,d1,2\nq3,d1,\nq3,d2,1\n"


def _files(tmp_path: Path, corpus: str = CORPUS, queries: str = QUERIES,
           qrels: str | None = QRELS) -> CsvDataset:
    (tmp_path / "corpus.csv").write_text(corpus, encoding="utf-8")
    (tmp_path / "queries.csv").write_text(queries, encoding="utf-8")
    qrels_path = None
    if qrels is not None:
        (tmp_path / "qrels.csv").write_text(qrels, encoding="utf-8")
        qrels_path = str(tmp_path / "qrels.csv")
    return CsvDataset(corpus=str(tmp_path / "corpus.csv"), queries=str(tmp_path / "queries.csv"),
                      qrels=qrels_path)


def test_happy_path(tmp_path: Path) -> None:
    lines = QUERIES.split("\n")
    queries = "\n".join([lines[0] + ",tenant", *(ln + ",acme" if ln else ln for ln in lines[1:])])
    ds = _files(tmp_path, corpus=TENANTED, queries=queries).load()
    d1, d2 = ds.documents
    assert d1.text == "Alpha text,\nspanning two lines."
    assert (d1.title, d1.tags, d1.allowed_roles, d1.tenant) == ("Alpha", ("x", "y"), ("staff",),
                                                                 "acme")
    assert (d2.title, d2.tags, d2.allowed_roles) == ("", (), ())
    q1, q2, q3 = ds.queries
    assert q1.qrels == (("d1", 2),) and q1.required_claims == ("Alpha is a letter.",
                                                               "It comes first.")
    assert q1.as_of == "2024-01-31" and q1.expected_answer == "A letter."
    assert q2.must_abstain and q2.allowed_roles == ("admin",) and q2.qrels == ()
    assert q3.category == "default" and not q3.must_abstain
    assert q3.qrels == (("d1", 1), ("d2", 1))  # an empty grade cell means 1
    assert {q.tenant for q in ds.queries} == {"acme"}


def test_a_query_without_tenant_over_a_tenanted_corpus_names_its_line(tmp_path: Path) -> None:
    queries = "query_id,query,tenant\nq1,What?,acme\nq3,Q?,\n"
    with pytest.raises(InputError) as err:
        _files(tmp_path, corpus=TENANTED, queries=queries, qrels=None).load()
    assert err.value.line == 3
    assert "query 'q3' has no tenant, but corpus documents have tenants" in err.value.message


def test_without_qrels_file(tmp_path: Path) -> None:
    ds = _files(tmp_path, qrels=None).load()
    assert all(q.qrels == () for q in ds.queries)


def test_minimal_columns_and_bom(tmp_path: Path) -> None:
    ds = _files(tmp_path, corpus="\ufeffdoc_id,text\nd1,t\n", queries="query_id,query\nq1,Q?\n",
                qrels="query_id,doc_id\nq1,d1\n").load()
    assert ds.queries[0].qrels == (("d1", 1),)


CORPUS_ERRORS = [
    ("doc_id,title\nd1,t\n", 1, "missing required column 'text' in header"),
    ("doc_id,text,colour\nd1,t,red\n", 1,
     "unknown column(s) 'colour'; allowed columns: doc_id, text, title"),
    ("doc_id,text,text\nd1,t,u\n", 1, "duplicate column(s) 'text'"),
    ("doc_id,text\nd1,t\nd2\n", 3, "expected 2 columns (as in the header), got 1"),
    ("doc_id,text\nd1,t\nd1,u\n", 3, "duplicate doc_id 'd1' (first seen on line 2)"),
    ("doc_id,text\n,t\n", 2, "column 'doc_id' is empty"),
    # the row after a two-line quoted cell starts on physical line 4
    ('doc_id,text\nd1,"two\nlines"\nd2,\n', 4, "column 'text' is empty"),
    ("", 1, "empty file"),
]


@pytest.mark.parametrize(("corpus", "line", "fragment"), CORPUS_ERRORS)
def test_corpus_errors(tmp_path: Path, corpus: str, line: int, fragment: str) -> None:
    with pytest.raises(InputError) as exc:
        _files(tmp_path, corpus=corpus).load()
    assert str(exc.value).startswith(f"{tmp_path / 'corpus.csv'}:{line}: ")
    assert fragment in str(exc.value)


QUERY_ERRORS = [
    ("query_id,query,must_abstain\nq1,Q?,maybe\n", 2, "column 'must_abstain' must be true or"),
    ("query_id,query,as_of\nq1,Q?,yesterday\n", 2, "'as_of' must be an ISO-8601 date"),
    ("query_id,query\nq1,Q?\nq1,Q2?\n", 3, "duplicate query_id 'q1' (first seen on line 2)"),
    ("query_id,query\nq1,\n", 2, "column 'query' is empty"),
    ("query_id,query,relevant\nq1,Q?,d1\n", 1, "unknown column(s) 'relevant'"),
    # answerable (must_abstain false) but no qrels row names it
    ("query_id,query\nq1,What?\nq3,Q?\nq9,Unjudged?\n", 4, "query 'q9' has no qrels"),
]


@pytest.mark.parametrize(("queries", "line", "fragment"), QUERY_ERRORS)
def test_query_errors(tmp_path: Path, queries: str, line: int, fragment: str) -> None:
    with pytest.raises(InputError) as exc:
        _files(tmp_path, queries=queries, qrels="query_id,doc_id\nq1,d1\nq3,d2\n").load()
    assert str(exc.value).startswith(f"{tmp_path / 'queries.csv'}:{line}: ")
    assert fragment in str(exc.value)


QRELS_ERRORS = [
    ("query_id,doc_id,grade\nq1,d9,1\n", 2, "doc_id 'd9' is not in the corpus file"),
    ("query_id,doc_id,grade\nq1,d1,1\nq7,d1,1\n", 3, "query_id 'q7' is not in the queries"),
    ("query_id,doc_id,grade\nq1,d1,1\nq2,d1,1\n", 3, "query 'q2' has must_abstain=true"),
    ("query_id,doc_id,grade\nq1,d1,1\nq3,d1,1\nq3,d1,2\n", 4,
     "duplicate qrel ('q3', 'd1') (first on line 3)"),
    ("query_id,doc_id,grade\nq1,d1,two\n", 2, "column 'grade' must be an integer >= 0"),
    ("query_id,grade\nq1,1\n", 1, "missing required column 'doc_id'"),
]


@pytest.mark.parametrize(("qrels", "line", "fragment"), QRELS_ERRORS)
def test_qrels_errors(tmp_path: Path, qrels: str, line: int, fragment: str) -> None:
    with pytest.raises(InputError) as exc:
        _files(tmp_path, qrels=qrels).load()
    assert str(exc.value).startswith(f"{tmp_path / 'qrels.csv'}:{line}: ")
    assert fragment in str(exc.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        CsvDataset(corpus=str(tmp_path / "nope.csv"), queries="x.csv").load()
