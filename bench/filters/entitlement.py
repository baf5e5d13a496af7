"""Entitlement: drop every candidate the query's caller may not see (always a hard filter):
another tenant's documents and documents outside the caller's roles.

Two implementations of the same rule on purpose (docs/metrics.md: entitlement "is checked
independently"): ``entitle`` filters with a vectorised role matrix, ``count_unauthorized``
re-checks the output document by document with the reference rule ``visible``. A bug in one
shows up as ``unauthorized_hits > 0`` instead of a silent leak.
"""

from __future__ import annotations

import numpy as np

from bench.data.base import Dataset
from bench.filters.base import (
    RELEVANT_GRADE,
    EntitlementError,
    FilterOutcome,
    check_pool,
    eligible_gold_idx,
    keep_where,
    query_of_candidate,
    visible,
)
from bench.retrieval.base import Hits


def check_tenants(dataset: Dataset) -> None:
    """Raise ``EntitlementError`` when documents have a tenant and a query has none.

    Tenant isolation is an eligibility rule (``visible``): a caller sees its own tenant's
    documents and the shared ones (no tenant). A query without a tenant would make "which
    documents may it see" undefined: read as "every tenant" it would hide a leak, read as
    "none" it would silently drop its gold. So it is refused. The run calls this right after
    loading the dataset (before chunking, embedding and retrieval); the golden and CSV
    loaders check it too, naming the file and line.
    """
    if not any(d.tenant for d in dataset.documents):
        return
    missing = [q for q in dataset.queries if not q.tenant]
    if not missing:
        return
    tenants = sorted({d.tenant for d in dataset.documents if d.tenant})
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    shown = ", ".join(repr(t) for t in tenants[:3]) + (", ..." if len(tenants) > 3 else "")
    raise EntitlementError(
        f"dataset {dataset.name!r}: query {missing[0].query_id!r}{more} has no tenant, but "
        f"documents have tenants ({shown}): give every query its caller's tenant (a document "
        "without a tenant is shared by all tenants)")


