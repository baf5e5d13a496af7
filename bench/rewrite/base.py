"""Records and Protocol of the `rewrite` stage: change the query before it is searched.

A rewriter reads a first-pass candidate pool of the query (pseudo-relevance feedback) and
returns the query to search again. ``VectorRewriter``: dense feedback, query vector -> query
vector (Rocchio). The stage (``bench.rewrite.stage``) adds, after each dense config, a config
that searches the rewritten query on the same index, so the rewrite is compared per query
with the raw query on the same queries.

Adding a rewriter: a class with keyword-only options implementing a Protocol here, and
``conf/rewriter/<name>.yaml`` naming it in ``_target_``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class VectorRewriter(Protocol):
    """Rewrites query vectors from the vectors of each query's first-pass passages."""

    #: short name for labels (``rocchio``)
    name: str

    def cache_params(self) -> dict[str, object]:
        """The options that change what it produces (they key the rewritten lane)."""
        ...

    @property
    def feedback_depth(self) -> int:
        """How many of the first-pass passages (best first) it reads per query."""
        ...

    def rewrite(self, query: np.ndarray, feedback: np.ndarray) -> np.ndarray:
        """``query`` float32 [dim] and ``feedback`` float32 [n <= feedback_depth, dim] (the
        query's first-pass passages, best first; n may be 0) -> the rewritten query [dim]."""
        ...
