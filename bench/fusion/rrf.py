"""Reciprocal rank fusion (Cormack et al. 2009), as docs/metrics.md defines it.

score(d) = sum over lanes of 1 / (k + rank(d)), rank from 1; a lane without d adds nothing.
Terms are float64 and the fused score is rounded to float32 once, before ordering, exactly as
``bench.metrics.engine.rrf`` does (its kernel works on external string ids; here documents are
int rows with a precomputed ``id_key``, so a grouped numpy pass gives the same numbers without
hashing ids). With two lanes each document has at most two terms, and a + b == b + a in IEEE
arithmetic, so the sums do not depend on summation order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.config.build import OptionError
from bench.fusion.base import FusionVariant, check_unique, lane, ranked_hits, union
from bench.retrieval.base import Hits


class RRFFusion:
    """RRF of the dense and lexical pools; ``k``: the smoothing constants to sweep (>= 0)."""

    def __init__(self, *, k: Sequence[int] = (60,)) -> None:
        check_unique("k", k)
        for value in k:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise OptionError("k", f"each value must be an integer >= 0, got {value!r}")
        self.k = list(k)

    def variants(self) -> list[FusionVariant]:
        return [FusionVariant(name=f"rrf(k={v})", params=(("k", v),)) for v in self.k]

    def fuse(
        self, dense: Hits, sparse: Hits, variant: FusionVariant, *, id_key: np.ndarray, k: int
    ) -> Hits:
        """Top-``k`` documents per query by RRF score (float32), doc id desc on ties."""
        rrf_k = float(variant.param("k"))
        n_q = dense.n_queries
        lanes = [lane(dense, id_key, n_q, "dense"), lane(sparse, id_key, n_q, "sparse")]
        query, doc, slots = union(lanes, len(id_key))
        contrib = np.concatenate([1.0 / (rrf_k + ln.rank.astype(np.float64)) for ln in lanes])
        score = np.bincount(np.concatenate(slots), weights=contrib, minlength=len(doc))
        return ranked_hits(query, doc, score, id_key, n_queries=n_q, k=k)
