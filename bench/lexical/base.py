"""Protocols of the `lexical` stage.

A lexical index is the sparse twin of the dense lane: it is built once over the CHUNK texts
(the same ``ChunkTable`` rows the vector index holds), cached on disk, and searched with plain
query strings. ``search`` returns chunk rows in the same ``SearchResult`` layout as
``bench.index.base.BuiltIndex.search``, so ``bench.retrieval.base.fold_chunks`` turns both
lanes into document ``Hits`` the same way before ``fusion`` merges them.

Build settings are apart from query settings (STYLE point 3): ``cache_params`` holds only what
changes the built index (term weighting, tokenisation); ``k`` / ``depth`` are how many
documents to keep / chunks to fetch and do not invalidate it.

Adding a lexical index: implement ``LexicalIndex`` and ``BuiltLexicalIndex`` in a module here
(keyword-only constructor options; raise ``OptionError`` for bad values), add
``conf/lexical/<name>.yaml``. ``conf/lexical/none.yaml`` (``_target_: null``) disables the stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from bench.index.base import SearchResult


class BuiltLexicalIndex(Protocol):
    def search(self, queries: Sequence[str], k: int) -> SearchResult:
        """Top-``k`` chunks per query string.

        Returns ``ids`` int64 [n_q, k] chunk rows (-1 = empty slot: fewer than ``k`` chunks
        share a term with the query) and ``scores`` float32 [n_q, k] (-inf in empty slots),
        each row ordered by score desc.
        """
        ...

    def save(self, directory: Path) -> None:
        """Write the index under ``directory`` (created if missing); no pickles."""
        ...


class LexicalIndex(Protocol):
    #: documents kept per query after folding chunks into documents
    k: int

    def depth(self, n_chunks: int) -> int:
        """Chunks to fetch per query so that ~``k`` distinct documents survive the fold."""
        ...

    def cache_params(self) -> dict[str, object]:
        """Build options (go into the index artifact's cache key)."""
        ...

    def search_params(self) -> dict[str, object]:
        """Query-time options (go into the search's cache key, not the index's)."""
        ...

    def build(self, texts: Sequence[str]) -> BuiltLexicalIndex:
        """Index ``texts`` (chunk texts; row i = chunk i)."""
        ...

    def load(self, directory: Path) -> BuiltLexicalIndex:
        """Read an index that ``BuiltLexicalIndex.save`` wrote with the same build options."""
        ...


class WeightedLexicalIndex(BuiltLexicalIndex, Protocol):
    """A built lexical index that also searches weighted term queries (query expansion:
    ``bench.rewrite.rm3``) and exposes its analyser and document frequencies."""

    n_chunks: int

    def analyze(self, texts: Sequence[str]) -> list[list[str]]:
        """The index's own tokens of each text (the terms ``search_weighted`` takes)."""
        ...

    def doc_freq(self, terms: Sequence[str]) -> np.ndarray:
        """int64 number of indexed chunks holding each term."""
        ...

    def search_weighted(self, queries: Sequence[Sequence[tuple[str, float]]], k: int
                        ) -> SearchResult:
        """Top-``k`` chunks per query of (term, weight): sum of weight x BM25(term, chunk)."""
        ...
