"""Plan operations, expanders and builder of the `rewrite` stage.

Every rewrite is a config searched on the SAME lane and index as its raw query and paired
with it per query (``parent_id``: the raw config; comparisons.parquet pairs each rewrite
with it), so filters, rerankers and answers apply to it like to any other config:

- ``RewriteOp`` (Rocchio, dense): (a dense config's pool, document vectors, query vectors)
  -> rewritten query vectors; ``LABEL>rocchio`` searches them with the run's retriever.
- ``LexicalRewriteOp`` (RM3, lexical): (the BM25 pool, the index, chunks) -> the expanded
  weighted query searched again on the same BM25 index: ``bm25>rm3``.
- ``Bo1RewriteOp`` (Bo1, lexical): the same, with the index's collection statistics
  (``CollectionStatsOp``, an index-time artifact counted once): ``bm25>bo1``.
- ``GenerateRewritesOp`` (HyDE, multi-query): the generator's texts per query, cached as an
  artifact keyed by generator identity, prompt, n, temperature, seed (a sweep downstream
  never regenerates); ``HyDEVectorsOp`` turns them into one query vector searched by the
  retriever; ``MultiQuerySearchOp`` searches the query and each phrasing and merges the
  rankings (RRF or union) before the depth cut.

Each op times its work as latency stages (``rewrite``, ``rewrite_generate``, plus the
second search's own stages), so a rewrite's cost is part of its chain's end-to-end latency;
generated tokens are recorded per query (``rewrites.parquet`` of the artifact, and the
report's rewrite table).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.chunking.base import ChunkTable
from bench.config.build import OptionError
from bench.data.base import Dataset
from bench.embedding.base import Embedder, EmbeddingStats
from bench.embedding.stage import Embeddings
from bench.generation.base import Generation, Generator
from bench.index.stage import IndexArtifact
from bench.lexical.base import LexicalIndex, WeightedLexicalIndex
from bench.lexical.search import LEXICAL_STAGE, LexicalSearch
from bench.pipeline.lanes import ConfigKind, PlanState, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.retrieval.base import Hits, Pool, Retriever, order_key, trec_order
from bench.retrieval.search import DenseSearch
from bench.retrieval.stage import FOLD_STAGE, RETRIEVE_STAGE, RetrieveOp
from bench.rewrite.base import VectorRewriter
from bench.rewrite.bo1 import Bo1Rewriter, CollectionStats
from bench.rewrite.generative import HyDERewriter, MultiQueryRewriter
from bench.rewrite.rm3 import RM3Rewriter
from bench.rewrite.suite import RewriterSuite
from bench.telemetry.base import TimingLog

log = logging.getLogger("bench")

#: the latency stage of rewriting one query
REWRITE_STAGE = "rewrite"
#: rewriters of the lexical lane (the others rewrite dense configs)
LEXICAL_REWRITERS = (RM3Rewriter, Bo1Rewriter)


@dataclass(frozen=True)
class RewriteInputs:
    pool: Pool
    docs: Embeddings
    queries: Embeddings


@dataclass(frozen=True)
class RewriteOp(OpTraits):
    rewriter: VectorRewriter
    stage: str = REWRITE_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = RewriteInputs
    latency_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {"rewriter": self.rewriter.cache_params(), "kind": type(self.rewriter).__name__}

    def _rewrite(self, inputs: RewriteInputs) -> Embeddings:
        hits, docs = inputs.pool.hits, np.asarray(inputs.docs.vectors)
        queries = np.asarray(inputs.queries.vectors)
        out = np.empty_like(queries, dtype=np.float32)
        chunks = hits.chunks()
        for q in range(hits.n_queries):
            s = int(hits.offsets[q])
            e = min(int(hits.offsets[q + 1]), s + self.rewriter.feedback_depth)
            rows = chunks[s:e]
            out[q] = self.rewriter.rewrite(queries[q], docs[rows[rows >= 0]])
        return Embeddings(out, EmbeddingStats(len(out), 0, 0.0, 0))

    def run(self, inputs: RewriteInputs, timing: TimingLog) -> Embeddings:
        with timing.measure("total", inputs.pool.hits.n_queries):
            return self._rewrite(inputs)

    def run_one(self, inputs: RewriteInputs, query: OneQuery, timer: QueryTimer
                ) -> Embeddings:
        with timer.measure(REWRITE_STAGE):
            return self._rewrite(inputs)


# -- RM3 on the lexical lane ------------------------------------------------------------------


@dataclass(frozen=True)
class LexicalRewriteInputs:
    pool: Pool
    index: WeightedLexicalIndex
    chunks: ChunkTable
    data: Dataset


@dataclass(frozen=True)
class LexicalRewriteOp(OpTraits):
    """(the lexical pool, its index, chunks, dataset) -> the Pool of the expanded query
    searched again on the same index (``bench.rewrite.rm3``)."""

    rewriter: RM3Rewriter
    lexical: LexicalIndex
    stage: str = "rewrite_lexical"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = LexicalRewriteInputs
    latency_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE, LEXICAL_STAGE, FOLD_STAGE)
    work_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE, LEXICAL_STAGE, FOLD_STAGE)

    def params(self) -> Mapping[str, Any]:
        return {"rewriter": self.rewriter.cache_params(),
                "lexical": self.lexical.search_params()}

    def expansion(self, inputs: LexicalRewriteInputs, q: int, text: str
                  ) -> list[tuple[str, float]]:
        """Query ``q``'s expanded (term, weight) list from its first-search hits."""
        index = inputs.index
        texts, scores = _feedback(inputs.pool, inputs.chunks, q, self.rewriter.feedback_depth)
        (q_tokens,) = index.analyze([text])
        fb_tokens = index.analyze(texts) if texts else []
        vocab = sorted({t for toks in fb_tokens for t in toks})
        df = dict(zip(vocab, index.doc_freq(vocab).tolist(), strict=True))
        n = max(index.n_chunks, 1)
        return self.rewriter.expand(q_tokens, list(zip(fb_tokens, scores.tolist(),
                                                       strict=True)),
                                    lambda t: df.get(t, 0) / n)

    def run(self, inputs: LexicalRewriteInputs, timing: TimingLog) -> Pool:
        return _search_expanded(self, inputs, timing)

    def run_one(self, inputs: LexicalRewriteInputs, query: OneQuery, timer: QueryTimer
                ) -> Pool:
        return _search_expanded_one(self, inputs, query, timer)


