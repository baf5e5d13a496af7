"""Entitlement: drop every candidate the query's caller may not see (always a hard filter).

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
    """Raise ``EntitlementError`` when a document has a tenant: queries carry no caller tenant,
    so the entitlement rule (roles only) cannot isolate tenants, and passing such documents
    through unchecked would be a silent leak.

    The run calls this right after loading the dataset when a filter is configured, so the
    refusal comes before chunking, embedding and retrieval; ``visibility_masks`` calls it too.
    """
    with_tenant = [d for d in dataset.documents if d.tenant]
    if not with_tenant:
        return
    tenants = sorted({d.tenant for d in with_tenant})
    more = f" (and {len(with_tenant) - 1} more)" if len(with_tenant) > 1 else ""
    shown = ", ".join(repr(t) for t in tenants[:3]) + (", ..." if len(tenants) > 3 else "")
    raise EntitlementError(
        f"dataset {dataset.name!r}: document {with_tenant[0].doc_id!r}{more} has a tenant "
        f"({shown}), but queries carry no caller tenant, so the entitlement filter cannot check "
        "tenant isolation; drop the documents' tenant field, model tenants as allowed_roles, "
        "or run with filters=none")


def visibility_masks(dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Corpus-wide visibility per distinct caller.

    Returns ``(masks, caller)``: ``masks`` bool [n_callers, n_docs] (row c: docs caller c may
    see), ``caller`` int64 [n_queries] (query i's row). Raises ``EntitlementError`` when a
    document has a tenant: queries carry no caller tenant, so isolation could not be checked.
    """
    check_tenants(dataset)
    roles = sorted({r for d in dataset.documents for r in d.allowed_roles})
    col = {r: j for j, r in enumerate(roles)}
    doc_roles = np.zeros((len(dataset.documents), len(roles)), dtype=bool)
    for i, d in enumerate(dataset.documents):
        doc_roles[i, [col[r] for r in d.allowed_roles]] = True
    public = ~doc_roles.any(axis=1)
    # Few distinct callers (FOLDOC: 3), so one corpus mask each is cheap and reused.
    rows: dict[frozenset[str], int] = {}
    masks: list[np.ndarray] = []
    caller = np.empty(len(dataset.queries), dtype=np.int64)
    for qi, q in enumerate(dataset.queries):
        key = frozenset(q.allowed_roles)
        if key not in rows:
            rows[key] = len(masks)
            if not key:  # an unrestricted caller
                masks.append(np.ones(len(dataset.documents), dtype=bool))
            else:  # roles no document lists open nothing
                cols = [col[r] for r in sorted(key) if r in col]
                masks.append(np.asarray(public | doc_roles[:, cols].any(axis=1)))
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
    """Independent check: candidates in ``hits`` their query's caller may not see.

    Deliberately a plain loop over ``visible`` (not the mask ``entitle`` filters with), so the
    two implementations check each other.
    """
    check_pool(hits, dataset)
    docs = dataset.documents
    bad = 0
    for qi, q in enumerate(dataset.queries):
        for d in hits.doc_idx[hits.offsets[qi]:hits.offsets[qi + 1]].tolist():
            bad += not visible(docs[d], q.allowed_roles)
    return bad


def no_exclusion_outcome(hits: Hits, dataset: Dataset, removed: int,
                         relevance_level: int) -> FilterOutcome:
    """Outcome of an entitlement-only pass: no relevance filter, so no false exclusion."""
    gold = eligible_gold_idx(dataset, relevance_level)
    return FilterOutcome(
        hits=hits,
        removed=removed,
        unauthorized_hits=count_unauthorized(hits, dataset),
        excluded_gold_queries=0,
        eligible_gold_queries=sum(1 for g in gold if g.size),
        removed_unauthorized=removed,
        removed_by_predicate=0,
        excluded_gold_docs=0,
        eligible_gold_docs=sum(int(g.size) for g in gold),
        filtered_queries=0,
        boosted=0,
        excluded_per_query=np.zeros(hits.n_queries, dtype=np.int32),
    )


class EntitlementFilter:
    """Hard entitlement filter by role (``visible``); no options.

    Tenants are not modelled (a Query has no caller tenant): data with document tenants is
    refused with ``EntitlementError`` rather than passed unchecked.
    """

    entitlement = True

    def cache_params(self) -> dict[str, object]:
        return {"entitlement": "roles/v1"}

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
