"""Bi-encoder reranker: any configured embedder re-scores the pool on the full passages.

The use: a small, fast embedder retrieves (or BM25 / an ANN index does), a bigger one — or the
same one with a longer ``max_seq_length`` — re-scores the candidates. The embedder is a nested
config block built exactly like ``embedder:`` (same classes, same checks), so any embedder
option works here. Score = dot product of L2-normalised vectors (cosine), in [-1, 1].

Note: with the same model and a max length that did not truncate the chunks, scores equal the
first-stage dense scores and reranking a dense pool changes nothing; it pays off on pools from
BM25, fusion, ANN, or with a different embedder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import build
from bench.embedding.base import Embedder
from bench.precision import HasPrecision, PrecisionChoice
from bench.rerank.common import DEFAULT_DEPTHS, check_depths, check_device, check_pools, dedupe

#: Where the nested block sits in the run's config (errors name it)
EMBEDDER_KEY = "reranker.embedder"


class BiEncoderReranker:
    """embedder: a config block with ``_target_`` (an ``Embedder`` class) and its options;
    the device is the pipeline's, passed through."""

    name = "bi_encoder"

    def __init__(
        self,
        *,
        embedder: Mapping[str, Any],
        depths: Sequence[int] = DEFAULT_DEPTHS,
        score_threshold: float | None = None,
        device: str = "cpu",
    ) -> None:
        self._depths = check_depths(depths)
        self.score_threshold = score_threshold
        self.device = check_device(device)
        built = build(embedder, EMBEDDER_KEY, device=device)
        if built is None:
            from bench.errors import ConfigError

            raise ConfigError(f"{EMBEDDER_KEY}._target_", "must name an embedder, got null")
        self.embedder: Embedder = built
        self._target: str = str(embedder["_target_"])

    def cache_params(self) -> dict[str, object]:
        return {"embedder": self._target, **self.embedder.cache_params()}

    @property
    def precision_choice(self) -> PrecisionChoice | None:
        """The nested embedder's (its own ``precision`` option), None when it has none."""
        return self.embedder.precision_choice if isinstance(self.embedder, HasPrecision) else None

    def depths(self) -> list[int]:
        return list(self._depths)

    def _encode(self, texts: Sequence[str], kind: str) -> np.ndarray:
        out = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        if texts:
            self.embedder.encode(texts, kind=kind, out=out)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # the embedder may not normalise (normalize=false); cosine is what is promised
        return out / np.where(norms > 0, norms, 1.0)

    def score(self, queries: Sequence[str], passages: Sequence[Sequence[str]]) -> list[np.ndarray]:
        check_pools(queries, passages)
        texts, where = dedupe(passages)
        p = self._encode(texts, "document")
        q = self._encode(list(queries), "query")
        out = []
        for i, w in enumerate(where):
            # score each distinct text once: BLAS may round a row differently by its position,
            # and equal texts must get equal scores
            u, inv = np.unique(w, return_inverse=True)
            out.append(np.ascontiguousarray((p[u] @ q[i])[inv], dtype=np.float32))
        return out

    # --- IndexedReranker: passage vectors once, at index time; a query costs one encode
    def index_passages(self, texts: Sequence[str], directory: Path) -> None:
        np.save(directory / "passage_vectors.npy", self._encode(texts, "document"),
                allow_pickle=False)

    def load_index(self, directory: Path) -> np.ndarray:
        return np.load(directory / "passage_vectors.npy", mmap_mode="r")

    def score_indexed(self, queries: Sequence[str], index: np.ndarray,
                      rows: Sequence[np.ndarray]) -> list[np.ndarray]:
        q = self._encode(list(queries), "query")
        out = []
        for i, r in enumerate(rows):
            u, inv = np.unique(np.asarray(r, dtype=np.int64), return_inverse=True)
            out.append(np.ascontiguousarray((np.asarray(index[u]) @ q[i])[inv],
                                            dtype=np.float32))
        return out