def _feedback(pool: Pool, chunks: ChunkTable, q: int, depth: int
              ) -> tuple[list[str], np.ndarray]:
    """Texts and first-search scores of query ``q``'s first ``depth`` hits (their chunks)."""
    hits = pool.hits
    s = int(hits.offsets[q])
    e = min(int(hits.offsets[q + 1]), s + depth)
    rows = hits.chunks()[s:e]
    scores = hits.scores[s:e]
    keep = rows >= 0
    return [chunks.text[int(r)] for r in rows[keep]], scores[keep]


class _Expands(Protocol):
    @property
    def lexical(self) -> LexicalIndex: ...

    def expansion(self, inputs: Any, q: int, text: str) -> list[tuple[str, float]]: ...


def _search_expanded(op: _Expands, inputs: Any, timing: TimingLog) -> Pool:
    """Every query expanded by ``op`` and searched again on the same lexical index."""
    ds = inputs.data
    search = LexicalSearch.over(inputs.index, inputs.chunks, op.lexical, order_key(ds.doc_ids))
    with timing.measure("total", len(ds.queries)):
        weighted = [op.expansion(inputs, q, query.text) for q, query in enumerate(ds.queries)]
        hits = search.fold(search.search_weighted(weighted))
    return Pool(hits)


def _search_expanded_one(op: _Expands, inputs: Any, query: OneQuery, timer: QueryTimer
                         ) -> Pool:
    weighted = timer.time(REWRITE_STAGE, lambda: op.expansion(inputs, 0, query.text))
    search = LexicalSearch.over(inputs.index, inputs.chunks, op.lexical, query.id_key)
    return Pool(search.fold(search.search_weighted([weighted], timer), timer))


# -- Bo1 on the lexical lane ------------------------------------------------------------------

_STATS_FILE = "collection_stats.parquet"
_STATS_META = "collection_stats.json"


@dataclass(frozen=True)
class CollectionStatsInputs:
    index: WeightedLexicalIndex
    chunks: ChunkTable


