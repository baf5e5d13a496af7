"""One config's query-time chain, run for ONE query: the unit of budget probes and capacity.

``QueryChain(spec, comps, executor, dataset, device)`` resolves the index-time nodes of the
config's chain through the executor (chunks, document embeddings, the vector / lexical /
passage indexes: built once, shared) and, per call ``chain(q)``, runs the query-time nodes on
query ``q`` alone, timing each:

- ``embed_query``: the embedder encodes the query text (a serving system does this per
  request; the full run embeds every query in one batch, which is why its e2e omits it);
- ``retrieve``: the index search at the config's query setting; ``fold``: chunks -> documents;
- ``lexical``: BM25 search of the query text (and its fold);
- ``fusion``, ``filters``: the stage's own op on one-query pools;
- ``rerank``: the reranker scores the query's first ``depth`` candidates (the config's depth,
  through the passage index when the reranker has one); ``rerank_cut``: the reorder.

The per-depth latency node of a reranker is a measurement, not serving work: skipped.
``chain(q)`` returns ``(stage -> ms, the config's pool for the query)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.capacity.base import RequestTiming
from bench.data.base import Dataset
from bench.embedding.stage import encode_one_query
from bench.pipeline.components import Components
from bench.pipeline.executor import Executor
from bench.pipeline.node import Node
from bench.pipeline.plan import ConfigSpec
from bench.rerank.stage import RerankScores, score_query
from bench.retrieval.base import Pool, fold_chunks, order_key
from bench.telemetry.base import TimingLog, cuda_sync

#: nodes computed at index time (resolved once through the executor, shared by configs)
INDEX_TIME = ("chunk", "chunk_stats", "embed_docs", "index", "exact_topk", "lexical_index",
              "rerank_index")


class QueryChain:
    def __init__(self, spec: ConfigSpec, comps: Components, executor: Executor,
                 dataset: Dataset, device: str) -> None:
        self.spec = spec
        self.comps = comps
        self.dataset = dataset
        self.device = device
        self.id_key = order_key(dataset.doc_ids)
        self.chain: list[Node] = spec.chain
        self._fixed: dict[str, Any] = {}
        for n in self.chain:
            if n.stage in INDEX_TIME:
                self._fixed[n.key] = executor.value(n)

    def _timed(self, times: dict[str, float], stage: str, fn: Callable[[], Any]) -> Any:
        cuda = self.device == "cuda"
        if cuda:
            cuda_sync()
        t0 = time.perf_counter()
        out = fn()
        if cuda:
            cuda_sync()
        times[stage] = times.get(stage, 0.0) + (time.perf_counter() - t0) * 1000.0
        return out

    def __call__(self, q: int) -> tuple[dict[str, float], Any]:
        query = self.dataset.queries[q]
        one = Dataset(self.dataset.name, self.dataset.documents, (query,),
                      fingerprint=self.dataset.fingerprint)
        times: dict[str, float] = {}
        vals: dict[str, Any] = dict(self._fixed)
        for n in self.chain:
            if n.key in vals:
                continue
            vals[n.key] = self._run(n, [vals.get(i.key) for i in n.inputs], one, times)
        return times, vals[self.chain[-1].key]

    def request(self, i: int) -> RequestTiming:
        """Capacity driver: request i is query ``i mod n_queries``'s whole chain."""
        t0 = time.perf_counter()
        self(i % len(self.dataset.queries))
        return RequestTiming((time.perf_counter() - t0) * 1000.0)

    def _run(self, n: Node, inputs: list[Any], one: Dataset, times: dict[str, float]) -> Any:
        stage, op = n.stage, n.op
        text = one.queries[0].text
        if stage == "data":
            return one
        if stage == "embed_queries":
            emb = self.comps.embedder
            return self._timed(times, "embed_query", lambda: encode_one_query(emb, text))
        if stage == "retrieve":
            index, vec, chunks, _ = inputs
            ret = self.comps.retriever
            depth = ret.depth(len(chunks))
            res = self._timed(times, "retrieve",
                              lambda: index.built.search(vec, depth, op.query_params))
            hits = self._timed(times, "fold",
                               lambda: ret.fold(res, chunks.doc_idx, self.id_key))
            return Pool(hits, res)
        if stage == "lexical":
            built, chunks, _ = inputs
            lex = op.lexical
            depth = lex.depth(len(chunks))
            res = self._timed(times, "lexical", lambda: built.search([text], depth))
            hits = self._timed(times, "fold", lambda: fold_chunks(
                res, chunks.doc_idx, self.id_key, k=lex.k))
            return Pool(hits)
        if stage == "rerank_scores":
            return inputs  # scored at the cut, at the config's own depth
        if stage == "rerank":
            return None  # the per-depth latency measurement: not serving work
        if stage == "rerank_cut":
            (_pool, chunks, _, *index), pool_in, _lat, data = inputs
            reranker = self.comps.reranker
            assert reranker is not None
            hits = pool_in.hits
            scores = self._timed(times, "rerank", lambda: score_query(
                reranker, index[0] if index else None, text, hits, chunks, data, 0,
                op.depth))
            rs = RerankScores(np.asarray([0, len(scores)], dtype=np.int64), scores)
            return self._timed(times, "rerank_cut",
                               lambda: op.run([rs, pool_in, None, data], TimingLog(stage)))
        if stage in ("fusion", "filters"):
            return self._timed(times, stage, lambda: op.run(inputs, TimingLog(stage)))
        raise ValueError(f"no per-query runner for stage {stage!r}")


def chain_for(spec: ConfigSpec, comps: Components, executor: Executor, dataset: Dataset,
              device: str) -> QueryChain:
    return QueryChain(spec, comps, executor, dataset, device)
