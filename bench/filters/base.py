"""Records and Protocol of the `filters` stage.

A filter takes the candidate pool (``Hits``, one slice per query in ``dataset.queries``
order) and returns a ``FilterOutcome``: the filtered (hard) or re-scored and re-ordered (soft)
pool plus the counts docs/metrics.md asks for ("Fusion and filters"):

* Entitlement is a HARD filter, always: a caller never sees a document outside its roles or
  of another tenant (``visible``).
  ``unauthorized_hits`` is re-counted over the output by an independent implementation and
  must be 0.
* Gold documents the caller may not see are removed from that caller's gold set BEFORE scoring
  (``eligible_gold``); they are never false exclusions. Score every filtered pool against
  ``eligible_gold(dataset)`` of the ORIGINAL dataset: recall's denominator is the eligible
  gold before filtering, never rebuilt from what survived the filter.
* A relevance (metadata) filter's false exclusions count eligible gold only, over the eligible
  corpus (the seed's definition, ``FilterOutcome.exclusion_rates``) and over the pool
  (``pool_exclusion_rates``); a rate over an empty set raises ``EmptyDenominatorError``.

Adding a filter: a class with keyword-only constructor options (validated values raise
``OptionError``), ``entitlement``, ``cache_params()``, ``check()`` and ``apply()``, in a module
of this package; compute ``unauthorized_hits`` with
``bench.filters.entitlement.count_unauthorized`` and the corpus exclusions with
``corpus_exclusions``; add ``conf/filters/<name>.yaml`` with its ``_target_``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from bench.data.base import Dataset, Document
from bench.errors import BenchError
from bench.metrics.setlevel import EmptyDenominatorError, ExclusionRates
from bench.retrieval.base import Hits

#: Default grade at which a qrels entry counts as gold (docs/metrics.md: grade >= 1 is relevant).
RELEVANT_GRADE = 1


class EntitlementError(BenchError):
    """The data asks for an entitlement rule bench cannot check (never filtered silently):
    documents with a tenant and a query without one."""


@dataclass(frozen=True)
class FilterOutcome:
    """What a filter did to one candidate pool (all counts over every query of the pool).

    Two false-exclusion figures (docs/metrics.md "False exclusion"):

    * the seed's, over the eligible CORPUS, before the retriever runs: a query's eligible gold
      doc is excluded when the predicate rules it out (it lacks every predicate tag), whether
      or not the retriever would have found it. ``excluded_per_query`` / ``gold_per_query``
      hold it per query; ``exclusion_rates()`` is ``false_exclusion_rate``.
    * the POOL-relative one: eligible gold docs that reached this pool and were removed from
      it (``pool_*``; gold the retriever never found can never count here, so the doc rate is
      at most the corpus one; a query counts when all of its gold IN THE POOL went, which
      may be less than all of it, so the query rate can fall on either side).
      ``pool_exclusion_rates()`` is ``pool_false_exclusion_rate``.

    A soft boost removes nothing: both figures are 0 for it. ``predicates[i]``: the tags the
    relevance filter applied to query i, sorted (empty: the query passed unfiltered).
    """

    hits: Hits  # filtered (hard) or re-scored and re-ordered (soft) candidates
    removed: int  # candidates removed in total (= removed_unauthorized + removed_by_predicate)
    unauthorized_hits: int  # docs in the OUTPUT the caller may not see (independent check)
    pool_excluded_gold_queries: int  # queries whose every eligible gold doc in the POOL went
    removed_unauthorized: int  # candidates removed by entitlement
    removed_by_predicate: int  # candidates removed by the relevance (metadata) filter
    pool_excluded_gold_docs: int  # eligible gold docs the relevance filter removed from the pool
    filtered_queries: int  # queries the relevance filter acted on (the rest pass unfiltered)
    boosted: int  # candidates given the soft boost (0 for hard filters)
    pool_excluded_per_query: np.ndarray  # int32 [n_queries]: eligible gold removed from pool
    gold_per_query: np.ndarray  # int32 [n_queries]: eligible gold docs in the corpus
    excluded_per_query: np.ndarray  # int32 [n_queries]: of those, ruled out by the predicate
    predicates: tuple[tuple[str, ...], ...]  # per query, the tags applied (sorted)
    unauthorized_per_query: np.ndarray  # int64 [n_queries]: sums to ``unauthorized_hits``

    @property
    def eligible_gold_queries(self) -> int:
        """Queries with >= 1 eligible gold doc (both rates' query denominator)."""
        return int((self.gold_per_query > 0).sum())

    @property
    def eligible_gold_docs(self) -> int:
        """Eligible gold docs over all queries (both rates' doc denominator)."""
        return int(self.gold_per_query.sum())

    @property
    def excluded_gold_queries(self) -> int:
        """Queries whose every eligible gold doc the predicate rules out of the corpus."""
        g = self.gold_per_query
        return int(((g > 0) & (self.excluded_per_query == g)).sum())

    @property
    def excluded_gold_docs(self) -> int:
        return int(self.excluded_per_query.sum())

    def exclusion_rates(self) -> ExclusionRates:
        """The seed's false-exclusion rates over the eligible corpus (docs/metrics.md).

        query rate = queries whose every eligible gold doc the predicate rules out / queries
        with >= 1 eligible gold doc; doc rate = ruled-out eligible gold docs / eligible gold
        docs. Raises ``EmptyDenominatorError`` when no query has eligible gold: a 0 % rate
        there would be a claim without evidence.
        """
        return self._rates(self.excluded_gold_queries, self.excluded_gold_docs)

    def pool_exclusion_rates(self) -> ExclusionRates:
        """Pool-relative rates: eligible gold that reached the pool and was removed, over the
        same denominators as ``exclusion_rates`` (the doc rate is never larger)."""
        return self._rates(self.pool_excluded_gold_queries, self.pool_excluded_gold_docs)

    def _rates(self, queries: int, docs: int) -> ExclusionRates:
        n_q, n_d = self.eligible_gold_queries, self.eligible_gold_docs
        if n_q == 0:
            raise EmptyDenominatorError(
                "filter false-exclusion rate: no query has an eligible gold doc (rate undefined)"
            )
        return ExclusionRates(query_rate=queries / n_q, doc_rate=docs / n_d, n_queries=n_q,
                              n_docs=n_d)


class ResultFilter(Protocol):
    """Filters (or re-scores) a candidate pool; see the module docstring for the rules."""

    #: True when ``apply`` removes what the caller may not see (roles and tenants)
    entitlement: bool

    def cache_params(self) -> dict[str, object]:
        """Options that change the output (go into the filtered pool's cache key)."""
        ...

    def check(self, dataset: Dataset) -> None:
        """Raise (a ``BenchError``) when ``dataset`` holds what this filter cannot handle;
        the run calls it right after loading the data, before any stage computes."""
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


@runtime_checkable
class PushableFilter(ResultFilter, Protocol):
    """A hard filter whose rule the pipeline can push down into a database index
    (``filters.pushdown=true``, ``bench.filters.pushdown``): it says, per query, which
    documents pass, so the engine searches only those (its own ``WHERE``)."""

    #: push this filter down into a database index (default off: filter the pool in Python)
    pushdown: bool

    def eligible(self, dataset: Dataset, *, relevance_level: int = RELEVANT_GRADE
                 ) -> np.ndarray:
        """bool [n_queries, n_documents]: the documents ``apply`` keeps for each query, for
        any pool (a pool holding every document, filtered, keeps exactly these)."""
        ...


def visible(doc: Document, caller_roles: tuple[str, ...], *, caller_tenant: str = "") -> bool:
    """Whether a caller holding ``caller_roles`` in ``caller_tenant`` may see ``doc`` (the
    reference rule).

    Tenant first: a document with a ``tenant`` is visible only to callers of that tenant (a
    document without one is shared by every tenant). Then roles: a document without
    ``allowed_roles`` is public; a caller without roles is unrestricted (Query.allowed_roles
    empty); otherwise the caller needs at least one of the doc's roles. Roles are flat
    strings: no hierarchy (an "admin" caller does not see "staff" docs unless the doc lists
    "admin" too). A caller without a tenant is refused at load when documents have tenants
    (``entitlement.check_tenants``), so "" never silently means "every tenant".
    """
    if doc.tenant and doc.tenant != caller_tenant:
        return False
    if not doc.allowed_roles or not caller_roles:
        return True
    return not set(doc.allowed_roles).isdisjoint(caller_roles)


def eligible_gold(dataset: Dataset) -> dict[str, dict[str, int]]:
    """Qrels per query id with the docs that query's caller may not see (another tenant's,
    or outside its roles) removed.

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
            if i is None or visible(dataset.documents[i], q.allowed_roles,
                                    caller_tenant=q.tenant):
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


def corpus_exclusions(dataset: Dataset, gold: Sequence[np.ndarray],
                      predicates: Sequence[frozenset[str]]) -> np.ndarray:
    """int32 per query: eligible gold docs (``gold[i]``, doc_idx) the predicate rules out of
    the corpus, before any retrieval (a doc lacking every tag of a non-empty predicate).

    What a pre-filter in the index would remove; the seed's false exclusion.
    """
    docs = dataset.documents
    return np.asarray([0 if not p else sum(1 for i in g.tolist() if p.isdisjoint(docs[i].tags))
                       for g, p in zip(gold, predicates, strict=True)], dtype=np.int32)