def visibility_masks(dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Corpus-wide visibility per distinct caller (roles, tenant).

    Returns ``(masks, caller)``: ``masks`` bool [n_callers, n_docs] (row c: docs caller c may
    see), ``caller`` int64 [n_queries] (query i's row). Raises ``EntitlementError`` when
    documents have tenants and a query has none (``check_tenants``).
    """
    check_tenants(dataset)
    roles = sorted({r for d in dataset.documents for r in d.allowed_roles})
    col = {r: j for j, r in enumerate(roles)}
    doc_roles = np.zeros((len(dataset.documents), len(roles)), dtype=bool)
    for i, d in enumerate(dataset.documents):
        doc_roles[i, [col[r] for r in d.allowed_roles]] = True
    public = ~doc_roles.any(axis=1)
    doc_tenant = np.asarray([d.tenant for d in dataset.documents], dtype=object)
    shared = doc_tenant == ""
    # Few distinct callers (FOLDOC: 3), so one corpus mask each is cheap and reused.
    rows: dict[tuple[frozenset[str], str], int] = {}
    masks: list[np.ndarray] = []
    caller = np.empty(len(dataset.queries), dtype=np.int64)
    for qi, q in enumerate(dataset.queries):
        key = (frozenset(q.allowed_roles), q.tenant)
        if key not in rows:
            rows[key] = len(masks)
            if not key[0]:  # a caller unrestricted by roles
                by_role = np.ones(len(dataset.documents), dtype=bool)
            else:  # roles no document lists open nothing
                cols = [col[r] for r in sorted(key[0]) if r in col]
                by_role = np.asarray(public | doc_roles[:, cols].any(axis=1))
            masks.append(by_role & (shared | (doc_tenant == q.tenant)))
        caller[qi] = rows[key]
    matrix = np.stack(masks) if masks else np.zeros((0, len(dataset.documents)), dtype=bool)
    return matrix, caller


def entitle(hits: Hits, dataset: Dataset) -> tuple[Hits, int]:
    """Drop candidates the caller may not see; returns (filtered hits, number removed)."""
    check_pool(hits, dataset)
    masks, caller = visibility_masks(dataset)
    keep = masks[caller[query_of_candidate(hits)], hits.doc_idx]
    return keep_where(hits, keep), int(keep.size - keep.sum())


def count_unauthorized(hits: Hits, dataset: Dataset) -> int:
    """Independent check: candidates in ``hits`` their query's caller may not see."""
    return int(unauthorized_per_query(hits, dataset).sum())


def unauthorized_per_query(hits: Hits, dataset: Dataset) -> np.ndarray:
    """int64 per query: candidates its caller may not see (another tenant's, outside its
    roles).

    Deliberately a plain loop over ``visible`` (not the mask ``entitle`` filters with), so the
    two implementations check each other.
    """
    check_pool(hits, dataset)
    docs = dataset.documents
    bad = np.zeros(len(dataset.queries), dtype=np.int64)
    for qi, q in enumerate(dataset.queries):
        for d in hits.doc_idx[hits.offsets[qi]:hits.offsets[qi + 1]].tolist():
            bad[qi] += not visible(docs[d], q.allowed_roles, caller_tenant=q.tenant)
    return bad


def no_exclusion_outcome(hits: Hits, dataset: Dataset, removed: int,
                         relevance_level: int) -> FilterOutcome:
    """Outcome of an entitlement-only pass: no relevance filter, so no false exclusion."""
    gold = eligible_gold_idx(dataset, relevance_level)
    none = np.zeros(hits.n_queries, dtype=np.int32)
    bad = unauthorized_per_query(hits, dataset)
    return FilterOutcome(
        hits=hits,
        removed=removed,
        unauthorized_hits=int(bad.sum()),
        pool_excluded_gold_queries=0,
        removed_unauthorized=removed,
        removed_by_predicate=0,
        pool_excluded_gold_docs=0,
        filtered_queries=0,
        boosted=0,
        pool_excluded_per_query=none,
        gold_per_query=np.asarray([g.size for g in gold], dtype=np.int32),
        excluded_per_query=none,
        predicates=((),) * hits.n_queries,
        unauthorized_per_query=bad,
    )


class EntitlementFilter:
    """Hard entitlement filter by tenant and role (``visible``). ``pushdown``: with a
    database index, search only what each caller may see inside the engine (its ``WHERE``,
    ``bench.filters.pushdown``) instead of filtering the retrieved pool in Python."""

    entitlement = True

    def __init__(self, *, pushdown: bool = False) -> None:
        self.pushdown = bool(pushdown)

    def eligible(self, dataset: Dataset, *, relevance_level: int = RELEVANT_GRADE
                 ) -> np.ndarray:
        """bool [n_queries, n_documents]: what each query's caller may see."""
        masks, caller = visibility_masks(dataset)
        if not len(masks):
            return np.zeros((len(dataset.queries), len(dataset.documents)), dtype=bool)
        return np.asarray(masks[caller], dtype=bool)

    def cache_params(self) -> dict[str, object]:
        # Unchanged by tenant isolation on purpose: data with tenants was refused before it,
        # so no artifact keyed "roles/v1" was computed on data the new rule reads differently.
        return {"entitlement": "roles/v1"}

    def check(self, dataset: Dataset) -> None:
        check_tenants(dataset)

    def apply(
        self,
        hits: Hits,
        dataset: Dataset,
        *,
        id_key: np.ndarray,
        relevance_level: int = RELEVANT_GRADE,
    ) -> FilterOutcome:
        """Drop invisible candidates; ``id_key`` is unused (a subset keeps its order)."""
        out, removed = entitle(hits, dataset)
        return no_exclusion_outcome(out, dataset, removed, relevance_level)
