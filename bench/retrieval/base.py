"""Records and Protocol of the `retrieval` stage.

``Hits`` is the candidate pool every later stage works on (fusion, filters, rerank, context):
CSR over queries, doc ids as int32 ``doc_idx`` into the corpus, scores float32, each query's
slice ordered by the trec_eval rule (score desc, external doc id desc on ties) so metrics in
the pipeline equal those of the exported TREC run file. Pools are cached: rerank depths and
fusion weights are swept on them without searching again.

Adding a retriever: implement ``Retriever`` in a module here (``fold_chunks`` turns
chunk-level results into document ``Hits``); add ``conf/retriever/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.index.base import BuiltIndex, SearchResult
from bench.pipeline.statuses import merge_statuses, unvalued
from bench.telemetry.base import TimingLog

HITS_SCHEMA = pa.schema(
    [
        pa.field("query_idx", pa.int32(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("doc_idx", pa.int32(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
        # the chunk (row of the chunk table) that produced the hit; -1 = unknown
        pa.field("chunk_idx", pa.int32(), nullable=False),
    ]
)


@dataclass(frozen=True)
class Hits:
    """A candidate pool. ``chunk_idx`` is the chunk that produced each hit (rerankers and
    prompts need passages, not just document ids); -1 where a pool does not know it."""

    offsets: np.ndarray  # int64 [n_queries + 1]
    doc_idx: np.ndarray  # int32
    scores: np.ndarray  # float32
    chunk_idx: np.ndarray | None = None  # int32, aligned with doc_idx

    def chunks(self) -> np.ndarray:
        """int32 chunk of every hit (-1 where unknown)."""
        if self.chunk_idx is None:
            return np.full(len(self.doc_idx), -1, dtype=np.int32)
        return self.chunk_idx

    def take(self, offsets: np.ndarray, rows: np.ndarray, scores: np.ndarray | None = None
             ) -> Hits:
        """A new pool of the hits at ``rows`` (chunks travel with their hits)."""
        return Hits(offsets=offsets, doc_idx=self.doc_idx[rows],
                    scores=self.scores[rows] if scores is None else scores,
                    chunk_idx=None if self.chunk_idx is None else self.chunk_idx[rows])

    @property
    def n_queries(self) -> int:
        return len(self.offsets) - 1

    def for_query(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        s, e = self.offsets[q], self.offsets[q + 1]
        return self.doc_idx[s:e], self.scores[s:e]

    def save(self, path: Path) -> None:
        counts = np.diff(self.offsets)
        qidx = np.repeat(np.arange(self.n_queries, dtype=np.int32), counts)
        starts = np.repeat(self.offsets[:-1], counts)
        rank = (np.arange(len(self.doc_idx)) - starts + 1).astype(np.int32)
        table = pa.table(
            {"query_idx": qidx, "rank": rank, "doc_idx": self.doc_idx, "score": self.scores,
             "chunk_idx": self.chunks()},
            schema=HITS_SCHEMA,
        )
        pq.write_table(table, path)

    @classmethod
    def load(cls, path: Path, n_queries: int) -> Hits:
        t = pq.read_table(path, schema=HITS_SCHEMA)
        qidx = t["query_idx"].to_numpy()
        offsets = np.zeros(n_queries + 1, dtype=np.int64)
        np.cumsum(np.bincount(qidx, minlength=n_queries), out=offsets[1:])
        return cls(offsets, t["doc_idx"].to_numpy(), t["score"].to_numpy(),
                   t["chunk_idx"].to_numpy())


@dataclass(frozen=True)
class Pool:
    """The candidates one chain hands downstream: document ``hits`` (with the chunk behind
    each hit) and, for a dense search, the chunk-level top columns kept for ANN recall."""

    hits: Hits
    chunk_result: SearchResult | None = None
    #: per query id, the status its retrieval metrics carry when not ``scored``
    #: (``bench.pipeline.statuses.QueryStatuses``): valued (an iterative loop's
    #: ``budget_exhausted``: scored on the evidence it had, and counted) or not (``failed`` /
    #: ``timeout`` / ``invalid``: no ranking, e.g. a served system's request did not
    #: complete). None: every query scored
    status: Mapping[str, str] | None = field(default=None, kw_only=True)

    @property
    def incomplete(self) -> dict[str, str] | None:
        """The queries without a ranking and why (None: none)."""
        return unvalued(self.status) or None

    def statuses(self, *others: Pool, lost: Mapping[str, str] | None = None
                 ) -> dict[str, Any]:
        """The per-query statuses a pool made from this one (and ``others``: a fusion's
        second input) carries, as keyword arguments of ``Pool`` (``merge_statuses``: a query
        without a ranking upstream has none downstream either); ``lost`` adds this stage's
        own (a rerank request that failed)."""
        merged = merge_statuses(self.status, *(p.status for p in others), lost)
        return {"status": merged or None}


def order_key(doc_ids: Sequence[str]) -> np.ndarray:
    """int rank of each external id in ascending UTF-8 byte order (for trec_eval tie-breaks)."""
    encoded = np.asarray([d.encode("utf-8") for d in doc_ids], dtype=object)
    order = np.argsort(np.asarray(encoded, dtype=np.bytes_), kind="stable")
    key = np.empty(len(doc_ids), dtype=np.int64)
    key[order] = np.arange(len(doc_ids))
    return key


def trec_order(doc_idx: np.ndarray, scores: np.ndarray, id_key: np.ndarray) -> np.ndarray:
    """Permutation ordering one ranking by float32 score desc, then doc id desc (trec_eval)."""
    return np.lexsort((-id_key[doc_idx], -scores.astype(np.float32)))


class Retriever(Protocol):
    """Query-time search over a built vector index (build options live in the index)."""

    k: int

    def cache_params(self) -> dict[str, object]: ...

    def depth(self, n_chunks: int) -> int:
        """Chunks fetched per query before folding into ``k`` documents."""
        ...

    def search(self, index: BuiltIndex, query_vectors: np.ndarray,
               params: Mapping[str, int | float], *, n_chunks: int, timing: TimingLog,
               sync_cuda: bool = False, query_ids: Sequence[str] | None = None
               ) -> SearchResult:
        """Chunk-level top-``depth`` per query, recording timing samples in ``timing``
        (single-query samples carry ``query_ids[i]``)."""
        ...

    def fold(self, result: SearchResult, chunk_doc: np.ndarray, id_key: np.ndarray) -> Hits:
        """Chunk results -> the top-``k`` documents per query."""
        ...


def fold_chunks(result: SearchResult, chunk_doc: np.ndarray, id_key: np.ndarray, *, k: int) -> Hits:
    """Chunk-level top lists -> document ``Hits``: a document ranks at its best chunk (first
    occurrence keeps its rank), then the trec_eval order, cut at ``k`` documents.
    ``result.ids`` are chunk rows (-1 = empty slot); ``chunk_doc[c]`` is chunk c's doc_idx."""
    offsets = [0]
    out_docs: list[np.ndarray] = []
    out_scores: list[np.ndarray] = []
    out_chunks: list[np.ndarray] = []
    for ids, scores in zip(result.ids, result.scores, strict=True):
        valid = ids >= 0
        ids, scores = ids[valid], scores[valid]
        order = np.argsort(-scores, kind="stable")
        docs = chunk_doc[ids[order]]
        _, first = np.unique(docs, return_index=True)
        keep = order[np.sort(first)]
        d = chunk_doc[ids[keep]].astype(np.int32)
        s = scores[keep].astype(np.float32)
        perm = trec_order(d, s, id_key)[:k]
        out_docs.append(d[perm])
        out_scores.append(s[perm])
        out_chunks.append(ids[keep][perm].astype(np.int32))
        offsets.append(offsets[-1] + len(perm))
    return Hits(
        offsets=np.asarray(offsets, dtype=np.int64),
        doc_idx=np.concatenate(out_docs) if out_docs else np.zeros(0, np.int32),
        scores=np.concatenate(out_scores) if out_scores else np.zeros(0, np.float32),
        chunk_idx=np.concatenate(out_chunks) if out_chunks else np.zeros(0, np.int32),
    )
