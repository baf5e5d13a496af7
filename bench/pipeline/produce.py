"""Produce the candidate lanes of a run: chunk, embed, index, search (dense, BM25), fuse.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np

from bench.budget.base import BudgetDecision, ProbeMeasurement
from bench.data.base import Dataset
from bench.index.base import BuiltIndex, SearchResult
from bench.pipeline import stages
from bench.pipeline.context import Components, RunContext
from bench.pipeline.lanes import Lane, Ops, config_id, label_of, ops_from
from bench.retrieval.base import Hits, order_key
from bench.telemetry.base import TimingLog
from bench.telemetry.basic import peak_rss_bytes

log = logging.getLogger("bench")

#: ANN recall is reported at these cutoffs (chunk level, vs the exact flat search)
ANN_RECALL_K = (10, 100)


def produce_lanes(ctx: RunContext, dataset: Dataset) -> list[Lane]:
    comps, store, device, tel = ctx.comps, ctx.store, ctx.device, ctx.telemetry
    with tel.watch("chunk"):
        chunks, n_chunk = stages.chunk_node(store, dataset, comps.chunker, comps.embedder, device)
    with tel.watch("chunk_stats"):
        ctx.chunk_report, n_cs = stages.chunk_stats_node(store, dataset, chunks, n_chunk.key)
    with tel.watch("embed_docs"):
        doc_vecs, doc_stats, n_emb = stages.embed_node(
            store, "embed_docs", chunks.text, "document", comps.embedder, n_chunk.key, device)
    with tel.watch("embed_queries"):
        q_vecs, _, n_qemb = stages.embed_node(
            store, "embed_queries", [q.text for q in dataset.queries], "query", comps.embedder,
            dataset.fingerprint, device)
    with tel.watch("index"):
        built, info, n_idx = stages.index_node(store, comps.index, doc_vecs, n_emb.key, device)
    ctx.nodes.update({"chunk": n_chunk, "chunk_stats": n_cs, "embed_docs": n_emb,
                      "embed_queries": n_qemb, "index": n_idx})
    ctx.embedding_stats, ctx.n_chunks, ctx.build_info = doc_stats, len(chunks), info
    shared = [t for n in ctx.nodes.values() for t in n.timings]
    id_key = order_key(dataset.doc_ids)
    exact: SearchResult | None = None
    if not comps.index.exact:
        with tel.watch("exact_topk"):
            exact, n_ex = stages.exact_node(store, doc_vecs, q_vecs,
                                            min(stages.ANN_COLUMNS, len(chunks)),
                                            [n_emb.key, n_qemb.key], device)
        ctx.nodes["exact_topk"] = n_ex
    lanes: list[Lane] = []
    for qp in comps.index.query_params():
        label = label_of("dense", qp)
        cid = config_id(ctx.pipeline, label)
        if comps.budget is not None:
            decision = probe(comps, built, info.index_bytes, q_vecs, qp, len(chunks), device)
            log.info("budget %s %s: %s — %s", cid, label,
                     "keep" if decision.keep else "PRUNED", decision.reason)
            if not decision.keep:
                ctx.pruned.append((cid, label, decision.reason, dict(qp)))
                continue
        with tel.watch("retrieve"):
            hits, chunk_res, n_ret = stages.retrieve_node(
                store, comps.retriever, built, qp, q_vecs, chunks, id_key,
                [n_idx.key, n_qemb.key, n_chunk.key], device)
        ctx.nodes[f"retrieve[{label}]"] = n_ret
        extra = {}
        if exact is not None:
            extra = ann_recall(chunk_res, exact, doc_vecs, q_vecs)
        ops = replace(ops_from(n_ret.timings, "retrieve"), build_s=info.build_s,
                      index_bytes=info.index_bytes)
        lanes.append(Lane(cid, label, "dense", dict(qp), hits,
                          (*ctx.base_timings, *shared, *n_ret.timings), ops, extra))
    if comps.lexical is not None:
        with tel.watch("lexical"):
            sparse, n_lb, n_ls = stages.lexical_nodes(
                store, comps.lexical, chunks, n_chunk.key, [q.text for q in dataset.queries],
                id_key, dataset.fingerprint)
        ctx.nodes.update({"lexical_index": n_lb, "lexical": n_ls})
        label = "bm25"
        lanes.append(Lane(config_id(ctx.pipeline, label), label, "lexical",
                          dict(comps.lexical.cache_params()), sparse,
                          (*ctx.base_timings, n_chunk.timings[0], *n_lb.timings, *n_ls.timings),
                          ops_from(n_ls.timings, "lexical")))
        if comps.fusion is not None:
            lanes += fused_lanes(ctx, lanes, sparse, id_key)
    if not lanes:
        log.warning("every config was pruned by the budget")
    return lanes


def fused_lanes(ctx: RunContext, lanes: list[Lane], sparse: Hits, id_key: np.ndarray) -> list[Lane]:
    assert ctx.comps.fusion is not None
    dense = next((lane for lane in lanes if lane.kind == "dense"), None)
    if dense is None:
        return []
    out = []
    for variant in ctx.comps.fusion.variants():
        log_ = TimingLog("fusion")
        with log_.measure("total", dense.hits.n_queries):
            fused = ctx.comps.fusion.fuse(dense.hits, sparse, variant, id_key=id_key,
                                          k=ctx.comps.retriever.k)
        label = variant.name
        log.info("stage %-10s %s in %.0f ms", "fusion", label, log_.samples[0].wall_ms)
        out.append(Lane(config_id(ctx.pipeline, label), label, "fused", dict(variant.params),
                        fused, (*dense.timings, *log_.samples), Ops()))
    return out


def ann_recall(chunk_res: SearchResult, exact: SearchResult, doc_vecs: np.ndarray,
               q_vecs: np.ndarray) -> dict[str, np.ndarray]:
    """Tie-tolerant ANN recall@k per query, on EXACT scores of the returned chunks (ANN
    scores of quantised indexes are approximate)."""
    from bench.index.exact import ann_recall_at_k

    ids = chunk_res.ids
    safe = np.where(ids >= 0, ids, 0)
    vecs = np.asarray(doc_vecs)
    exact_scores = np.einsum("qd,qkd->qk", np.asarray(q_vecs), vecs[safe]).astype(np.float32)
    exact_scores[ids < 0] = -np.inf
    ann = SearchResult(ids=ids, scores=exact_scores)
    out = {}
    for k in ANN_RECALL_K:
        if k <= min(ids.shape[1], exact.ids.shape[1]):
            out[f"ann_recall@{k}"] = ann_recall_at_k(ann, exact, k)
    return out


def probe(comps: Components, built: BuiltIndex, index_bytes: int, q_vecs: np.ndarray,
          qp: dict[str, Any], n_chunks: int, device: str) -> BudgetDecision:
    """Time single queries on a deterministic sample; ask the budget whether to go on."""
    assert comps.budget is not None
    n = min(comps.budget.probe_queries, len(q_vecs))
    sample = np.linspace(0, len(q_vecs) - 1, n).astype(int)
    log_ = TimingLog("probe", device=device)
    depth = comps.retriever.depth(n_chunks)
    for i in sample:
        with log_.measure("query", 1, sync_cuda=device == "cuda"):
            built.search(np.asarray(q_vecs[i : i + 1]), depth, qp)
    return comps.budget.check(ProbeMeasurement(
        stage="retrieve", n_queries=n, query_latency_ms=tuple(s.wall_ms for s in log_.samples),
        index_bytes=index_bytes, peak_rss_bytes=peak_rss_bytes(), peak_vram_bytes=None))


