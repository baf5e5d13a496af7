"""Synthetic benchmark: determinism, category mix, and that gold documents are findable."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from bench.data.base import CATEGORIES
from bench.data.synthetic import SyntheticDataset
from bench.errors import ConfigError


def test_deterministic() -> None:
    a, b = SyntheticDataset().load(), SyntheticDataset().load()
    assert a == b and a.fingerprint == b.fingerprint
    assert SyntheticDataset(seed=1).load().fingerprint != a.fingerprint


def test_shape_and_categories() -> None:
    ds = SyntheticDataset(n_docs=60, n_queries=26).load()
    assert len(ds.documents) == 60 and len(ds.queries) == 26
    # 26 = 4 * 6 + 2: the first two categories get one extra query
    assert Counter(q.category for q in ds.queries) == dict(zip(CATEGORIES, (7, 7, 6, 6),
                                                               strict=True))
    assert len(set(ds.doc_ids)) == 60 and len({q.query_id for q in ds.queries}) == 26


def test_qrels_are_consistent() -> None:
    ds = SyntheticDataset().load()
    ids = set(ds.doc_ids)
    for q in ds.queries:
        assert all(d in ids for d, _ in q.qrels)
        assert q.must_abstain == (q.category == "unanswerable") == (not q.qrels)
        if q.category == "multi_doc":
            assert [g for _, g in q.qrels] == [2, 1]
        if not q.must_abstain:
            assert q.required_claims


def test_caller_roles_can_see_gold_docs() -> None:
    ds = SyntheticDataset(n_docs=120, n_queries=80, seed=3).load()
    roles = {d.doc_id: d.allowed_roles for d in ds.documents}
    assert any(roles.values()), "some documents should be role-restricted"
    for q in ds.queries:
        if q.allowed_roles:  # a restricted caller sees public docs and docs of its roles
            assert all(not roles[d] or set(roles[d]) & set(q.allowed_roles) for d, _ in q.qrels)


def test_queries_point_at_their_gold_document() -> None:
    ds = SyntheticDataset().load()
    texts = {d.doc_id: d.text for d in ds.documents}
    corpus = " ".join(texts.values())
    for q in ds.queries:
        if q.category == "semantic_lookup":
            # kind + place are unique per document: exactly the gold doc matches both
            m = re.match(r"Which (.+) from (.+) has", q.text)
            assert m is not None
            matches = [i for i, t in texts.items()
                       if f"is a {m.group(1)} that lives in {m.group(2)}." in t]
            assert matches == [q.qrels[0][0]]
            assert q.expected_answer is not None and q.expected_answer not in q.text
        elif q.category == "exact_lookup":
            name = q.text.removeprefix("What is ").rstrip("?")
            assert texts[q.qrels[0][0]].startswith(f"{name} is a ")
        elif q.category == "unanswerable":
            name = q.text.removeprefix("What is ").rstrip("?")
            assert name not in corpus


@pytest.mark.parametrize(("kwargs", "key"), [({"n_docs": 2}, "dataset.n_docs"),
                                            ({"n_queries": 1}, "dataset.n_queries"),
                                            ({"n_docs": 5, "n_queries": 20}, "dataset.n_queries")])
def test_bad_sizes(kwargs: dict[str, int], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        SyntheticDataset(**kwargs)
