"""Plan operations of the `lexical` stage: build the index over chunks, search every query."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from bench.chunking.base import ChunkTable
from bench.data.base import Dataset
from bench.lexical.base import BuiltLexicalIndex, LexicalIndex
from bench.lexical.search import LEXICAL_STAGE, LexicalSearch
from bench.pipeline.lanes import ConfigKind, PlanState, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.retrieval.base import Hits, Pool, order_key
from bench.retrieval.search import FOLD_STAGE
from bench.telemetry.base import TimingLog


@dataclass(frozen=True)
class LexicalIndexInputs:
    chunks: ChunkTable


@dataclass(frozen=True)
class LexicalIndexOp(OpTraits):
    """ChunkTable -> a built lexical index (cached; query settings are not in its key)."""

    lexical: LexicalIndex
    stage: str = "lexical_index"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = LexicalIndexInputs

    def params(self) -> Mapping[str, Any]:
        return {"lexical": self.lexical.cache_params(), "kind": type(self.lexical).__name__}

    def write(self, inputs: LexicalIndexInputs, directory: Path, timing: TimingLog) -> None:
        chunks = inputs.chunks
        with timing.measure("total", len(chunks)):
            built = self.lexical.build(chunks.text)
        built.save(directory)

    def load(self, directory: Path, inputs: LexicalIndexInputs) -> BuiltLexicalIndex:
        return self.lexical.load(directory)


@dataclass(frozen=True)
class LexicalSearchInputs:
    index: BuiltLexicalIndex
    chunks: ChunkTable
    data: Dataset


@dataclass(frozen=True)
class LexicalSearchOp(OpTraits):
    """(built lexical index, ChunkTable, Dataset) -> Pool of every query's top-k documents;
    batch and single-query samples, as for dense retrieval."""

    lexical: LexicalIndex
    stage: str = LEXICAL_STAGE
    version: str = "2"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = LexicalSearchInputs
    latency_stages: ClassVar[tuple[str, ...]] = (LEXICAL_STAGE, FOLD_STAGE)
    work_stages: ClassVar[tuple[str, ...]] = (LEXICAL_STAGE, FOLD_STAGE)

    def params(self) -> Mapping[str, Any]:
        return self.lexical.search_params()

    def write(self, inputs: LexicalSearchInputs, directory: Path, timing: TimingLog) -> None:
        built, chunks, dataset = inputs.index, inputs.chunks, inputs.data
        queries = [q.text for q in dataset.queries]
        search = LexicalSearch.over(built, chunks, self.lexical, order_key(dataset.doc_ids))
        with timing.measure("batch", len(queries)):
            res = search.search(queries)
        for q in dataset.queries:
            with timing.measure("query", 1, query_id=q.query_id):
                search.search([q.text])
        hits = search.fold(res)
        hits.save(directory / "hits.parquet")

    def load(self, directory: Path, inputs: LexicalSearchInputs) -> Pool:
        return Pool(Hits.load(directory / "hits.parquet", len(inputs.data.queries)))

    def run_one(self, inputs: LexicalSearchInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        search = LexicalSearch.over(inputs.index, inputs.chunks, self.lexical, query.id_key)
        return Pool(search.fold(search.search([query.text], timer), timer))


def expand(s: PlanState) -> PlanState:
    """The BM25 lane (``lexical=bm25``): its index over the chunks, one search config."""
    lex = s.comps.lexical
    if lex is None:
        return s
    chunk, data = s.node("chunk"), s.node("data")
    built = Node.of(LexicalIndexOp(lex), f"{type(lex).__name__} index", chunks=chunk)
    search = Node.of(LexicalSearchOp(lex), "bm25", index=built, chunks=chunk, data=data)
    return s.with_nodes(lexical=search).with_configs(
        [*s.configs, lane("bm25", ConfigKind.LEXICAL, search, lex.cache_params())])
