"""The lexical search step every query-time op composes: ``LexicalSearch``.

The BM25 lane (``bench.lexical.stage``) and the weighted re-searches of the lexical rewrites
(RM3, Bo1: ``bench.rewrite.stage``) build one from their inputs and call it: depth
(``LexicalIndex.depth`` of the chunk count), the fold of chunk hits into the top-k documents
and the trec tie order are one code path. With a ``QueryTimer`` the engine's search is timed
as ``lexical`` and the fold as ``fold``. The dense twin is ``bench.retrieval.search``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from bench.lexical.base import BuiltLexicalIndex, LexicalIndex, WeightedLexicalIndex
from bench.retrieval.base import Hits, fold_chunks
from bench.retrieval.search import FOLD_STAGE, timed

if TYPE_CHECKING:
    from bench.chunking.base import ChunkTable
    from bench.index.base import SearchResult
    from bench.pipeline.node import QueryTimer

#: the latency stage of the lexical search itself
LEXICAL_STAGE = "lexical"


@dataclass(frozen=True)
class LexicalSearch:
    """Query texts (or weighted term lists) -> document hits on one built lexical index."""

    built: BuiltLexicalIndex
    lexical: LexicalIndex
    #: the chunk table's document index per chunk row
    chunk_doc: np.ndarray
    #: the corpus's document order key (trec tie order)
    id_key: np.ndarray

    @classmethod
    def over(cls, built: BuiltLexicalIndex, chunks: ChunkTable, lexical: LexicalIndex,
             id_key: np.ndarray) -> LexicalSearch:
        return cls(built, lexical, chunks.doc_idx, id_key)

    @property
    def depth(self) -> int:
        return self.lexical.depth(len(self.chunk_doc))

    def search(self, texts: Sequence[str], timer: QueryTimer | None = None) -> SearchResult:
        """The engine's chunk hits of each text (``lexical``)."""
        return timed(timer, LEXICAL_STAGE, lambda: self.built.search(texts, self.depth))

    def search_weighted(self, weighted: Sequence[Sequence[tuple[str, float]]],
                        timer: QueryTimer | None = None) -> SearchResult:
        """The chunk hits of each weighted term list (an expanded query; ``lexical``): the
        built index must be a ``WeightedLexicalIndex`` (the lexical rewrites' inputs are)."""
        built = cast(WeightedLexicalIndex, self.built)
        return timed(timer, LEXICAL_STAGE, lambda: built.search_weighted(weighted, self.depth))

    def fold(self, result: SearchResult, timer: QueryTimer | None = None) -> Hits:
        """Chunk hits -> each row's top-k documents in trec order (``fold``)."""
        return timed(timer, FOLD_STAGE, lambda: fold_chunks(result, self.chunk_doc, self.id_key,
                                                            k=self.lexical.k))
