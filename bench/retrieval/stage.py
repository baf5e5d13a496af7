"""Plan operation of the `retrieval` stage: one dense search at one query-time setting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.index.base import SearchResult
from bench.index.stage import ANN_COLUMNS, load_search, save_search
from bench.retrieval.base import Hits, Pool, Retriever, order_key
from bench.telemetry.base import StageTiming, TimingLog, stage_timer

#: the stage name of folding chunk results into documents (a query-time stage of its own)
FOLD_STAGE = "fold"


@dataclass(frozen=True)
class RetrieveOp:
    """(IndexArtifact, query Embeddings, ChunkTable, Dataset) -> Pool.

    Searches every query at the query-time setting ``query_params`` (batch samples for QPS,
    single-query samples, tagged with the query id, for p50/p95/p99), folds chunks into
    documents (timed as the ``fold`` stage), and keeps the chunk-level top columns for ANN recall.
    """

    retriever: Retriever
    query_params: Mapping[str, int | float]
    device: str
    stage: str = "retrieve"
    version: str = "4"

    def params(self) -> Mapping[str, Any]:
        return {"retriever": self.retriever.cache_params(),
                "query_params": dict(self.query_params)}

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        index, queries, chunks, dataset = inputs
        result = self.retriever.search(
            index.built, np.asarray(queries.vectors), self.query_params, n_chunks=len(chunks),
            timing=timing, sync_cuda=self.device == "cuda",
            query_ids=[q.query_id for q in dataset.queries])
        id_key = order_key(dataset.doc_ids)
        # post-processing is its own stage: the search samples time the index alone
        with stage_timer() as elapsed:
            hits = self.retriever.fold(result, chunks.doc_idx, id_key)
        timing.samples.append(StageTiming(FOLD_STAGE, "total", len(dataset.queries), elapsed(),
                                          self.device))
        hits.save(directory / "hits.parquet")
        cols = min(ANN_COLUMNS, result.ids.shape[1])
        save_search(SearchResult(result.ids[:, :cols], result.scores[:, :cols]), directory,
                    "chunks")

    def load(self, directory: Path, inputs: Sequence[Any]) -> Pool:
        dataset = inputs[3]
        return Pool(Hits.load(directory / "hits.parquet", len(dataset.queries)),
                    load_search(directory, "chunks"))
