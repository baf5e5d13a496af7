"""Protocol of the `rerank` stage.

A reranker reads a cached candidate pool (``bench.retrieval.base.Hits``) and returns a new
``Hits`` over the first ``depth`` candidates of each query. Pools are retrieved once; rerank
depths are swept on them (the pool's cache key does not include the reranker).

Adding a reranker: implement ``Reranker`` in a module here, add ``conf/reranker/<name>.yaml``.
``conf/reranker/none.yaml`` (``_target_: null``) disables the stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bench.retrieval.base import Hits


class Reranker(Protocol):
    def cache_params(self) -> dict[str, object]: ...

    def depths(self) -> list[int]:
        """Rerank depths to sweep on one candidate pool."""
        ...

    def rerank(
        self, queries: Sequence[str], pool: Hits, passages: Sequence[str], *, depth: int
    ) -> Hits:
        """Score (query, passage) pairs of the top ``depth`` candidates; return them reordered."""
        ...
