"""Records, Protocol and shared helpers of the `fusion` stage.

Fusion reads two cached document pools (``bench.retrieval.base.Hits``), the dense one and the
lexical one, and returns one fused ``Hits``. A ``Fusion`` lists its ``variants`` (RRF k values,
convex alpha x normalisation): every variant is applied to the SAME two pools, so sweeping
fusion weights never searches again (STYLE point 3).

Ranks and ordering (docs/metrics.md "Fusion and filters"): each input lane is first put in trec_eval
order (float32 score desc, external doc id desc); rank 1 is its first document. The fused
ranking of every query is ordered by the same rule on the fused float32 score, so pipeline
metrics equal those of the exported TREC run file. ``id_key[doc_idx]`` is the byte-order rank
of the external id (``bench.retrieval.base.order_key``): higher key = larger id.

Adding a fusion: implement ``Fusion`` in a module here (keyword-only constructor options that
list the swept values; raise ``OptionError`` for bad ones), build its output with
``ranked_hits``, add ``conf/fusion/<name>.yaml``. ``conf/fusion/none.yaml`` disables the stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from bench.config.build import OptionError
from bench.retrieval.base import Hits


@dataclass(frozen=True)
class FusionVariant:
    """One fusion setting: ``name`` for reports ("rrf(k=60)"), ``params`` as (option, value)."""

    name: str
    params: tuple[tuple[str, float | str], ...]

    def param(self, option: str) -> float | str:
        """The value of ``option``; KeyError if the variant has none (a variant of another
        fusion was passed)."""
        for name, value in self.params:
            if name == option:
                return value
        raise KeyError(f"fusion variant {self.name!r} has no parameter {option!r}")


class Fusion(Protocol):
    def variants(self) -> list[FusionVariant]:
        """The settings to sweep, each applied to the same two pools."""
        ...

    def fuse(
        self, dense: Hits, sparse: Hits, variant: FusionVariant, *, id_key: np.ndarray, k: int
    ) -> Hits:
        """Fuse two pools over the same queries into the top-``k`` documents per query.

        ``dense`` / ``sparse``: document ``Hits`` (int32 ``doc_idx`` into the corpus);
        ``id_key``: int64 [n_docs] byte-order rank of each document's external id (tie-break).
        Returns float32-scored ``Hits`` in trec_eval order, at most ``k`` docs per query.
        """
        ...


@dataclass(frozen=True)
class Lane:
    """One input pool flattened to rows in trec_eval order: query, doc, score, rank (from 1)."""

    query: np.ndarray  # int64
    doc: np.ndarray  # int64
    score: np.ndarray  # float32
    rank: np.ndarray  # int64, 1-based within the query


def trec_perm(
    query: np.ndarray, doc: np.ndarray, score: np.ndarray, id_key: np.ndarray, n_queries: int
) -> np.ndarray:
    """Permutation sorting rows by query, then float32 score desc, then doc id desc.

    One packed uint64 sort key when query, score and id bits fit in 64 (a plain argsort is
    several times faster than a three-key ``np.lexsort`` on millions of rows); otherwise a
    two-key lexsort on (query, packed score + id).
    """
    f32 = np.asarray(score, dtype=np.float32) + np.float32(0.0)  # -0.0 -> +0.0: they tie
    if np.isnan(f32).any():
        raise ValueError("a score is NaN: the ranking is undefined")
    bits = f32.view(np.uint32).astype(np.uint64)
    # IEEE bits -> unsigned key with the float order: flip all bits of negatives, the sign
    # bit of the rest; then invert so that ascending key = descending score
    ordered = np.where(bits & 0x80000000, bits ^ 0xFFFFFFFF, bits | 0x80000000)
    score_desc = np.uint64(0xFFFFFFFF) - ordered
    key = id_key[doc]
    top = int(key.max()) if key.size else 0
    if key.size and int(key.min()) < 0:
        raise ValueError("id_key must be non-negative (bench.retrieval.base.order_key)")
    id_bits = max(1, top.bit_length())
    id_desc = np.uint64(top) - key.astype(np.uint64)
    low = (score_desc << np.uint64(id_bits)) | id_desc
    if n_queries.bit_length() + 32 + id_bits <= 64:
        q = np.asarray(query).astype(np.uint64) << np.uint64(32 + id_bits)
        return np.argsort(q | low, kind="stable")
    return np.lexsort((low, query))


def lane(hits: Hits, id_key: np.ndarray, n_queries: int, what: str) -> Lane:
    """``hits`` in trec_eval order per query, with 1-based ranks.

    Re-sorting is cheap and makes the ranks correct even for a pool stored in another order
    (``bench.metrics.engine.rrf`` ranks its inputs the same way). A document listed twice for
    one query has no single rank: that is a bug upstream, raised as ValueError.
    """
    if hits.n_queries != n_queries:
        raise ValueError(f"{what} pool has {hits.n_queries} queries, expected {n_queries}")
    counts = np.diff(hits.offsets)
    query = np.repeat(np.arange(n_queries, dtype=np.int64), counts)
    doc = hits.doc_idx.astype(np.int64)
    score = hits.scores.astype(np.float32)
    pairs = np.sort(query * len(id_key) + doc)
    if np.any(pairs[1:] == pairs[:-1]):
        raise ValueError(f"{what} pool lists a document twice for one query")
    order = trec_perm(query, doc, score, id_key, n_queries)
    query, doc, score = query[order], doc[order], score[order]
    starts = np.repeat(hits.offsets[:-1].astype(np.int64), counts)
    rank = np.arange(len(doc), dtype=np.int64) - starts + 1
    return Lane(query=query, doc=doc, score=score, rank=rank)


def ranked_hits(
    query: np.ndarray,
    doc: np.ndarray,
    score: np.ndarray,
    id_key: np.ndarray,
    *,
    n_queries: int,
    k: int,
) -> Hits:
    """Rows (query, doc, score) -> ``Hits``: per query, float32 score desc, doc id desc, cut at
    ``k``. Scores are rounded to float32 BEFORE ordering: that is what the exported run holds
    and what trec_eval compares."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    score = np.asarray(score).astype(np.float32)
    order = trec_perm(query, doc, score, id_key, n_queries)
    query, doc, score = query[order], doc[order], score[order]
    counts = np.bincount(query, minlength=n_queries)
    starts = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    position = np.arange(len(doc), dtype=np.int64) - starts[query]
    keep = position < k
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(np.minimum(counts, k), out=offsets[1:])
    return Hits(
        offsets=offsets,
        doc_idx=doc[keep].astype(np.int32),
        scores=score[keep],
    )


def union(lanes: Sequence[Lane], n_docs: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The (query, doc) pairs present in any lane, and where each lane's rows fall in them.

    Returns (query, doc, slots): ``slots[j][i]`` is the union position of row i of lane j.
    """
    keys = np.concatenate([ln.query * n_docs + ln.doc for ln in lanes])
    pairs, inverse = np.unique(keys, return_inverse=True)
    bounds = np.cumsum([0, *(len(ln.doc) for ln in lanes)])
    slots = [inverse[bounds[j] : bounds[j + 1]] for j in range(len(lanes))]
    return pairs // n_docs, pairs % n_docs, slots


def check_unique(option: str, values: Sequence[object]) -> None:
    """Options listing swept values: non-empty, no repeats (a repeat would duplicate a variant
    name in the reports)."""
    if len(values) == 0:
        raise OptionError(option, "must list at least one value")
    if len(set(values)) != len(values):
        raise OptionError(option, f"lists a value twice: {list(values)}")
