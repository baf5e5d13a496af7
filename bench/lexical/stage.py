"""Plan operations of the `lexical` stage: build the index over chunks, search every query."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lexical.base import BuiltLexicalIndex, LexicalIndex
from bench.retrieval.base import Hits, Pool, fold_chunks, order_key
from bench.telemetry.base import TimingLog


@dataclass(frozen=True)
class LexicalIndexOp:
    """ChunkTable -> a built lexical index (cached; query settings are not in its key)."""

    lexical: LexicalIndex
    stage: str = "lexical_index"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {"lexical": self.lexical.cache_params(), "kind": type(self.lexical).__name__}

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        (chunks,) = inputs
        with timing.measure("total", len(chunks)):
            built = self.lexical.build(chunks.text)
        built.save(directory)

    def load(self, directory: Path, inputs: Sequence[Any]) -> BuiltLexicalIndex:
        return self.lexical.load(directory)


@dataclass(frozen=True)
class LexicalSearchOp:
    """(built lexical index, ChunkTable, Dataset) -> Pool of every query's top-k documents;
    batch and single-query samples, as for dense retrieval."""

    lexical: LexicalIndex
    stage: str = "lexical"
    version: str = "2"

    def params(self) -> Mapping[str, Any]:
        return self.lexical.search_params()

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        built, chunks, dataset = inputs
        queries = [q.text for q in dataset.queries]
        depth = self.lexical.depth(len(chunks))
        with timing.measure("batch", len(queries)):
            res = built.search(queries, depth)
        for q in dataset.queries:
            with timing.measure("query", 1, query_id=q.query_id):
                built.search([q.text], depth)
        hits = fold_chunks(res, chunks.doc_idx, order_key(dataset.doc_ids), k=self.lexical.k)
        hits.save(directory / "hits.parquet")

    def load(self, directory: Path, inputs: Sequence[Any]) -> Pool:
        return Pool(Hits.load(directory / "hits.parquet", len(inputs[2].queries)))
