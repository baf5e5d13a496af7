"""Length-sorted batching shared by every embedder backend.

Texts are sorted longest first (fewer pad tokens per batch, and an out-of-memory batch shows up
at once rather than at the end), encoded batch by batch and scattered back to input order
directly into the output array, which may be a memory-map: a 1M-chunk corpus never holds more
than one batch of activations plus the vectors on disk.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from tqdm.auto import tqdm

from bench.data.table import TextColumn
from bench.embedding.base import EmbeddingStats

KINDS = ("document", "query")

T = TypeVar("T")


@dataclass(frozen=True)
class TokenIds:
    """Many texts' token ids, tokenised once: text i's first ``keep`` ids are
    ``flat[offsets[i]:offsets[i + 1]]``; ``counts[i]`` is its full count (before the cut),
    for length sorting and truncation statistics. Flat arrays (uint16 when the vocabulary
    fits) rather than per-text lists: a 1M-chunk corpus's ids fit in a few hundred MB."""

    flat: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray

    def row(self, i: int) -> np.ndarray:
        return self.flat[self.offsets[i] : self.offsets[i + 1]]


def tokenize_once(texts: Sequence[str], encode_block: Callable[[list[str]], list[list[int]]],
                  *, keep: int, vocab_size: int, block: int = 4096) -> TokenIds:
    """``TokenIds`` of ``texts``, keeping each text's first ``keep`` ids. ``encode_block`` maps
    a list of texts to their id lists (no special tokens, no truncation); it is called on
    blocks of ``block`` texts, so only one block's Python lists are alive at a time."""
    dtype = np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    counts = np.zeros(len(texts), dtype=np.int64)
    parts: list[np.ndarray] = []
    for b0 in range(0, len(texts), block):
        lists = encode_block(list(texts[b0 : b0 + block]))
        counts[b0 : b0 + len(lists)] = [len(ids) for ids in lists]
        parts.append(np.fromiter(itertools.chain.from_iterable(ids[:keep] for ids in lists),
                                 dtype=dtype))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.minimum(counts, keep), out=offsets[1:])
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    return TokenIds(flat, offsets, counts)


def merge_stats(parts: Sequence[EmbeddingStats]) -> EmbeddingStats:
    """One pass's statistics from its blocks' (encoded one after the other): counts and
    seconds add up, the length limit is the blocks' own."""
    cut = [p.n_truncated_tokens for p in parts]
    return EmbeddingStats(
        n_texts=sum(p.n_texts for p in parts), n_tokens=sum(p.n_tokens for p in parts),
        wall_s=sum(p.wall_s for p in parts), n_truncated=sum(p.n_truncated for p in parts),
        n_truncated_tokens=None if any(c is None for c in cut) else sum(c or 0 for c in cut),
        max_tokens=parts[0].max_tokens if parts else None)


def with_prefix(texts: Sequence[str], *, kind: str, query_prefix: str,
                document_prefix: str) -> Sequence[str]:
    """The model inputs for ``kind``: each text with that kind's prefix. Without a prefix, a
    ``TextColumn`` (a memory-mapped chunk table's texts) is passed on as it is, its slices
    being lists: the corpus pass never holds every text as a Python string."""
    if kind not in KINDS:
        raise ValueError(f"kind must be document|query, got {kind!r}")
    prefix = query_prefix if kind == "query" else document_prefix
    if prefix:
        return [prefix + t for t in texts]
    return texts if isinstance(texts, TextColumn) else list(texts)


def length_order(counts: np.ndarray) -> np.ndarray:
    """The order ``encode_by_length`` encodes texts of these token counts in: longest first,
    ties in input order."""
    return np.argsort(-np.asarray(counts), kind="stable")


def encode_by_length(
    inputs: Sequence[T],
    counts: np.ndarray,
    *,
    batch_size: int,
    limit: int,
    encode_batch: Callable[[list[T]], np.ndarray],
    out: np.ndarray,
    kind: str,
) -> EmbeddingStats:
    """Encode ``inputs`` in length-sorted batches into ``out``.

    ``inputs`` are texts, or any handle on them (row numbers into ``TokenIds`` for a backend
    that tokenised once). ``counts`` are the token counts without special tokens, ``limit``
    the most content tokens the model sees (its max length minus special tokens): tokens
    beyond it are truncated and neither counted in throughput nor silently forgotten
    (``n_truncated``). ``encode_batch`` maps a list of inputs to a float array [len, dim].
    """
    if len(counts) != len(inputs):
        raise ValueError(f"{len(counts)} counts for {len(inputs)} texts")
    order = length_order(counts)
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
        n_truncated_tokens=int(np.maximum(np.asarray(counts) - limit, 0).sum()),
        max_tokens=int(limit),
    )
