"""Plan operation of the `retrieval` stage: one dense search at one query-time setting."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.chunking.base import ChunkTable
from bench.data.base import Dataset
from bench.embedding.stage import Embeddings
from bench.errors import ServiceError
from bench.index.base import SearchResult
from bench.index.stage import ANN_COLUMNS, IndexArtifact, IndexOp, load_search, save_search
from bench.pipeline.lanes import ConfigKind, PlanState, label_of, lane, params_label
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
from bench.retrieval.search import FOLD_STAGE, RETRIEVE_STAGE, DenseSearch
from bench.telemetry.base import StageTiming, TimingLog, stage_timer


@dataclass(frozen=True)
class RetrieveInputs:
    index: IndexArtifact
    queries: Embeddings
    chunks: ChunkTable
    data: Dataset


@dataclass(frozen=True)
class RetrieveOp(OpTraits):
    """(IndexArtifact, query Embeddings, ChunkTable, Dataset) -> Pool.

    Searches every query at the query-time setting ``query_params`` (batch samples for QPS,
    single-query samples, tagged with the query id, for p50/p95/p99), folds chunks into
    documents (timed as the ``fold`` stage), and keeps the chunk-level top columns for ANN recall.
    """

    retriever: Retriever
    query_params: Mapping[str, int | float]
    device: str
    stage: str = RETRIEVE_STAGE
    version: str = "4"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = RetrieveInputs
    latency_stages: ClassVar[tuple[str, ...]] = (RETRIEVE_STAGE, FOLD_STAGE)
    work_stages: ClassVar[tuple[str, ...]] = (RETRIEVE_STAGE, FOLD_STAGE)

    def params(self) -> Mapping[str, Any]:
        return {"retriever": self.retriever.cache_params(),
                "query_params": dict(self.query_params)}

    def write(self, inputs: RetrieveInputs, directory: Path, timing: TimingLog) -> None:
        index, queries, chunks, dataset = inputs.index, inputs.queries, inputs.chunks, inputs.data
        result = self.retriever.search(
            index.built, np.asarray(queries.vectors), self.query_params, n_chunks=len(chunks),
            timing=timing, sync_cuda=self.device == "cuda",
            query_ids=[q.query_id for q in dataset.queries])
        # a query without a vector (its embedding request failed) or without an answer from
        # the database keeps that status and no ranking: never a ranking of a zero vector
        qids = [q.query_id for q in dataset.queries]
        lost = merge_statuses(queries.incomplete, result.by_query(qids))
        if lost:
            rows = [i for i, q in enumerate(qids) if q in lost]
            result.ids[rows] = -1
            result.scores[rows] = -np.inf
        search = DenseSearch.over(index.built, chunks, self.retriever, self.query_params,
                                  order_key(dataset.doc_ids))
        # post-processing is its own stage: the search samples time the index alone
        with stage_timer() as elapsed:
            hits = search.fold(result)
        timing.samples.append(StageTiming(FOLD_STAGE, "total", len(dataset.queries), elapsed(),
                                          self.device))
        hits.save(directory / "hits.parquet")
        cols = min(ANN_COLUMNS, result.ids.shape[1])
        save_search(SearchResult(result.ids[:, :cols], result.scores[:, :cols]), directory,
                    "chunks")
        if lost:
            mark_incomplete(directory, lost, f"{len(lost)} of {len(qids)} queries without a "
                                             "vector or a search answer")

    def load(self, directory: Path, inputs: RetrieveInputs) -> Pool:
        return Pool(Hits.load(directory / "hits.parquet", len(inputs.data.queries)),
                    load_search(directory, "chunks"),
                    status=read_incomplete(directory) or None)

    def run_one(self, inputs: RetrieveInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        search = DenseSearch.over(inputs.index.built, inputs.chunks, self.retriever,
                                  self.query_params, query.id_key)
        res = search.search(np.asarray(inputs.queries.vectors), timer)
        if res.incomplete:  # one request, no answer: the caller (a served chain) fails it
            raise ServiceError(f"index {type(inputs.index.built).__name__}: the search was "
                               f"not answered ({res.incomplete[0]}); the log names the "
                               "endpoint")
        return Pool(search.fold(res, timer), res)


#: label of the exact reference pool added by ``generation.exact_reference``
EXACT_REFERENCE_LABEL = "dense(exact)"


def expand(s: PlanState) -> PlanState:
    """One dense config per query-time setting of the index (swept on the one built index),
    and — when answers are generated with ``exact_reference`` from an approximate index —
    the exact pool first (``exact_reference_node``)."""
    c = s.comps
    inputs = {"queries": s.node("embed_queries"), "chunks": s.node("chunk"),
              "data": s.node("data")}
    configs = list(s.configs)
    for qp in c.index.query_params():
        label = label_of("dense", qp)
        node = Node.of(RetrieveOp(c.retriever, qp, s.device), label, index=s.node("index"),
                       **inputs)
        configs.append(lane(label, ConfigKind.DENSE, node, qp))
    g = s.generation
    if g is not None and g.exact_reference and not c.index.exact:
        node = exact_reference_node(s)
        configs.insert(0, lane(EXACT_REFERENCE_LABEL, ConfigKind.DENSE, node,
                               {"exact_reference": True}, reference=True))
    return s.with_configs(configs)


def exact_reference_node(s: PlanState) -> Node:
    """The exact pool: a flat faiss index over the same document embeddings, searched by the
    run's retriever. The flat index has ``conf/index/flat.yaml``'s options, whatever the run's
    index options are, so its chain (and config id) is the same in every job of an ANN sweep,
    and equal to the flat job's own dense config: computed once, cached; every answer is
    paired against the exact pool's."""
    from bench.index.faiss_index import FaissIndex

    flat = FaissIndex(factory="Flat", device=s.device)
    index = Node.of(IndexOp(flat, s.device),
                    f"FaissIndex {params_label(flat.cache_params())} (exact reference)",
                    embeddings=s.node("embed_docs"))
    return Node.of(RetrieveOp(s.comps.retriever, {}, s.device), EXACT_REFERENCE_LABEL,
                   index=index, queries=s.node("embed_queries"), chunks=s.node("chunk"),
                   data=s.node("data"))
