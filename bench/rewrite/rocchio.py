"""Rocchio relevance feedback on the dense lane (pseudo-relevance: no judged negatives).

q' = alpha * q + beta * mean(d_1 .. d_k) over the query's first ``fb_docs`` passages,
L2-normalised again (the index scores by inner product of unit vectors). Rocchio (1971);
SMART's usual weights are alpha = 1, beta = 0.75 (the gamma term needs non-relevant
documents, which pseudo-relevance feedback does not have). A query with no first-pass
passage keeps its vector.
"""

from __future__ import annotations

import numpy as np

from bench.config.build import OptionError


class RocchioRewriter:
    name = "rocchio"

    def __init__(self, *, fb_docs: int = 5, alpha: float = 1.0, beta: float = 0.75) -> None:
        if fb_docs < 1:
            raise OptionError("fb_docs", f"must be >= 1, got {fb_docs}")
        if alpha < 0 or beta < 0 or alpha + beta == 0:
            raise OptionError("alpha", f"alpha and beta must be >= 0, not both 0; got "
                                       f"{alpha}, {beta}")
        self.fb_docs = fb_docs
        self.alpha = float(alpha)
        self.beta = float(beta)

    @property
    def feedback_depth(self) -> int:
        return self.fb_docs

    def cache_params(self) -> dict[str, object]:
        return {"fb_docs": self.fb_docs, "alpha": self.alpha, "beta": self.beta}

    def rewrite(self, query: np.ndarray, feedback: np.ndarray) -> np.ndarray:
        q = np.asarray(query, dtype=np.float32)
        if len(feedback) == 0:
            return q
        moved = self.alpha * q + self.beta * np.asarray(feedback, np.float32).mean(axis=0)
        norm = float(np.linalg.norm(moved))
        return (moved / norm).astype(np.float32) if norm > 0 else q