@dataclass(frozen=True)
class CollectionStatsOp(OpTraits):
    """(the built lexical index, its chunks) -> ``CollectionStats``: every indexed term's
    collection and document frequency, counted once over the index's own tokens of every
    chunk (the bm25s index keeps precomputed scores, not term counts). Index time: built
    once per index and tokeniser, shared by every query and config."""

    lexical: LexicalIndex
    stage: str = "lexical_stats"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = CollectionStatsInputs

    def params(self) -> Mapping[str, Any]:
        return {"lexical": self.lexical.cache_params()}

    def write(self, inputs: CollectionStatsInputs, directory: Path, timing: TimingLog) -> None:
        with timing.measure("total", len(inputs.chunks)):
            stats = CollectionStats.of(inputs.index.analyze(list(inputs.chunks.text)))
        terms = sorted(stats.cf)
        pq.write_table(pa.table({
            "term": pa.array(terms, pa.string()),
            "cf": pa.array([stats.cf[t] for t in terms], pa.int64()),
            "df": pa.array([stats.df[t] for t in terms], pa.int64())}), directory / _STATS_FILE)
        (directory / _STATS_META).write_text(json.dumps(
            {"n_docs": stats.n_docs, "n_tokens": stats.n_tokens}))

    def load(self, directory: Path, inputs: CollectionStatsInputs) -> CollectionStats:
        t = pq.read_table(directory / _STATS_FILE).to_pydict()
        meta = json.loads((directory / _STATS_META).read_text())
        return CollectionStats(dict(zip(t["term"], t["cf"], strict=True)),
                               dict(zip(t["term"], t["df"], strict=True)),
                               int(meta["n_docs"]), int(meta["n_tokens"]))


@dataclass(frozen=True)
class Bo1Inputs:
    pool: Pool
    index: WeightedLexicalIndex
    chunks: ChunkTable
    data: Dataset
    stats: CollectionStats


@dataclass(frozen=True)
class Bo1RewriteOp(OpTraits):
    """(the lexical pool, its index, chunks, dataset, collection statistics) -> the Pool of
    the Bo1-expanded query searched again on the same index (``bench.rewrite.bo1``)."""

    rewriter: Bo1Rewriter
    lexical: LexicalIndex
    stage: str = "rewrite_bo1"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = Bo1Inputs
    latency_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE, LEXICAL_STAGE, FOLD_STAGE)
    work_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE, LEXICAL_STAGE, FOLD_STAGE)

    def params(self) -> Mapping[str, Any]:
        return {"rewriter": self.rewriter.cache_params(),
                "lexical": self.lexical.search_params()}

    def expansion(self, inputs: Bo1Inputs, q: int, text: str) -> list[tuple[str, float]]:
        """Query ``q``'s expanded (term, weight) list from its first-search hits."""
        texts, _ = _feedback(inputs.pool, inputs.chunks, q, self.rewriter.feedback_depth)
        (q_tokens,) = inputs.index.analyze([text])
        fb_tokens = inputs.index.analyze(texts) if texts else []
        return self.rewriter.expand(q_tokens, fb_tokens, inputs.stats)

    def run(self, inputs: Bo1Inputs, timing: TimingLog) -> Pool:
        return _search_expanded(self, inputs, timing)

    def run_one(self, inputs: Bo1Inputs, query: OneQuery, timer: QueryTimer) -> Pool:
        return _search_expanded_one(self, inputs, query, timer)


# -- generated rewrites: HyDE, multi-query ----------------------------------------------------

#: the latency stage of generating one query's rewrites
GENERATE_STAGE = "rewrite_generate"
_REWRITES_FILE = "rewrites.parquet"


@dataclass(frozen=True)
class Rewrites:
    """The generator's texts per query (dataset order): ``texts[q]`` the parsed search texts
    (failed or empty generations left out), per-query token counts summed over the samples,
    and the samples that failed."""

    texts: tuple[tuple[str, ...], ...]
    prompt_tokens: np.ndarray  # int64 [n_queries]
    output_tokens: np.ndarray  # int64 [n_queries]
    failed: np.ndarray  # int64 [n_queries]: samples whose status was not ok


@dataclass(frozen=True)
class GenerateInputs:
    data: Dataset


