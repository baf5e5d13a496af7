"""The dense search step every query-time op composes: ``DenseSearch``.

An op that searches the run's vector index — the dense lane (``bench.retrieval.stage``), its
pushed-down filtered twin (``bench.filters.pushdown``), the multi-query rewrite
(``bench.rewrite.stage``), the iterative loop's further turns (``bench.iterative.stage``), the
capacity study's vector-index component — builds one from its inputs and calls it, so the
depth (``Retriever.depth`` of the chunk count), the query-time setting, the fold of chunk hits
into documents and the trec tie order are one code path. With a ``QueryTimer`` the engine's
search is timed as ``retrieve`` and the fold as ``fold``; without one nothing is timed (a
batch op times its own loop). ``bench.lexical.search.LexicalSearch`` is its lexical twin.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from bench.retrieval.base import Hits, Retriever

if TYPE_CHECKING:
    from bench.chunking.base import ChunkTable
    from bench.index.base import SearchResult
    from bench.pipeline.node import QueryTimer

#: the stage name of folding chunk results into documents (a query-time stage of its own)
FOLD_STAGE = "fold"
#: the latency stage of the dense search itself
RETRIEVE_STAGE = "retrieve"

T = TypeVar("T")


def timed(timer: QueryTimer | None, stage: str, fn: Callable[[], T]) -> T:
    """``fn()``, timed as ``stage`` in ``timer`` when there is one."""
    return fn() if timer is None else timer.time(stage, fn)


@dataclass(frozen=True)
class Where:
    """A filter pushed into the engine: chunks whose integer ``column`` holds one of
    ``allowed`` (one int64 array per query searched)."""

    column: str
    allowed: Sequence[np.ndarray]


@dataclass(frozen=True)
class DenseSearch:
    """Query vectors -> document hits on one built vector index at one query-time setting."""

    built: Any  # bench.index.base.BuiltIndex (FilteredSearchIn for a ``Where``)
    retriever: Retriever
    query_params: Mapping[str, int | float]
    #: the chunk table's document index per chunk row (what the fold maps hits through)
    chunk_doc: np.ndarray
    #: the corpus's document order key (``order_key``: trec tie order)
    id_key: np.ndarray

    @classmethod
    def over(cls, built: Any, chunks: ChunkTable, retriever: Retriever,
             query_params: Mapping[str, int | float], id_key: np.ndarray) -> DenseSearch:
        return cls(built, retriever, query_params, chunks.doc_idx, id_key)

    @property
    def depth(self) -> int:
        """Chunks asked of the engine per query (enough to fill k documents after folding)."""
        return self.retriever.depth(len(self.chunk_doc))

    def search(self, vectors: np.ndarray, timer: QueryTimer | None = None,
               where: Where | None = None) -> SearchResult:
        """The engine's chunk hits of each vector row (``retrieve``)."""
        if where is None:
            return timed(timer, RETRIEVE_STAGE, lambda: self.built.search(
                vectors, self.depth, self.query_params))
        return timed(timer, RETRIEVE_STAGE, lambda: self.built.search_where_in(
            vectors, self.depth, self.query_params, column=where.column,
            allowed=where.allowed))

    def fold(self, result: SearchResult, timer: QueryTimer | None = None) -> Hits:
        """Chunk hits -> each row's top-k documents in trec order (``fold``)."""
        return timed(timer, FOLD_STAGE, lambda: self.retriever.fold(
            result, self.chunk_doc, self.id_key))

    def __call__(self, vectors: np.ndarray, timer: QueryTimer | None = None,
                 where: Where | None = None) -> tuple[Hits, SearchResult]:
        """``search`` then ``fold``: the documents, and the chunk hits behind them."""
        result = self.search(vectors, timer, where)
        return self.fold(result, timer), result
