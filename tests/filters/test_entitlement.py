"""Entitlement: visibility rules, hard filtering, the independent check, eligible gold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.data.base import Dataset, Document, Query
from bench.filters import entitlement as ent
from bench.filters.base import EntitlementError, eligible_gold, visible
from bench.filters.entitlement import EntitlementFilter, count_unauthorized
from bench.pipeline.run import run
from bench.retrieval.base import Hits, order_key, trec_order

# d0 public, d1 staff, d2 admin, d3 staff or admin
DOCS = (
    Document("d0", "public text"),
    Document("d1", "staff text", allowed_roles=("staff",)),
    Document("d2", "admin text", allowed_roles=("admin",)),
    Document("d3", "shared text", allowed_roles=("staff", "admin")),
)
QUERIES = (
    Query("q0", "anyone", qrels=(("d2", 1),)),  # unrestricted caller
    Query("q1", "staff", qrels=(("d0", 1), ("d1", 1), ("d2", 2)), allowed_roles=("staff",)),
    Query("q2", "admin", qrels=(("d3", 1), ("gone", 1)), allowed_roles=("admin",)),
    Query("q3", "guest", qrels=(("d1", 1),), allowed_roles=("guest",)),
)
DS = Dataset("tiny", DOCS, QUERIES)
KEY = order_key(DS.doc_ids)


def pool(per_query: list[list[int]]) -> Hits:
    """Hits in trec order; doc i scores 1 - i/10 so the order is d0, d1, d2, d3."""
    docs, scores, offsets = [], [], [0]
    for idx in per_query:
        d = np.asarray(idx, dtype=np.int32)
        s = (1.0 - d / 10.0).astype(np.float32)
        p = trec_order(d, s, KEY)
        docs.append(d[p])
        scores.append(s[p])
        offsets.append(offsets[-1] + len(d))
    return Hits(np.asarray(offsets, np.int64), np.concatenate(docs), np.concatenate(scores))


ALL = pool([[0, 1, 2, 3]] * 4)


@pytest.mark.parametrize(("doc", "caller", "expected"), [
    (DOCS[0], ("guest",), True),  # public doc
    (DOCS[2], (), True),  # unrestricted caller
    (DOCS[1], ("staff",), True),
    (DOCS[1], ("admin",), False),  # flat roles: admin does not inherit staff
    (DOCS[3], ("admin", "x"), True),  # one shared role is enough
    (DOCS[2], ("guest",), False),
])
def test_visible_rules(doc: Document, caller: tuple[str, ...], expected: bool) -> None:
    assert visible(doc, caller) is expected


def test_entitlement_drops_invisible_docs_and_keeps_order() -> None:
    out = EntitlementFilter().apply(ALL, DS, id_key=KEY)
    # q0 sees all 4; q1 (staff) loses d2; q2 (admin) loses d1; q3 (guest) keeps d0 only
    assert [out.hits.for_query(q)[0].tolist() for q in range(4)] == [
        [0, 1, 2, 3], [0, 1, 3], [0, 2, 3], [0]]
    assert out.removed == out.removed_unauthorized == 0 + 1 + 1 + 3
    assert out.unauthorized_hits == 0
    assert out.removed_by_predicate == out.excluded_gold_queries == out.excluded_gold_docs == 0
    # eligible gold: q0 {d2}, q1 {d0, d1} (d2 invisible), q2 {d3} ("gone" is not in the
    # corpus), q3 {} (d1 invisible to a guest)
    assert out.eligible_gold_queries == 3
    assert out.eligible_gold_docs == 1 + 2 + 1
    assert out.exclusion_rates().query_rate == 0.0


def test_independent_check_counts_planted_violations() -> None:
    # the unfiltered pool holds exactly the 5 docs entitlement removes
    assert count_unauthorized(ALL, DS) == 0 + 1 + 1 + 3
    planted = pool([[0], [2], [0], [3, 1]])  # q1 sees admin d2; q3 sees d3 and d1
    assert count_unauthorized(planted, DS) == 1 + 2


def test_independent_check_catches_a_broken_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    def let_everything_through(dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
        n_q, n_d = len(dataset.queries), len(dataset.documents)
        return np.ones((1, n_d), dtype=bool), np.zeros(n_q, dtype=np.int64)

    monkeypatch.setattr(ent, "visibility_masks", let_everything_through)
    out = EntitlementFilter().apply(ALL, DS, id_key=KEY)
    assert out.removed == 0
    assert out.unauthorized_hits == 5  # the checker does not share the broken mask


def test_eligible_gold_removes_gold_the_caller_cannot_see() -> None:
    assert eligible_gold(DS) == {
        "q0": {"d2": 1},
        "q1": {"d0": 1, "d1": 1},
        "q2": {"d3": 1, "gone": 1},  # not in the corpus: kept, it is no entitlement matter
        "q3": {},
    }


def test_tenants_are_refused_not_ignored() -> None:
    ds = Dataset("t", (Document("a", "x", tenant="acme"),), (Query("q", "x"),))
    with pytest.raises(EntitlementError, match="tenant"):
        EntitlementFilter().apply(pool([[0]]), ds, id_key=order_key(ds.doc_ids))


def test_pool_must_match_the_dataset() -> None:
    with pytest.raises(ValueError, match="3 queries"):
        EntitlementFilter().apply(pool([[0]] * 3), DS, id_key=KEY)


def test_tenant_data_is_refused_at_load_before_any_work(tmp_path: Path, compose_cfg) -> None:
    # issue 18: the refusal came from the filter stage, after chunking, embedding, retrieval
    (tmp_path / "corpus.jsonl").write_text(
        '{"doc_id": "a", "text": "alpha"}\n'
        '{"doc_id": "b", "text": "beta", "tenant": "acme"}\n'
        '{"doc_id": "c", "text": "gamma", "tenant": "globex"}\n')
    (tmp_path / "queries.jsonl").write_text(
        '{"query_id": "q1", "query": "alpha?", "relevant_document_ids": ["a"]}\n')
    cache = tmp_path / "cache"
    cfg = compose_cfg(["dataset=golden", f"dataset.corpus={tmp_path / 'corpus.jsonl'}",
                       f"dataset.queries={tmp_path / 'queries.jsonl'}", "filters=entitlement",
                       f"cache_dir={cache}", "embedder=static_l3"])
    with pytest.raises(EntitlementError) as err:
        run(cfg, tmp_path / "run")
    assert err.value.one_line() == (
        "dataset 'golden:queries': document 'b' (and 1 more) has a tenant ('acme', 'globex'), "
        "but queries carry no caller tenant, so the entitlement filter cannot check tenant "
        "isolation; drop the documents' tenant field, model tenants as allowed_roles, or "
        "run with filters=none")
    artifacts = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    assert not [p for p in artifacts if "embed" in str(p) or "chunk" in str(p)], artifacts

