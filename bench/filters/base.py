"""Records and Protocol of the `filters` stage.

A filter takes the candidate pool (``Hits``, one slice per query in ``dataset.queries``
order) and returns a ``FilterOutcome``: the filtered (hard) or re-scored and re-ordered (soft)
pool plus the counts docs/metrics.md asks for ("Fusion and filters"):

* Entitlement is a HARD filter, always: a caller never sees a document outside its roles.
  ``unauthorized_hits`` is re-counted over the output by an independent implementation and
  must be 0.
* Gold documents the caller may not see are removed from that caller's gold set BEFORE scoring
  (``eligible_gold``); they are never false exclusions. Score every filtered pool against
  ``eligible_gold(dataset)`` of the ORIGINAL dataset: recall's denominator is the eligible
  gold before filtering, never rebuilt from what survived the filter.
* A relevance (metadata) filter's false exclusions count eligible gold only; a rate over an
  empty set raises ``EmptyDenominatorError``.

Adding a filter: a class with keyword-only constructor options (validated values raise
``OptionError``), ``entitlement``, ``cache_params()`` and ``apply()``, in a module of this
package; compute ``unauthorized_hits`` with ``bench.filters.entitlement.count_unauthorized``; add
``conf/filters/<name>.yaml`` with its ``_target_``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from bench.data.base import Dataset, Document
from bench.errors import BenchError
from bench.metrics.setlevel import EmptyDenominatorError, ExclusionRates
from bench.retrieval.base import Hits

#: Default grade at which a qrels entry counts as gold (docs/metrics.md: grade >= 1 is relevant).
RELEVANT_GRADE = 1


class EntitlementError(BenchError):
    """The data asks for an entitlement rule bench cannot check (never filtered silently)."""


@dataclass(frozen=True)
class FilterOutcome:
    """What a filter did to one candidate pool (all counts over every query of the pool).

    ``excluded_per_query[i]`` counts query i's eligible gold docs the relevance filter removed
    from the pool (int32, one entry per query), so per-query rows can carry it.
    """

    hits: Hits  # filtered (hard) or re-scored and re-ordered (soft) candidates
    removed: int  # candidates removed in total (= removed_unauthorized + removed_by_predicate)
    unauthorized_hits: int  # docs in the OUTPUT the caller may not see (independent check)
    excluded_gold_queries: int  # queries whose every eligible gold doc in the input was removed
    eligible_gold_queries: int  # queries with >= 1 eligible gold doc (the rate's denominator)
    removed_unauthorized: int  # candidates removed by entitlement
    removed_by_predicate: int  # candidates removed by the relevance (metadata) filter
    excluded_gold_docs: int  # eligible gold docs the relevance filter removed from the pool
    eligible_gold_docs: int  # eligible gold docs over all queries (the doc rate's denominator)
    filtered_queries: int  # queries the relevance filter acted on (the rest pass unfiltered)
    boosted: int  # candidates given the soft boost (0 for hard filters)
    excluded_per_query: np.ndarray  # int32 [n_queries]

    def exclusion_rates(self) -> ExclusionRates:
        """False-exclusion rates over queries and over docs (docs/metrics.md).

        query rate = excluded_gold_queries / eligible_gold_queries; doc rate = excluded gold
        docs / eligible gold docs. Raises ``EmptyDenominatorError`` when no query has eligible
        gold: a 0 % rate there would be a claim without evidence.
        """
        if self.eligible_gold_queries == 0:
            raise EmptyDenominatorError(
                "filter false-exclusion rate: no query has an eligible gold doc (rate undefined)"
            )
        return ExclusionRates(
            query_rate=self.excluded_gold_queries / self.eligible_gold_queries,
            doc_rate=self.excluded_gold_docs / self.eligible_gold_docs,
            n_queries=self.eligible_gold_queries,
            n_docs=self.eligible_gold_docs,
        )


class ResultFilter(Protocol):
    """Filters (or re-scores) a candidate pool; see the module docstring for the rules."""

    #: True when ``apply`` removes what the caller may not see (then the run refuses data it
    #: cannot entitle, e.g. document tenants, before any work: ``entitlement.check_tenants``)
    entitlement: bool

    def cache_params(self) -> dict[str, object]:
        """Options that change the output (go into the filtered pool's cache key)."""
        ...

    def apply(
        self,
        hits: Hits,
        dataset: Dataset,
        *,
        id_key: np.ndarray,
        relevance_level: int = RELEVANT_GRADE,
    ) -> FilterOutcome:
        """Filter ``hits`` (query i = ``dataset.queries[i]``; ``id_key = order_key(doc_ids)``
        for the trec_eval tie rule). Gold is qrels with grade >= ``relevance_level`` after
        entitlement removal. The input is not modified."""
        ...


def visible(doc: Document, caller_roles: tuple[str, ...]) -> bool:
    """Whether a caller holding ``caller_roles`` may see ``doc`` (the reference rule).

    A document without ``allowed_roles`` is public; a caller without roles is unrestricted
    (Query.allowed_roles empty); otherwise the caller needs at least one of the doc's roles.
    Roles are flat strings: no hierarchy (an "admin" caller does not see "staff" docs unless
    the doc lists "admin" too). ``Document.tenant`` is NOT checked here: a Query carries no
    caller tenant, so the entitlement filter refuses data with tenants (``EntitlementError``)
    instead of pretending to isolate them.
    """
    if not doc.allowed_roles or not caller_roles:
        return True
    return not set(doc.allowed_roles).isdisjoint(caller_roles)


def eligible_gold(dataset: Dataset) -> dict[str, dict[str, int]]:
    """Qrels per query id with the docs that query's caller may not see removed.

    ``{query_id: {doc_id: grade}}`` for every query (an entry may become empty). Grades are
    kept (grade-0 judgements too) so graded metrics still work; a qrels doc id that is not in
    the corpus is kept as is: it is not an entitlement matter, and dropping it would change
    recall. Score filtered and unfiltered pools against THIS mapping so the denominator is the
    same original eligible gold before and after any relevance filter.
    """
    docs = dataset.doc_index()
    out: dict[str, dict[str, int]] = {}
    for q in dataset.queries:
        kept: dict[str, int] = {}
        for doc_id, grade in q.qrels:
            i = docs.get(doc_id)
            if i is None or visible(dataset.documents[i], q.allowed_roles):
                kept[doc_id] = grade
        out[q.query_id] = kept
    return out


def eligible_gold_idx(dataset: Dataset, relevance_level: int) -> list[np.ndarray]:
    """Per query (dataset order): sorted doc_idx of eligible gold with grade >= level.

    Gold ids missing from the corpus are left out: no candidate can match them, so they can
    never be removed by a filter (they still count in recall via ``eligible_gold``).
    """
    docs = dataset.doc_index()
    gold = eligible_gold(dataset)
    out: list[np.ndarray] = []
    for q in dataset.queries:
        idx = sorted(docs[d] for d, g in gold[q.query_id].items()
                     if g >= relevance_level and d in docs)
        out.append(np.asarray(idx, dtype=np.int32))
    return out


def check_pool(hits: Hits, dataset: Dataset) -> None:
    """Raise ValueError when ``hits`` does not have one slice per dataset query."""
    if hits.n_queries != len(dataset.queries):
        raise ValueError(
            f"hits have {hits.n_queries} queries, dataset {dataset.name!r} has "
            f"{len(dataset.queries)}: a pool must be filtered against the dataset it came from"
        )


def keep_where(hits: Hits, keep: np.ndarray) -> Hits:
    """The candidates where ``keep`` (bool, one per candidate) is True, order kept per query.

    A subset of a trec-ordered slice is still trec-ordered, so a hard filter needs no re-sort.
    """
    qidx = query_of_candidate(hits)
    offsets = np.zeros(hits.n_queries + 1, dtype=np.int64)
    np.cumsum(np.bincount(qidx[keep], minlength=hits.n_queries), out=offsets[1:])
    return hits.take(offsets, np.flatnonzero(keep))


def query_of_candidate(hits: Hits) -> np.ndarray:
    """int64 query index of every candidate (CSR rows expanded)."""
    return np.repeat(np.arange(hits.n_queries, dtype=np.int64), np.diff(hits.offsets))
