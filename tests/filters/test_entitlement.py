"""Entitlement: visibility rules, hard filtering, the independent check, eligible gold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.data.base import Dataset, Document, Query
from bench.errors import InputError
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


# tenant isolation: t0 shared, t1/t2 acme (t2 staff only), t3 globex
TDOCS = (
    Document("t0", "shared"),
    Document("t1", "acme", tenant="acme"),
    Document("t2", "acme staff", tenant="acme", allowed_roles=("staff",)),
    Document("t3", "globex", tenant="globex"),
)
TQUERIES = (
    Query("a", "acme caller", qrels=(("t1", 1), ("t3", 1)), tenant="acme"),
    Query("s", "acme staff", qrels=(("t2", 1),), tenant="acme", allowed_roles=("staff",)),
    Query("g", "globex caller", qrels=(("t1", 1),), tenant="globex"),
)
TDS = Dataset("tenants", TDOCS, TQUERIES)
TKEY = order_key(TDS.doc_ids)


@pytest.mark.parametrize(("doc", "roles", "tenant", "expected"), [
    (TDOCS[0], (), "acme", True),  # no tenant: shared by every tenant
    (TDOCS[1], (), "acme", True),
    (TDOCS[1], (), "globex", False),  # another tenant's document
    (TDOCS[2], ("staff",), "acme", True),
    (TDOCS[2], (), "globex", False),  # roles cannot open another tenant
    (TDOCS[2], ("guest",), "acme", False),  # own tenant, roles still apply
])
def test_visible_tenant_rule(doc: Document, roles: tuple[str, ...], tenant: str,
                             expected: bool) -> None:
    assert visible(doc, roles, caller_tenant=tenant) is expected


def test_tenant_isolation_filters_counts_and_makes_gold_ineligible() -> None:
    everything = pool([[0, 1, 2, 3]] * 3)
    # unfiltered: a sees t3 (globex); s sees t3; g sees t1 and t2 (acme)
    assert count_unauthorized(everything, TDS) == 1 + 1 + 2
    out = EntitlementFilter().apply(everything, TDS, id_key=TKEY)
    # a has no roles (unrestricted by roles) but a tenant: it keeps acme's staff doc t2
    assert [out.hits.for_query(q)[0].tolist() for q in range(3)] == [
        [0, 1, 2], [0, 1, 2], [0, 3]]
    assert out.removed_unauthorized == 1 + 1 + 2 and out.unauthorized_hits == 0
    # another tenant's gold is not the caller's gold: a keeps t1 only, g has none
    assert eligible_gold(TDS) == {"a": {"t1": 1}, "s": {"t2": 1}, "g": {}}
    assert (out.eligible_gold_queries, out.eligible_gold_docs) == (2, 2)


def test_a_query_without_tenant_is_refused_when_documents_have_tenants() -> None:
    ds = Dataset("t", TDOCS, (*TQUERIES, Query("q", "x"), Query("r", "y")))
    with pytest.raises(EntitlementError) as err:
        EntitlementFilter().apply(pool([[0]] * 5), ds, id_key=order_key(ds.doc_ids))
    assert err.value.one_line() == (
        "dataset 't': query 'q' (and 1 more) has no tenant, but documents have tenants "
        "('acme', 'globex'): give every query its caller's tenant (a document without a "
        "tenant is shared by all tenants)")
    ent.check_tenants(TDS)  # every query has one: accepted
    ent.check_tenants(DS)  # no document has one: nothing to check


def test_pool_must_match_the_dataset() -> None:
    with pytest.raises(ValueError, match="3 queries"):
        EntitlementFilter().apply(pool([[0]] * 3), DS, id_key=KEY)


def _tenant_files(tmp_path: Path, query_tenant: str) -> tuple[Path, Path]:
    (tmp_path / "corpus.jsonl").write_text(
        '{"doc_id": "a", "text": "alpha shared"}\n'
        '{"doc_id": "b", "text": "beta acme", "tenant": "acme"}\n'
        '{"doc_id": "c", "text": "beta globex", "tenant": "globex"}\n')
    extra = f', "tenant": "{query_tenant}"' if query_tenant else ""
    (tmp_path / "queries.jsonl").write_text(
        '{"query_id": "q1", "query": "alpha?", "relevant_document_ids": ["a"], '
        '"tenant": "acme"}\n'
        f'{{"query_id": "q2", "query": "beta?", "relevant_document_ids": ["b"]{extra}}}\n')
    return tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"


def test_query_without_tenant_is_refused_at_load_before_any_work(tmp_path: Path,
                                                                  compose_cfg) -> None:
    # issue 18: the refusal came from the filter stage, after chunking, embedding, retrieval
    corpus, queries = _tenant_files(tmp_path, "")
    cache = tmp_path / "cache"
    cfg = compose_cfg(["dataset=golden", f"dataset.corpus={corpus}",
                       f"dataset.queries={queries}", "filters=entitlement",
                       f"cache_dir={cache}", "embedder=static_l3"])
    with pytest.raises(InputError) as err:
        run(cfg, tmp_path / "run")
    assert err.value.one_line() == (
        f"{queries}:2: query 'q2' has no tenant, but corpus documents have tenants: give "
        "every query its caller's tenant")
    artifacts = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    assert not [p for p in artifacts if "embed" in str(p) or "chunk" in str(p)], artifacts


@pytest.mark.parametrize(("filters", "unauthorized"), [("entitlement", 0), ("none", 1 + 1)])
def test_tenant_data_runs_isolated_end_to_end(tmp_path: Path, compose_cfg, filters: str,
                                              unauthorized: int) -> None:
    # 3 docs retrieved per query: without the filter each acme caller sees globex's c
    corpus, queries = _tenant_files(tmp_path, "acme")
    cfg = compose_cfg(["dataset=golden", f"dataset.corpus={corpus}",
                       f"dataset.queries={queries}", f"filters={filters}",
                       f"cache_dir={tmp_path / 'cache'}", "embedder=static_l3"])
    result = run(cfg, tmp_path / "run")
    assert result.exit_code == 0
    rows = pq.read_table(result.run_dir / "configs.parquet").to_pylist()
    assert [r["unauthorized_hits"] for r in rows] == [unauthorized]
    per_query = pq.read_table(result.run_dir / "filters.parquet").to_pylist()
    if filters == "none":
        assert per_query == []
    else:
        assert [(r["query_id"], r["predicate"], r["n_eligible_gold"], r["n_unauthorized"])
                for r in per_query] == [("q1", [], 1, 0), ("q2", [], 1, 0)]
