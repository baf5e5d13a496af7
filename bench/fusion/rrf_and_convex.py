"""RRF and convex combination side by side in one run (the `hybrid` experiment)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.fusion.base import Fusion, FusionVariant
from bench.fusion.convex import ConvexFusion
from bench.fusion.rrf import RRFFusion
from bench.retrieval.base import Hits


class RRFAndConvex:
    """Every RRF ``k`` and every convex (alpha x normalization) variant, on the same pools."""

    def __init__(
        self,
        *,
        rrf_k: Sequence[int] = (60,),
        alpha: Sequence[float] = (0.25, 0.5, 0.75),
        normalization: Sequence[str] = ("minmax", "zscore"),
    ) -> None:
        self.rrf = RRFFusion(k=rrf_k)
        self.convex = ConvexFusion(alpha=alpha, normalization=normalization)
        self._owner: dict[str, Fusion] = {v.name: self.rrf for v in self.rrf.variants()}
        self._owner.update({v.name: self.convex for v in self.convex.variants()})

    def variants(self) -> list[FusionVariant]:
        return [*self.rrf.variants(), *self.convex.variants()]

    def fuse(self, dense: Hits, sparse: Hits, variant: FusionVariant, *, id_key: np.ndarray,
             k: int) -> Hits:
        owner = self._owner[variant.name]
        return owner.fuse(dense, sparse, variant, id_key=id_key, k=k)
