"""A hard filter pushed down into a database index (``filters.pushdown=true``).

Without push-down the filters stage removes what a query may not return from the pool the
index already retrieved (Python, after the search): a narrow filter then leaves a short list
of what survived. With push-down the search itself is filtered by the engine — pgvector's
SQL ``WHERE``, LanceDB's ``where`` (pre-filter), Milvus's and Qdrant's filter expressions,
sqlite-vec's metadata columns (``bench.index.remote``'s ``_where_in``) — so the engine
returns the top-k of what the query may see, and whether it gets there by an exact scan of
the matching rows or by filtering its ANN walk is the engine's (and its planner's) choice,
as in production.

How the rule reaches the engine: the filter says which documents each query may see
(``PushableFilter.eligible``); documents that every query sees alike form one *eligibility
class* (an ACL group, a tag set: the documents no query tells apart), each chunk carries its
document's class in an integer column ``fclass`` (with a B-tree index, as a real schema has on
its filter columns), and query i searches ``WHERE fclass = ANY(classes i may see)``. The
table is built once per (vectors, classes, build options) like any database build and reused
when complete. The filters stage then runs on the pushed-down pool as on any pool: it removes
nothing the engine did not already exclude, and its figures — the seed's false-exclusion rate
over the eligible corpus, unauthorized hits (must be 0) — are computed the same way.

Ops: ``EligibilityOp`` (classes and each query's allowed set), ``FilterIndexOp`` (the table
with the class column), ``PushdownRetrieveOp`` (one filtered search per query, at each
query-time setting; cached like the unfiltered search). Only dense lanes over the run's own
database index are pushed down; BM25 and fused lanes are filtered after retrieval as before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.chunking.base import ChunkTable
from bench.data.base import Dataset
from bench.embedding.stage import Embeddings
from bench.errors import ConfigError, ServiceError
from bench.filters.base import PushableFilter
from bench.index.base import BuildInfo, FilterableIndex, FilteredSearchIn, SearchResult
from bench.pipeline.lanes import PlanState
from bench.pipeline.node import (
    Node,
    OneQuery,
    OpTraits,
    Phase,
    QueryTimer,
    mark_incomplete,
    read_incomplete,
)
from bench.pipeline.statuses import merge_statuses
from bench.retrieval.base import Hits, Pool, Retriever, order_key
from bench.retrieval.search import DenseSearch, Where
from bench.retrieval.stage import FOLD_STAGE, RETRIEVE_STAGE, RetrieveOp
from bench.telemetry.base import StageTiming, TimingLog, stage_timer

log = logging.getLogger("bench")

#: the integer column holding each chunk's eligibility class
COLUMN = "fclass"


@dataclass(frozen=True)
class Eligibility:
    """``chunk_class``: int32 [n_chunks], each chunk's class; ``allowed``: per query (dataset
    order) the int64 classes it may see; ``row``: query id -> its position."""

    chunk_class: np.ndarray
    allowed: tuple[np.ndarray, ...]
    row: Mapping[str, int]
    n_classes: int


def eligibility_classes(eligible: np.ndarray, chunk_doc: np.ndarray, query_ids: list[str]
                        ) -> Eligibility:
    """Group documents by their column of ``eligible`` (bool [n_q, n_docs]): documents no
    query tells apart share a class; query i may see the classes whose documents it keeps."""
    n_q, n_d = eligible.shape
    packed = np.packbits(eligible, axis=0).T if n_q else np.zeros((n_d, 0), np.uint8)
    _, first, inverse = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    doc_class = np.asarray(inverse, dtype=np.int32).reshape(-1)
    allowed = tuple(np.flatnonzero(eligible[i, first]).astype(np.int64) for i in range(n_q))
    return Eligibility(doc_class[np.asarray(chunk_doc, dtype=np.int64)], allowed,
                       {q: i for i, q in enumerate(query_ids)}, len(first))


@dataclass(frozen=True)
class EligibilityInputs:
    data: Dataset
    chunks: ChunkTable


@dataclass(frozen=True)
class EligibilityOp(OpTraits):
    """(Dataset, ChunkTable) -> the eligibility classes of one hard filter (in memory)."""

    flt: PushableFilter
    relevance_level: int
    stage: str = "filter_classes"
    version: str = "1"
    #: what the application knows about its documents and callers before any request
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = EligibilityInputs

    def params(self) -> Mapping[str, Any]:
        return {"filter": self.flt.cache_params(), "kind": type(self.flt).__name__,
                "relevance_level": self.relevance_level}

    def run(self, inputs: EligibilityInputs, timing: TimingLog) -> Eligibility:
        with timing.measure("total", len(inputs.data.queries)):
            e = self.flt.eligible(inputs.data, relevance_level=self.relevance_level)
            out = eligibility_classes(e, inputs.chunks.doc_idx,
                                      [q.query_id for q in inputs.data.queries])
        log.info("stage %-10s %s: %d eligibility classes over %d documents", self.stage,
                 type(self.flt).__name__, out.n_classes, e.shape[1])
        return out


@dataclass(frozen=True)
class FilteredIndex:
    built: FilteredSearchIn
    info: BuildInfo


@dataclass(frozen=True)
class FilterIndexInputs:
    embeddings: Embeddings
    classes: Eligibility


@dataclass(frozen=True)
class FilterIndexOp(OpTraits):
    """(document Embeddings, Eligibility) -> the database table with the class column. In
    memory on bench's side: the table is the artifact (content-keyed, reused when complete)."""

    index: FilterableIndex
    stage: str = "filter_index"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = FilterIndexInputs

    def params(self) -> Mapping[str, Any]:
        return {"index": self.index.cache_params(), "kind": type(self.index).__name__,  # type: ignore[attr-defined]
                "column": COLUMN}

    def run(self, inputs: FilterIndexInputs, timing: TimingLog) -> FilteredIndex:
        built, info = self.index.build_with_attributes(
            np.asarray(inputs.embeddings.vectors), {COLUMN: inputs.classes.chunk_class})
        assert isinstance(built, FilteredSearchIn)
        timing.add("total", info.n_vectors, info.build_s * 1000.0)
        return FilteredIndex(built, info)