def rewrite_tokens(chain: Sequence[Any], dataset: Dataset, query_ids: Sequence[str]
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """(prompt, output) tokens per query (``query_ids`` order) of the generated rewrite in a
    config's resolved chain (``ConfigRun.chain``), or None when it has none (cost stage)."""
    value = next((r.value for r in chain if isinstance(r.node.op, GenerateRewritesOp)), None)
    if not isinstance(value, Rewrites):
        return None
    pos = {q.query_id: i for i, q in enumerate(dataset.queries)}
    rows = [pos.get(q) for q in query_ids]
    return (np.asarray([0 if r is None else value.prompt_tokens[r] for r in rows], np.int64),
            np.asarray([0 if r is None else value.output_tokens[r] for r in rows], np.int64))


def _unmemoised(g: Generator) -> Generator:
    # a served request generates: the memo would replay a stored latency as this one's
    from bench.generation.memo import unmemoised

    return unmemoised(g)


@dataclass(frozen=True)
class GenerateRewritesOp(OpTraits):
    """Dataset -> the rewriter's generated texts for every query (cached artifact)."""

    rewriter: HyDERewriter | MultiQueryRewriter
    stage: str = "rewrite_generate"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = GenerateInputs
    latency_stages: ClassVar[tuple[str, ...]] = (GENERATE_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (GENERATE_STAGE,)

    def params(self) -> Mapping[str, Any]:
        p = dict(self.rewriter.generation_params())
        p["parse"] = self.rewriter.name  # how a generation becomes a search text
        return p

    def _collect(self, gens: Sequence[Generation], n_queries: int) -> Rewrites:
        n = self.rewriter.n
        texts, pt, ot, failed = [], np.zeros(n_queries, np.int64), np.zeros(n_queries,
                                                                          np.int64), []
        for q in range(n_queries):
            mine = gens[q * n:(q + 1) * n]
            ok = [g for g in mine if g.status == "ok"]
            texts.append(tuple(t for t in (self.rewriter.parse(g.text) for g in ok) if t))
            pt[q] = sum(g.prompt_tokens for g in mine)
            ot[q] = sum(g.output_tokens for g in mine)
            failed.append(len(mine) - len(ok))
        return Rewrites(tuple(texts), pt, ot, np.asarray(failed, np.int64))

    def write(self, inputs: GenerateInputs, directory: Path, timing: TimingLog) -> None:
        qs = inputs.data.queries
        reqs = [r for q in qs for r in self.rewriter.requests(q.query_id, q.text)]
        with timing.measure("total", len(reqs)):
            gens = self.rewriter.generator.generate(reqs)
        n = self.rewriter.n
        table = pa.table({
            "query_id": [q.query_id for q in qs for _ in range(n)],
            "sample": [i for _ in qs for i in range(n)],
            "text": [g.text for g in gens], "status": [g.status for g in gens],
            "prompt_tokens": [g.prompt_tokens for g in gens],
            "output_tokens": [g.output_tokens for g in gens],
            "e2e_ms": [g.e2e_ms for g in gens]})
        pq.write_table(table, directory / _REWRITES_FILE)
        for q, g in zip([q for q in qs for _ in range(n)], gens, strict=True):
            if g.status != "ok":
                log.warning("rewrite %s: query %s: generation %s (%s); searched without it",
                            self.rewriter.name, q.query_id, g.status, g.error)

    def load(self, directory: Path, inputs: GenerateInputs) -> Rewrites:
        t = pq.read_table(directory / _REWRITES_FILE).to_pylist()
        gens = [Generation(r["query_id"], r["text"], r["status"], "", r["prompt_tokens"],
                           r["output_tokens"], None, None, r["e2e_ms"]) for r in t]
        return self._collect(gens, len(inputs.data.queries))

    def run_one(self, inputs: GenerateInputs, query: OneQuery, timer: QueryTimer
                ) -> Rewrites:
        gen = _unmemoised(self.rewriter.generator)
        reqs = self.rewriter.requests(query.query.query_id, query.text)
        gens = timer.time(GENERATE_STAGE, lambda: gen.generate(reqs))
        return self._collect(gens, 1)


def _encode(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """One query's texts encoded in one call (the same call batch and per-query paths make,
    so both give the same vectors)."""
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    if texts:
        embedder.encode(list(texts), kind="query", out=out)
    return out


@dataclass(frozen=True)
class HyDEInputs:
    rewrites: Rewrites
    queries: Embeddings


@dataclass(frozen=True)
class HyDEVectorsOp(OpTraits):
    """(generated passages, query vectors) -> one vector per query: the normalised mean of
    the query's vector and its passages' vectors (a query without passages keeps its own)."""

    embedder: Embedder
    stage: str = "rewrite_hyde"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = HyDEInputs
    latency_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {"embedder": self.embedder.cache_params()}

    def _one(self, query: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        vecs = np.vstack([query[None, :], _encode(self.embedder, texts)])
        mean = vecs.astype(np.float64).mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return (mean / norm).astype(np.float32) if norm > 0 else query

    def run(self, inputs: HyDEInputs, timing: TimingLog) -> Embeddings:
        q = np.asarray(inputs.queries.vectors, dtype=np.float32)
        with timing.measure("total", len(q)):
            out = np.stack([self._one(q[i], inputs.rewrites.texts[i]) for i in range(len(q))])
        return Embeddings(out, EmbeddingStats(len(out), 0, 0.0, 0))

    def run_one(self, inputs: HyDEInputs, query: OneQuery, timer: QueryTimer) -> Embeddings:
        q = np.asarray(inputs.queries.vectors, dtype=np.float32)
        with timer.measure(REWRITE_STAGE):
            out = self._one(q[0], inputs.rewrites.texts[0])[None, :]
        return Embeddings(out, EmbeddingStats(1, 0, 0.0, 0))


@dataclass(frozen=True)
class MultiQueryInputs:
    rewrites: Rewrites
    queries: Embeddings
    index: IndexArtifact
    chunks: ChunkTable
    data: Dataset


def _cat(parts: Sequence[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


def merge_rankings(rankings: Sequence[Hits], *, fuse: str, rrf_k: int, k: int,
                   id_key: np.ndarray) -> Hits:
    """One query's rankings (each a one-query ``Hits`` in trec order) merged into its top
    ``k``: ``rrf`` scores a document sum 1 / (rrf_k + rank) over the rankings holding it;
    ``union`` keeps each document at its best score. The chunk behind a document is the one
    of the first ranking that holds it. Ordered like every scored ranking (float32 score
    desc, doc id desc)."""
    score: dict[int, float] = {}
    chunk: dict[int, int] = {}
    for h in rankings:
        for rank, (d, s, c) in enumerate(zip(h.doc_idx.tolist(), h.scores.tolist(),
                                             h.chunks().tolist(), strict=True), start=1):
            chunk.setdefault(d, c)
            if fuse == "rrf":
                score[d] = score.get(d, 0.0) + 1.0 / (rrf_k + rank)
            else:
                score[d] = max(score.get(d, -np.inf), s)
    docs = np.asarray(list(score), dtype=np.int32)
    sc = np.asarray([score[d] for d in score], dtype=np.float32)
    perm = trec_order(docs, sc, id_key)[:k] if len(docs) else np.zeros(0, np.int64)
    return Hits(np.asarray([0, len(perm)], np.int64), docs[perm], sc[perm],
                np.asarray([chunk[int(d)] for d in docs[perm]], dtype=np.int32))


@dataclass(frozen=True)
class MultiQuerySearchOp(OpTraits):
    """(phrasings, query vectors, index, chunks, dataset) -> the merged Pool: the query (when
    ``include_original``) and each phrasing searched at ``query_params``, merged before the
    cut to ``k``."""

    rewriter: MultiQueryRewriter
    embedder: Embedder
    retriever: Retriever
    query_params: Mapping[str, int | float]
    stage: str = "rewrite_multi_query"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = MultiQueryInputs
    latency_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE, RETRIEVE_STAGE, FOLD_STAGE)
    work_stages: ClassVar[tuple[str, ...]] = (REWRITE_STAGE, RETRIEVE_STAGE, FOLD_STAGE)

    def params(self) -> Mapping[str, Any]:
        return {"fuse": self.rewriter.fuse, "rrf_k": self.rewriter.rrf_k,
                "include_original": self.rewriter.include_original,
                "embedder": self.embedder.cache_params(),
                "retriever": self.retriever.cache_params(),
                "query_params": dict(self.query_params)}

    def _one(self, inputs: MultiQueryInputs, query_vec: np.ndarray, texts: Sequence[str],
             id_key: np.ndarray, timer: QueryTimer) -> Hits:
        vecs = timer.time(REWRITE_STAGE, lambda: _encode(self.embedder, texts))
        if self.rewriter.include_original or not len(vecs):
            vecs = np.vstack([query_vec[None, :], vecs])
        folded, _ = DenseSearch.over(inputs.index.built, inputs.chunks, self.retriever,
                                     self.query_params, id_key)(vecs, timer)
        ranks = [folded.take(np.asarray([0, e - s]), np.arange(s, e))
                 for s, e in zip(folded.offsets[:-1].tolist(), folded.offsets[1:].tolist(),
                                 strict=True)]
        return timer.time(REWRITE_STAGE, lambda: merge_rankings(
            ranks, fuse=self.rewriter.fuse, rrf_k=self.rewriter.rrf_k, k=self.retriever.k,
            id_key=id_key))

    def run(self, inputs: MultiQueryInputs, timing: TimingLog) -> Pool:
        ds = inputs.data
        q = np.asarray(inputs.queries.vectors, dtype=np.float32)
        id_key = order_key(ds.doc_ids)
        with timing.measure("total", len(ds.queries)):
            per = [self._one(inputs, q[i], inputs.rewrites.texts[i], id_key, QueryTimer())
                   for i in range(len(q))]
        offsets = np.zeros(len(per) + 1, np.int64)
        np.cumsum([h.doc_idx.size for h in per], out=offsets[1:])
        return Pool(Hits(offsets, _cat([h.doc_idx for h in per], np.int32),
                         _cat([h.scores for h in per], np.float32),
                         _cat([h.chunks() for h in per], np.int32)))

    def run_one(self, inputs: MultiQueryInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        q = np.asarray(inputs.queries.vectors, dtype=np.float32)
        return Pool(self._one(inputs, q[0], inputs.rewrites.texts[0], query.id_key, timer))


# -- expanders --------------------------------------------------------------------------------


def members(s: PlanState) -> dict[str, Any]:
    """The run's rewriters by name (empty with ``rewriter=none``)."""
    suite: RewriterSuite | None = s.comps.get("rewriter")
    return {} if suite is None else dict(suite.members)


def expand(s: PlanState) -> PlanState:
    """After each dense config (not the exact reference), its dense rewrites: ``LABEL>NAME``,
    searched on the same index at the same query-time setting, paired with it."""
    dense = {n: r for n, r in members(s).items()
             if not isinstance(r, LEXICAL_REWRITERS)}
    if not dense:
        return s
    out = []
    for c in s.configs:
        out.append(c)
        if c.kind is not ConfigKind.DENSE or c.reference:
            continue
        first = c.leaf
        assert isinstance(first.op, RetrieveOp)
        for name, rw in dense.items():
            label = f"{c.label}>{name}"
            params = {**c.params, "rewriter": name, **_shown(rw)}
            out.append(lane(label, ConfigKind.DENSE, _dense_node(s, c.label, first, name, rw),
                            params, parent_id=c.config_id))
    return s.with_configs(out)


def _shown(rw: Any) -> dict[str, object]:
    """A rewriter's options as config params (the generator block by its identity)."""
    p = dict(rw.cache_params())
    if "generator" in p:
        g = p.pop("generator")
        p["generator"] = (g.get("model") if isinstance(g, Mapping) else None) or str(g)
    return p


def _dense_node(s: PlanState, raw: str, first: Node, name: str, rw: Any) -> Node:
    label = f"{raw}>{name}"
    retrieve = dict(index=first.input("index"), chunks=first.input("chunks"),
                    data=first.input("data"))
    op = first.op
    assert isinstance(op, RetrieveOp)
    if isinstance(rw, HyDERewriter | MultiQueryRewriter):
        texts = Node.of(GenerateRewritesOp(rw), f"{name} texts", data=s.node("data"))
        if isinstance(rw, MultiQueryRewriter):
            return Node.of(MultiQuerySearchOp(rw, s.comps.embedder, op.retriever,
                                              op.query_params), label, rewrites=texts,
                           queries=first.input("queries"), **retrieve)
        vectors = Node.of(HyDEVectorsOp(s.comps.embedder), f"{name} vectors", rewrites=texts,
                          queries=first.input("queries"))
    else:
        vectors = Node.of(RewriteOp(rw), f"{name} of {raw}", pool=first,
                          docs=s.node("embed_docs"), queries=first.input("queries"))
    return Node.of(RetrieveOp(op.retriever, op.query_params, s.device), label,
                   queries=vectors, **retrieve)


def expand_lexical(s: PlanState) -> PlanState:
    """After the BM25 config, each lexical rewrite (RM3, Bo1): ``bm25>NAME``, paired with
    it. Bo1 reads the index's collection statistics, one index-time node for all of them."""
    lexical = {n: r for n, r in members(s).items() if isinstance(r, LEXICAL_REWRITERS)}
    lex = s.comps.lexical
    if not lexical or lex is None or "lexical" not in s.nodes:
        return s
    search = s.node("lexical")
    feedback = dict(pool=search, index=search.input("index"), chunks=search.input("chunks"),
                    data=search.input("data"))
    stats = (Node.of(CollectionStatsOp(lex), "collection statistics",
                     index=search.input("index"), chunks=search.input("chunks"))
             if any(isinstance(rw, Bo1Rewriter) for rw in lexical.values()) else None)
    out = []
    for c in s.configs:
        out.append(c)
        if c.leaf.key != search.key:
            continue
        for name, rw in lexical.items():
            label = f"{c.label}>{name}"
            if isinstance(rw, Bo1Rewriter):
                assert stats is not None
                node = Node.of(Bo1RewriteOp(rw, lex), label, stats=stats, **feedback)
            else:
                node = Node.of(LexicalRewriteOp(rw, lex), label, **feedback)
            out.append(lane(label, ConfigKind.LEXICAL, node,
                            {**c.params, "rewriter": name, **rw.cache_params()},
                            parent_id=c.config_id))
    return s.with_configs(out)


# -- builder ----------------------------------------------------------------------------------

#: keys of a rewriter block that belong to the decision, not to a rewriter's options
DECISION_KEYS = ("min_gain", "low_confidence_quantile", "in_domain", "domain_map")


def build(cfg: Any, device: str) -> dict[str, Any]:
    """The ``rewriter`` group as a ``RewriterSuite`` (a single option is a suite of one):
    its generator block (``rewriter.generator``) built once and shared by the generative
    members (behind the prompt memo when ``generation.memo``), each member built like an
    option, the decision settings checked — all before any work."""
    from bench.config.build import build as build_option
    from bench.config.build import target_of, to_container
    from bench.errors import ConfigError

    node = dict(to_container(cfg.rewriter))
    gen_node = node.pop("generator", None)
    decision = {k: node.pop(k) for k in DECISION_KEYS if k in node}
    listed = node.pop("rewriters", None)
    cls = target_of(node, "rewriter")
    if cls is None and listed is None:
        if gen_node is not None or decision:
            key = "generator" if gen_node is not None else next(iter(decision))
            raise ConfigError(f"rewriter.{key}", "unknown option: this stage is disabled "
                                                 "(`_target_: null`), pick an option first")
        return {"rewriter": None}
    generator = None
    if gen_node is not None:
        generator = build_option(gen_node, "rewriter.generator")
        if generator is not None and cfg.generation.memo:
            from bench.generation.memo import memoised

            generator = memoised(generator, cfg.cache_dir)
    if listed is not None:
        if cls is not RewriterSuite:
            raise ConfigError("rewriter.rewriters", "only rewriter=query_rewrite (a suite) "
                                                    "lists rewriters")
        if not isinstance(listed, Mapping) or not listed:
            raise ConfigError("rewriter.rewriters", "must map names to rewriter options")
        specs = {str(k): v for k, v in listed.items()}
    else:
        # every rewriter class names itself (``name``: rocchio, rm3, bo1, hyde, multi_query)
        assert cls is not None
        specs = {str(cls.name): node}  # type: ignore[attr-defined]
    built: dict[str, Any] = {}
    for name, spec in specs.items():
        key = f"rewriter.rewriters.{name}" if listed is not None else "rewriter"
        member_cls = target_of(spec, key)
        if member_cls is None:
            raise ConfigError(f"{key}._target_", "a listed rewriter must name a class")
        if issubclass(member_cls, HyDERewriter | MultiQueryRewriter):
            if generator is None:
                raise ConfigError("rewriter.generator",
                                  f"{name} generates text: give a generator block "
                                  "(+generator@rewriter.generator=transformers_cpu)")
            built[name] = build_option(spec, key, generator=generator)
        else:
            built[name] = build_option(spec, key)
    if listed is not None:
        suite = build_option({**node, **decision}, "rewriter", members=built)
    else:
        try:
            suite = RewriterSuite(members=built, **decision)
        except OptionError as exc:
            raise ConfigError(f"rewriter.{exc.option}", exc.message) from None
    return {"rewriter": suite}
