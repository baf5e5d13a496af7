"""Length-sorted batching shared by every embedder backend.

Texts are sorted longest first (fewer pad tokens per batch, and an out-of-memory batch shows up
at once rather than at the end), encoded batch by batch and scattered back to input order
directly into the output array, which may be a memory-map: a 1M-chunk corpus never holds more
than one batch of activations plus the vectors on disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from bench.embedding.base import EmbeddingStats

KINDS = ("document", "query")


def with_prefix(texts: Sequence[str], *, kind: str, query_prefix: str,
                document_prefix: str) -> list[str]:
    """The model inputs for ``kind``: each text with that kind's prefix."""
    if kind not in KINDS:
        raise ValueError(f"kind must be document|query, got {kind!r}")
    prefix = query_prefix if kind == "query" else document_prefix
    return [prefix + t for t in texts] if prefix else list(texts)


def encode_by_length(
    inputs: Sequence[str],
    counts: np.ndarray,
    *,
    batch_size: int,
    limit: int,
    encode_batch: Callable[[list[str]], np.ndarray],
    out: np.ndarray,
    kind: str,
) -> EmbeddingStats:
    """Encode ``inputs`` in length-sorted batches into ``out``.

    ``counts`` are the token counts without special tokens, ``limit`` the most content tokens
    the model sees (its max length minus special tokens): tokens beyond it are truncated and
    neither counted in throughput nor silently forgotten (``n_truncated``).
    ``encode_batch`` maps a list of texts to a float array [len, dim].
    """
    if len(counts) != len(inputs):
        raise ValueError(f"{len(counts)} counts for {len(inputs)} texts")
    order = np.argsort(-np.asarray(counts), kind="stable")
    t0 = time.perf_counter()
    desc = "embed queries" if kind == "query" else "embed documents"
    with tqdm(total=len(inputs), desc=desc, unit="text", leave=False,
              disable=len(inputs) <= 1) as bar:
        for b0 in range(0, len(inputs), batch_size):
            idx = order[b0 : b0 + batch_size]
            out[idx] = np.asarray(encode_batch([inputs[i] for i in idx]), dtype=np.float32)
            bar.update(len(idx))
    wall = time.perf_counter() - t0
    return EmbeddingStats(
        n_texts=len(inputs),
        n_tokens=int(np.minimum(counts, limit).sum()),
        wall_s=wall,
        n_truncated=int((np.asarray(counts) > limit).sum()),
    )