@dataclass(frozen=True)
class PushdownInputs:
    index: FilteredIndex
    classes: Eligibility
    queries: Embeddings
    chunks: ChunkTable
    data: Dataset


@dataclass(frozen=True)
class PushdownRetrieveOp(OpTraits):
    """One filtered search per query inside the engine, at one query-time setting, folded
    into documents like the unfiltered search (``RetrieveOp``); per-query samples of stage
    ``retrieve`` carry the query id. Queries without a vector or an answer keep their
    status (``Pool.status``) and the artifact is then not cached."""

    retriever: Retriever
    query_params: Mapping[str, int | float]
    device: str
    stage: str = "retrieve_where"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = PushdownInputs
    latency_stages: ClassVar[tuple[str, ...]] = (RETRIEVE_STAGE, FOLD_STAGE)
    work_stages: ClassVar[tuple[str, ...]] = (RETRIEVE_STAGE, FOLD_STAGE)

    def params(self) -> Mapping[str, Any]:
        return {"retriever": self.retriever.cache_params(),
                "query_params": dict(self.query_params), "column": COLUMN}

    def write(self, inputs: PushdownInputs, directory: Path, timing: TimingLog) -> None:
        dataset, chunks = inputs.data, inputs.chunks
        search = DenseSearch.over(inputs.index.built, chunks, self.retriever, self.query_params,
                                  order_key(dataset.doc_ids))
        depth = search.depth
        vecs = np.asarray(inputs.queries.vectors, dtype=np.float32)
        qids = [q.query_id for q in dataset.queries]
        n_q = len(qids)
        ids = np.full((n_q, depth), -1, dtype=np.int64)
        scores = np.full((n_q, depth), -np.inf, dtype=np.float32)
        lost = dict(inputs.queries.incomplete)
        for i, qid in enumerate(qids):
            if qid in lost:  # no vector: no search of a zero vector
                continue
            allowed = [inputs.classes.allowed[inputs.classes.row[qid]]]
            with stage_timer() as elapsed:
                res = search.search(vecs[i:i + 1], where=Where(COLUMN, allowed))
            if res.incomplete:
                lost = merge_statuses(lost, res.by_query([qid]))
                continue
            timing.add("query", 1, elapsed(), qid)
            ids[i], scores[i] = res.ids[0], res.scores[0]
        result = SearchResult(ids, scores)
        with stage_timer() as elapsed:
            hits = search.fold(result)
        timing.samples.append(StageTiming(FOLD_STAGE, "total", n_q, elapsed(), self.device))
        hits.save(directory / "hits.parquet")
        if lost:
            mark_incomplete(directory, lost, f"{len(lost)} of {n_q} queries without a vector "
                                             "or a search answer")

    def load(self, directory: Path, inputs: PushdownInputs) -> Pool:
        # no chunk columns: ANN recall against the UNFILTERED exact search would not say
        # anything about a filtered one (bench.index.selectivity measures that)
        return Pool(Hits.load(directory / "hits.parquet", len(inputs.data.queries)),
                    status=read_incomplete(directory) or None)

    def run_one(self, inputs: PushdownInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        search = DenseSearch.over(inputs.index.built, inputs.chunks, self.retriever,
                                  self.query_params, query.id_key)
        vec = np.asarray(inputs.queries.vectors, dtype=np.float32)
        allowed = [inputs.classes.allowed[inputs.classes.row[query.query.query_id]]]
        res = search.search(vec, timer, Where(COLUMN, allowed))
        if res.incomplete:  # one request, no answer: the caller (a served chain) fails it
            raise ServiceError(f"index {type(inputs.index.built).__name__}: the filtered "
                               f"search was not answered ({res.incomplete[0]}); the log "
                               "names the endpoint")
        return Pool(search.fold(res, timer))


def pushed_down(s: PlanState, flt: PushableFilter, pool: Node, cache: dict[str, Node]
                ) -> Node | None:
    """The pushed-down search replacing ``pool`` (a dense search over the run's index) for
    ``flt``, or None when ``pool`` is not one (BM25, fusion, the exact reference: filtered
    after retrieval). ``cache`` shares the class and table nodes between lanes."""
    if not (isinstance(pool.op, RetrieveOp) and pool.input("index").key == s.node("index").key):
        return None
    index = s.comps.index
    if not isinstance(index, FilterableIndex):
        raise ConfigError("filters.pushdown", f"index {type(index).__name__} cannot filter "
                          "inside the engine; use a database index (index=pgvector_hnsw, "
                          "pgvector_ivfflat, lancedb, milvus_*, qdrant_hnsw or sqlite_vec) or "
                          "pushdown=false")
    key = type(flt).__name__ + repr(sorted(flt.cache_params().items()))
    if key not in cache:
        classes = Node.of(EligibilityOp(flt, s.relevance_level),
                          f"{type(flt).__name__} eligibility classes", data=s.node("data"),
                          chunks=s.node("chunk"))
        table = Node.of(FilterIndexOp(index),
                        f"{type(index).__name__} with column {COLUMN}",
                        embeddings=s.node("embed_docs"), classes=classes)
        cache[key] = classes
        cache[key + "/table"] = table
    op = pool.op
    return Node.of(PushdownRetrieveOp(op.retriever, op.query_params, s.device),
                   f"{pool.label} WHERE {COLUMN}", index=cache[key + "/table"],
                   classes=cache[key], queries=pool.input("queries"),
                   chunks=pool.input("chunks"), data=pool.input("data"))
