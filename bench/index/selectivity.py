"""Filtered ANN across selectivity: what each engine returns when only a share of the corpus
may be returned, against the exact filtered search over the same vectors.

The workload. Every document gets a bucket, uniformly at random, out of ``round(1 / s)``
buckets (``s`` = selectivity: 50 %, 10 %, 1 %, 0.1 % of the corpus eligible); its chunks
inherit it. A query is filtered to ONE bucket — a tenant-like partition — chosen as the
bucket of one of its gold documents (seeded), so every answerable query can still find at
least one gold document; a query without gold gets a random bucket. The filter is pushed into
each engine (``FilteredSearch.search_where``: SQL ``WHERE``, LanceDB ``where``, a faiss
``IDSelector``), never applied in Python to an unfiltered top-k.

Per (engine, query setting, selectivity), over the queries (``SelectivityRow``):

- ``recall``: tie-tolerant recall@k against the exact filtered top-k (brute force over the
  eligible chunks), divided by min(k, eligible chunks) — at 0.1 % a bucket of a small corpus
  holds fewer than k chunks, and returning all of them is full recall;
- ``short_share``: queries that got fewer than min(k, eligible) results (post-filtered
  HNSW at low selectivity);
- ``unauthorized``: returned chunks outside the query's bucket (must be 0);
- ``false_exclusion_rate``: the seed's rate for this filter — queries with >= 1 eligible
  gold document none of which the filtered search returns in its top-k, over the queries with
  >= 1 eligible gold document — and the same figure for the exact filtered search (the floor:
  what a perfect engine with this k still misses); ``doc_false_exclusion_rate`` per document;
- p50 / p95 / p99 of one request (one call, one query), with n.

Answer-level damage (answers generated from these filtered results, paired against answers
from the exact filtered results) is ``bench.index.filtered_answers``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.index.base import BuildInfo, FilteredSearch, SearchResult
from bench.index.faiss_index import _faiss

SELECTIVITIES = (0.5, 0.1, 0.01, 0.001)
#: relative score tolerance of a tie at the exact k-th score (docs/metrics.md ANN recall)
TIE_RTOL = 1e-6


def column_name(selectivity: float) -> str:
    """The attribute column of a selectivity (``b50``, ``b10``, ``b1``, ``b0_1``)."""
    pct = f"{selectivity * 100:g}".replace(".", "_")
    return f"b{pct}"


@dataclass(frozen=True)
class FilterWorkload:
    """One selectivity: the bucket of every chunk and the bucket each query is filtered to."""

    selectivity: float
    column: str
    n_buckets: int
    chunk_bucket: np.ndarray  # int32 [n_chunks]
    values: np.ndarray  # int64 [n_queries]

    def eligible(self, q: int) -> np.ndarray:
        """Chunk rows query ``q`` may get back."""
        return np.flatnonzero(self.chunk_bucket == self.values[q])


def workload(chunk_doc: np.ndarray, n_docs: int, gold: Sequence[np.ndarray],
             selectivity: float, *, seed: int = 0) -> FilterWorkload:
    """The buckets of ``selectivity`` (see the module docstring). ``gold[i]``: query i's
    gold doc_idx (may be empty)."""
    if not 0.0 < selectivity <= 1.0:
        raise ValueError(f"selectivity must be in (0, 1], got {selectivity}")
    n_buckets = max(1, round(1.0 / selectivity))
    rng = np.random.default_rng([seed, n_buckets])
    doc_bucket = rng.integers(0, n_buckets, size=n_docs).astype(np.int32)
    values = np.empty(len(gold), dtype=np.int64)
    for i, g in enumerate(gold):
        values[i] = doc_bucket[rng.choice(g)] if len(g) else rng.integers(0, n_buckets)
    return FilterWorkload(selectivity, column_name(selectivity), n_buckets,
                          doc_bucket[chunk_doc], values)


def exact_filtered(vectors: np.ndarray, queries: np.ndarray, wl: FilterWorkload, k: int
                   ) -> SearchResult:
    """Exact top-k of each query among its eligible chunks (faiss' brute force per bucket);
    -1 pads a bucket smaller than k."""
    faiss = _faiss()
    n_q = len(queries)
    ids = np.full((n_q, k), -1, dtype=np.int64)
    scores = np.full((n_q, k), -np.inf, dtype=np.float32)
    for b in np.unique(wl.values):
        qs = np.flatnonzero(wl.values == b)
        rows = np.flatnonzero(wl.chunk_bucket == b)
        if len(rows) == 0:
            continue
        kk = min(k, len(rows))
        s, i = faiss.knn(np.ascontiguousarray(queries[qs], dtype=np.float32),
                         np.ascontiguousarray(vectors[rows], dtype=np.float32), kk,
                         metric=faiss.METRIC_INNER_PRODUCT)
        ids[qs, :kk] = rows[i]
        scores[qs, :kk] = s
    return SearchResult(ids=ids, scores=scores)


def filtered_recall(got: SearchResult, exact: SearchResult, vectors: np.ndarray,
                    queries: np.ndarray, k: int, wl: FilterWorkload) -> np.ndarray:
    """Per query: |returned ∩ exact filtered top-k| / min(k, eligible), where a returned
    ELIGIBLE chunk whose exact score ties the exact k-th (within 1e-6 relative) also counts
    (an ineligible one never does: it is an unauthorized hit, not a tie); repeated and
    missing ids count nothing. NaN for a query with no eligible chunk."""
    out = np.full(len(queries), np.nan)
    for i in range(len(queries)):
        ref = exact.ids[i][exact.ids[i] >= 0]
        if len(ref) == 0:
            continue
        ids = np.unique(got.ids[i, :k][got.ids[i, :k] >= 0])
        ids = ids[wl.chunk_bucket[ids] == wl.values[i]]
        kth = float(exact.scores[i, len(ref) - 1])
        s = vectors[ids] @ queries[i] if len(ids) else np.zeros(0, np.float32)
        hit = np.isin(ids, ref) | (s >= kth - TIE_RTOL * abs(kth))
        out[i] = min(int(hit.sum()), len(ref)) / len(ref)
    return out


@dataclass(frozen=True)
class SelectivityRow:
    backend: str
    params: str
    selectivity: float
    n_queries: int
    eligible_chunks_median: float
    recall: float
    short_share: float
    returned_mean: float
    unauthorized: int
    false_exclusion_rate: float | None
    exact_false_exclusion_rate: float | None
    doc_false_exclusion_rate: float | None
    n_gold_queries: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    #: the scan the engine chose for the first query, when it says (PostgreSQL's EXPLAIN)
    plan: str = ""


def _docs_of(ids: np.ndarray, chunk_doc: np.ndarray) -> set[int]:
    return {int(d) for d in chunk_doc[ids[ids >= 0]]}


def exclusion(results: SearchResult, chunk_doc: np.ndarray,
              doc_bucket_ok: Sequence[np.ndarray]) -> tuple[float | None, float | None, int]:
    """(query rate, doc rate, n queries): eligible gold docs the filtered top-k never returns.

    ``doc_bucket_ok[i]``: query i's gold docs that lie in its bucket (eligible)."""
    n_q = n_docs = miss_q = miss_d = 0
    for i, eligible in enumerate(doc_bucket_ok):
        if len(eligible) == 0:
            continue
        got = _docs_of(results.ids[i], chunk_doc)
        missing = sum(1 for d in eligible.tolist() if d not in got)
        n_q += 1
        n_docs += len(eligible)
        miss_d += missing
        miss_q += missing == len(eligible)
    if n_q == 0:
        return None, None, 0
    return miss_q / n_q, miss_d / n_docs, n_q


def percentiles(ms: Sequence[float]) -> tuple[float, float, float]:
    a = np.asarray(ms, dtype=np.float64)
    return (float(np.percentile(a, 50)), float(np.percentile(a, 95)),
            float(np.percentile(a, 99)))


def timed_search(index: FilteredSearch, params: Mapping[str, int | float],
                 queries: np.ndarray, wl: FilterWorkload, k: int, *, warmup: int = 5
                 ) -> tuple[SearchResult, list[float]]:
    """Each query sent alone (timed around the call, after ``warmup`` untimed calls): the
    filtered results and the per-request milliseconds."""
    n_q = len(queries)
    ids = np.full((n_q, k), -1, dtype=np.int64)
    scores = np.full((n_q, k), -np.inf, dtype=np.float32)
    for i in range(min(warmup, n_q)):  # connection and cache warm-up, not timed
        index.search_where(queries[i:i + 1], k, params, column=wl.column,
                           values=wl.values[i:i + 1])
    ms: list[float] = []
    clock = time.perf_counter
    for i in range(n_q):
        q1, v1 = queries[i:i + 1], wl.values[i:i + 1]
        t0 = clock()
        res = index.search_where(q1, k, params, column=wl.column, values=v1)
        ms.append((clock() - t0) * 1000.0)
        ids[i], scores[i] = res.ids[0], res.scores[0]
    return SearchResult(ids, scores), ms


def score_row(backend: str, params: Mapping[str, int | float], got: SearchResult,
              ms: Sequence[float], vectors: np.ndarray, queries: np.ndarray,
              wl: FilterWorkload, k: int, gold: Sequence[np.ndarray], chunk_doc: np.ndarray,
              *, plan: str = "") -> SelectivityRow:
    """The figures of the module docstring for ``got`` against ``exact_filtered``."""
    n_q = len(queries)
    ids = got.ids
    exact = exact_filtered(vectors, queries, wl, k)
    rec = filtered_recall(got, exact, vectors, queries, k, wl)
    want = np.minimum(k, np.asarray([len(wl.eligible(i)) for i in range(n_q)]))
    returned = (ids >= 0).sum(axis=1)
    bad = int(sum(int((wl.chunk_bucket[ids[i][ids[i] >= 0]] != wl.values[i]).sum())
                  for i in range(n_q)))
    doc_bucket = np.zeros(int(chunk_doc.max()) + 1, dtype=np.int64) - 1
    doc_bucket[chunk_doc] = wl.chunk_bucket
    eligible_gold = [g[doc_bucket[g] == wl.values[i]] for i, g in enumerate(gold)]
    fe_q, fe_d, n_gold = exclusion(got, chunk_doc, eligible_gold)
    ex_q, _, _ = exclusion(exact, chunk_doc, eligible_gold)
    p50, p95, p99 = percentiles(ms)
    return SelectivityRow(
        backend=backend, params=", ".join(f"{a}={b}" for a, b in params.items()),
        selectivity=wl.selectivity, n_queries=n_q,
        eligible_chunks_median=float(np.median([len(wl.eligible(i)) for i in range(n_q)])),
        recall=float(np.nanmean(rec)), short_share=float((returned < want).mean()),
        returned_mean=float(returned.mean()), unauthorized=bad,
        false_exclusion_rate=fe_q, exact_false_exclusion_rate=ex_q,
        doc_false_exclusion_rate=fe_d, n_gold_queries=n_gold,
        p50_ms=p50, p95_ms=p95, p99_ms=p99, plan=plan)


def measure(backend: str, index: FilteredSearch, params: Mapping[str, int | float],
            vectors: np.ndarray, queries: np.ndarray, wl: FilterWorkload, k: int,
            gold: Sequence[np.ndarray], chunk_doc: np.ndarray, *, plan: str = "",
            warmup: int = 5) -> SelectivityRow:
    """One table row: each query sent alone (timed around the call), then the figures of the
    module docstring against ``exact_filtered``."""
    got, ms = timed_search(index, params, queries, wl, k, warmup=warmup)
    return score_row(backend, params, got, ms, vectors, queries, wl, k, gold, chunk_doc,
                     plan=plan)


# ------------------------------------------------------------------ faiss, for comparison


class FaissHnswFiltered:
    """faiss HNSW searched with an ``IDSelector`` per query (faiss' own filtered search: the
    graph walk skips ineligible ids in its results). A FilteredSearch, like the databases."""

    def __init__(self, index: Any, attributes: Mapping[str, np.ndarray]) -> None:
        self._index = index
        self._attributes = {k: np.asarray(v) for k, v in attributes.items()}
        self._selectors: dict[tuple[str, int], Any] = {}

    def _selector(self, column: str, value: int) -> Any:
        faiss = _faiss()
        key = (column, value)
        if key not in self._selectors:
            rows = np.flatnonzero(self._attributes[column] == value).astype(np.int64)
            self._selectors[key] = (faiss.IDSelectorBatch(rows), rows)  # keep rows alive
        return self._selectors[key][0]

    def search_where(self, queries: np.ndarray, k: int, params: Mapping[str, int | float], *,
                     column: str, values: np.ndarray) -> SearchResult:
        faiss = _faiss()
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        for i in range(len(queries)):
            sp = faiss.SearchParametersHNSW(sel=self._selector(column, int(values[i])),
                                            efSearch=int(params.get("ef_search", 16)))
            s, got = self._index.search(np.ascontiguousarray(queries[i:i + 1],
                                                             dtype=np.float32), k, params=sp)
            ids[i], scores[i] = got[0], s[0]
        return SearchResult(ids=ids, scores=scores)


def build_faiss_hnsw(vectors: np.ndarray, attributes: Mapping[str, np.ndarray], *,
                     m: int = 32, ef_construction: int = 200
                     ) -> tuple[FaissHnswFiltered, BuildInfo]:
    """conf/index/hnsw.yaml's graph (HNSW32, efConstruction 200), inner product."""
    from bench.index.faiss_index import serialized_bytes

    faiss = _faiss()
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    t0 = time.perf_counter()
    index = faiss.IndexHNSWFlat(x.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.add(x)
    build_s = time.perf_counter() - t0
    return (FaissHnswFiltered(index, attributes),
            BuildInfo(build_s, serialized_bytes(faiss, index), x.shape[0], x.shape[1]))
