"""Convex combination of normalised scores: alpha * norm(dense) + (1 - alpha) * norm(sparse).

Raw BM25 and cosine scores live on unrelated scales, so each lane is normalised per query over
the list that lane returned for that query (its top-k pool, not the whole corpus):

- ``minmax``: (s - min) / (max - min); a lane whose scores are all equal (e.g. one hit) maps
  to 1.0, the convention of OpenSearch's min_max normalisation.
- ``zscore``: (s - mean) / std with the population std; all equal maps to 0.0 (the mean).

A document missing from one lane gets that lane's MINIMUM normalised value for the query: it
ranked below everything the lane returned, so it is scored like the lane's worst retrieved
document. This is what most hybrid systems do (with min-max it is the usual 0 for a document
a lane did not return); a fixed 0 would be wrong for z-scores, where it would put a missing
document above the lane's below-mean hits. A lane that returned nothing for a query
contributes 0 to every document of that query.

Arithmetic is float64 from the lanes' float32 scores; the fused score is rounded to float32
once, then ordered like every scored ranking (float32 score desc, doc id desc).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.config.build import OptionError
from bench.fusion.base import FusionVariant, Lane, check_unique, lane, ranked_hits, union
from bench.retrieval.base import Hits

NORMALIZATIONS = ("minmax", "zscore")


def normalize(ln: Lane, n_queries: int, method: str) -> tuple[np.ndarray, np.ndarray]:
    """(normalised score per row, minimum normalised score per query) of one lane.

    Queries the lane returned nothing for get minimum 0.0 (the lane then adds nothing).
    """
    s = ln.score.astype(np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("convex fusion needs finite scores in both pools")
    counts = np.bincount(ln.query, minlength=n_queries)
    has = counts > 0
    if method == "minmax":
        lo = np.full(n_queries, np.inf)
        hi = np.full(n_queries, -np.inf)
        np.minimum.at(lo, ln.query, s)
        np.maximum.at(hi, ln.query, s)
        span = (hi - lo)[ln.query]
        flat = span == 0
        norm = np.where(flat, 1.0, (s - lo[ln.query]) / np.where(flat, 1.0, span))
    elif method == "zscore":
        mean = np.bincount(ln.query, weights=s, minlength=n_queries) / np.maximum(counts, 1)
        dev = s - mean[ln.query]
        var = np.bincount(ln.query, weights=dev * dev, minlength=n_queries) / np.maximum(counts, 1)
        std = np.sqrt(var)[ln.query]
        flat = std == 0
        norm = np.where(flat, 0.0, dev / np.where(flat, 1.0, std))
    else:
        raise ValueError(f"unknown normalization {method!r}")
    low = np.full(n_queries, np.inf)
    np.minimum.at(low, ln.query, norm)
    return norm, np.where(has, low, 0.0)


class ConvexFusion:
    """alpha * norm(dense) + (1 - alpha) * norm(sparse), swept over ``alpha`` x ``normalization``.

    alpha: dense weights in [0, 1] (1 = dense ranking only, 0 = lexical only).
    normalization: per-query per-lane score normalisations, each "minmax" or "zscore".
    """

    def __init__(
        self,
        *,
        alpha: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
        normalization: Sequence[str] = ("minmax",),
    ) -> None:
        check_unique("alpha", alpha)
        for a in alpha:
            if not 0.0 <= a <= 1.0:
                raise OptionError("alpha", f"each value must be in [0, 1], got {a!r}")
        check_unique("normalization", normalization)
        for n in normalization:
            if n not in NORMALIZATIONS:
                raise OptionError(
                    "normalization", f"each value must be minmax or zscore, got {n!r}"
                )
        self.alpha = [float(a) for a in alpha]
        self.normalization = list(normalization)

    def variants(self) -> list[FusionVariant]:
        return [
            FusionVariant(
                name=f"convex(alpha={a!r},{n})", params=(("alpha", a), ("normalization", n))
            )
            for n in self.normalization
            for a in self.alpha
        ]

    def fuse(
        self, dense: Hits, sparse: Hits, variant: FusionVariant, *, id_key: np.ndarray, k: int
    ) -> Hits:
        """Top-``k`` documents per query by the convex score (float32), doc id desc on ties."""
        alpha = float(variant.param("alpha"))
        method = str(variant.param("normalization"))
        n_q = dense.n_queries
        lanes = [lane(dense, id_key, n_q, "dense"), lane(sparse, id_key, n_q, "sparse")]
        query, doc, slots = union(lanes, len(id_key))
        parts = []
        for ln, slot in zip(lanes, slots, strict=True):
            norm, low = normalize(ln, n_q, method)
            value = low[query]  # absent: the lane's minimum for that query
            value[slot] = norm
            parts.append(value)
        score = alpha * parts[0] + (1.0 - alpha) * parts[1]
        return ranked_hits(query, doc, score, id_key, n_queries=n_q, k=k)
