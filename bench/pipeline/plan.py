"""Plan, then execute: expand a run's config into a graph of content-keyed nodes.

``plan(cfg, comps, dataset)`` expands every stage's variants — query-time settings of the
index, the lexical lane, fusion variants, filter modes, reranker x depth — into nodes. A
node shared by several configs (the chunks, embeddings, index, a candidate pool) is ONE node,
so a sweep computes each distinct artifact once. Each leaf is one config; its ``config_id``
is a hash of its own chain (stages and their parameters, rooted in the dataset fingerprint,
code versions left out): adding an option to a run never changes another config's id, and
the same config in two runs has the same id, so ``bench.compare`` pairs it across runs.

``Plan.render`` prints the graph (nodes, which are shared, which are cached, how many
configs) for ``plan_only=true``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.chunking.stage import ChunkOp, ChunkStatsOp
from bench.data.base import Dataset
from bench.embedding.stage import EmbedOp, QueryLatencyOp
from bench.filters.hard_vs_soft import HardVsSoft
from bench.filters.stage import FilterOp
from bench.fusion.stage import FuseOp
from bench.generation.stage import GenerationSettings, generation_nodes
from bench.index.stage import ExactTopKOp, IndexOp
from bench.lexical.stage import LexicalIndexOp, LexicalSearchOp
from bench.pipeline.components import Components
from bench.pipeline.node import Node, ValueOp
from bench.rerank.stage import rerank_nodes
from bench.retrieval.stage import RetrieveOp


@dataclass(frozen=True)
class ConfigSpec:
    """One leaf of the plan: one config of the run."""

    config_id: str
    label: str
    kind: str  # dense | lexical | fused | reranked | generated
    leaf: Node
    #: the config's own knobs (query settings, fusion variant, filter mode, rerank depth)
    params: Mapping[str, Any]
    #: the config this one extends (a reranked config's pool), or None
    parent_id: str | None = None
    #: (lane label, "hard" | "soft") for configs of a hard-vs-soft filter pair
    filter_pair: tuple[str, str] | None = None
    #: a generated config's candidate pool (its parent's leaf) and answers node
    pool: Node | None = None
    answers: Node | None = None

    @property
    def chain(self) -> list[Node]:
        return self.leaf.ancestors()

    @property
    def pool_node(self) -> Node:
        """The node whose value is this config's candidate pool."""
        return self.pool if self.pool is not None else self.leaf


def config_id_of(leaf: Node) -> str:
    return leaf.ident[:10]


def label_of(kind: str, params: Mapping[str, Any]) -> str:
    if not params:
        return kind
    inner = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{kind}({inner})"


@dataclass(frozen=True)
class Plan:
    data: Node
    chunk: Node
    chunk_stats: Node
    embed_docs: Node
    embed_queries: Node
    index: Node
    exact: Node | None
    configs: tuple[ConfigSpec, ...]
    #: dense retrieve nodes by label (budget probes run on them)
    dense: Mapping[str, Node] = field(default_factory=dict)
    #: single-query encoding timed per query: measured for every config whose chain encodes
    #: queries and added to its end-to-end latency, but not part of its chain (its id)
    query_latency: Node | None = None

    def measured_with(self, chain: list[Node]) -> list[Node]:
        """Latency-only nodes a config with this chain also resolves."""
        if self.query_latency is not None and any(n.key == self.embed_queries.key
                                                   for n in chain):
            return [self.query_latency]
        return []

    def nodes(self) -> list[Node]:
        """Every node once, inputs before the nodes that use them."""
        seen: dict[str, Node] = {}
        for root in (self.chunk_stats, *(c.leaf for c in self.configs)):
            for n in root.ancestors():
                seen.setdefault(n.key, n)
        for c in self.configs:
            for n in self.measured_with(c.chain):
                seen.setdefault(n.key, n)
        return list(seen.values())

    def users(self) -> dict[str, int]:
        """How many configs use each node (by key)."""
        count: dict[str, int] = {}
        for c in self.configs:
            for n in (*c.chain, *self.measured_with(c.chain)):
                count[n.key] = count.get(n.key, 0) + 1
        return count

    def render(self, is_cached: Callable[[Node], bool]) -> str:
        """The graph as an indented tree along each node's first input; a node reached again
        through another path is printed once and referred to by its key afterwards."""
        nodes = self.nodes()
        users = self.users()
        children: dict[str, list[Node]] = {}
        for n in nodes:
            if n.inputs:
                children.setdefault(n.inputs[0].key, []).append(n)
        leaf_of = {c.leaf.key: c for c in self.configs}
        cached = {n.key for n in nodes if is_cached(n)}
        n_cached_nodes = sum(1 for n in nodes if n.cached)
        shared = [n for n in nodes if users.get(n.key, 0) > 1]
        lines = [
            f"plan: {len(self.configs)} configs, {len(nodes)} nodes "
            f"({len(shared)} shared by several configs; {len(cached)} of {n_cached_nodes} "
            f"cacheable nodes already cached)",
        ]

        def describe(n: Node) -> str:
            state = ("cached" if n.key in cached else "to compute") if n.cached else "in memory"
            extra = [f"key {n.key[:10]}", state]
            if users.get(n.key, 0) > 1:
                extra.append(f"shared by {users[n.key]} configs")
            others = [i for i in n.inputs[1:]]
            if others:
                extra.append("also reads " + ", ".join(f"{i.stage}[{i.key[:6]}]" for i in others))
            text = f"{n.stage}: {n.label}  ({'; '.join(extra)})"
            if n.key in leaf_of:
                c = leaf_of[n.key]
                text += f"  => config {c.config_id} {c.label}"
            return text

        def walk(n: Node, prefix: str, last: bool, top: bool) -> None:
            branch = "" if top else ("`-- " if last else "|-- ")
            lines.append(prefix + branch + describe(n))
            kids = children.get(n.key, [])
            ext = "" if top else ("    " if last else "|   ")
            for i, k in enumerate(kids):
                walk(k, prefix + ext, i == len(kids) - 1, False)

        walk(self.data, "", True, True)
        lines.append("configs:")
        for c in self.configs:
            lines.append(f"  {c.config_id}  {c.label}  ({c.kind}; {len(c.chain)} nodes in chain)")
        return "\n".join(lines)

    def to_json(self, is_cached: Callable[[Node], bool]) -> dict[str, Any]:
        users = self.users()
        return {
            "configs": [{"config_id": c.config_id, "label": c.label, "kind": c.kind,
                         "leaf": c.leaf.key, "parent_id": c.parent_id} for c in self.configs],
            "nodes": [{"key": n.key, "stage": n.stage, "label": n.label,
                       "inputs": [i.key for i in n.inputs], "cacheable": n.cached,
                       "cached": is_cached(n), "configs": users.get(n.key, 0)}
                      for n in self.nodes()],
        }


def _params_label(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, default=str)


def plan(comps: Components, dataset: Dataset, *, device: str, relevance_level: int,
         generation: GenerationSettings | None = None) -> Plan:
    data = Node(ValueOp("data", dataset), (), f"dataset {dataset.name}",
                root_key=dataset.fingerprint)
    chunk = Node(ChunkOp(comps.chunker, comps.embedder.tokenizer), (data,),
                 f"{type(comps.chunker).__name__} {_params_label(comps.chunker.cache_params())}")
    chunk_stats = Node(ChunkStatsOp(), (data, chunk), "chunk report")
    emb = type(comps.embedder).__name__
    embed_docs = Node(EmbedOp(comps.embedder, "document", device), (chunk,), f"{emb} documents")
    embed_queries = Node(EmbedOp(comps.embedder, "query", device), (data,), f"{emb} queries")
    query_latency = Node(QueryLatencyOp(comps.embedder, device), (data,),
                         f"{emb} single-query latency")
    index = Node(IndexOp(comps.index, device), (embed_docs,),
                 f"{type(comps.index).__name__} "
                 f"{_params_label(comps.index.cache_params())}")
    exact = None
    if not comps.index.exact:
        exact = Node(ExactTopKOp(device), (embed_docs, embed_queries), "exact top-k reference")

    # (label, kind, params, node, parent label) per candidate pool, in report order
    pools: list[tuple[str, str, dict[str, Any], Node]] = []
    dense: dict[str, Node] = {}
    for qp in comps.index.query_params():
        label = label_of("dense", qp)
        node = Node(RetrieveOp(comps.retriever, qp, device),
                    (index, embed_queries, chunk, data), label)
        dense[label] = node
        pools.append((label, "dense", dict(qp), node))
    reference = exact_reference_pool(comps, embed_docs, embed_queries, chunk, data,
                                     device=device, generation=generation)
    if comps.lexical is not None:
        lex_index = Node(LexicalIndexOp(comps.lexical), (chunk,),
                         f"{type(comps.lexical).__name__} index")
        lexical = Node(LexicalSearchOp(comps.lexical), (lex_index, chunk, data), "bm25")
        pools.append(("bm25", "lexical", dict(comps.lexical.cache_params()), lexical))
        if comps.fusion is not None and dense:
            first_dense = next(iter(dense.values()))
            for variant in comps.fusion.variants():
                node = Node(FuseOp(comps.fusion, variant, comps.retriever.k),
                            (first_dense, lexical, data), variant.name)
                pools.append((variant.name, "fused", dict(variant.params), node))
    if reference is not None:  # first: every answer is paired against the exact pool's
        pools.insert(0, reference)
        dense[reference[0]] = reference[3]

    specs: list[ConfigSpec] = []
    filtered: list[tuple[str, str, dict[str, Any], Node, tuple[str, str] | None]] = []
    f = comps.filters
    members = ([] if f is None else f.members() if isinstance(f, HardVsSoft) else [("", f)])
    for label, kind, params, node in pools:
        if not members:
            filtered.append((label, kind, params, node, None))
        for name, flt in members:
            fl = f"{label}|{name}" if name else label
            fnode = Node(FilterOp(flt, name, relevance_level), (node, data), fl)
            filtered.append((fl, kind, params, fnode, (label, name) if name else None))
    for label, kind, params, node, pair in filtered:
        base = ConfigSpec(config_id_of(node), label, kind, node, params, None, pair)
        specs.append(base)
        if comps.reranker is not None:
            for rlabel, rparams, rnode in rerank_nodes(comps.reranker, node, chunk, data,
                                                       label=label, device=device):
                specs.append(ConfigSpec(config_id_of(rnode), rlabel, "reranked", rnode,
                                        {**params, **rparams}, base.config_id, pair))
    ids = [s.config_id for s in specs]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:  # two options that expand to the same chain: one config, listed twice
        specs = [s for i, s in enumerate(specs) if s.config_id not in ids[:i]]
    if generation is not None:
        specs += generated_specs(generation, specs, chunk, data)
    return Plan(data, chunk, chunk_stats, embed_docs, embed_queries, index, exact,
                tuple(specs), dense, query_latency)


#: label of the exact reference pool added by ``generation.exact_reference``
EXACT_REFERENCE_LABEL = "dense(exact)"


def exact_reference_pool(comps: Components, embed_docs: Node, embed_queries: Node,
                         chunk: Node, data: Node, *, device: str,
                         generation: GenerationSettings | None
                         ) -> tuple[str, str, dict[str, Any], Node] | None:
    """The exact pool (a flat faiss index over the same document embeddings, searched by the
    run's retriever) when answers are generated with ``exact_reference`` from an approximate
    index; None otherwise. The flat index has ``conf/index/flat.yaml``'s options, whatever the
    run's index options are, so its chain (and config id) is the same in every job of an ANN
    sweep, and equal to the flat job's own dense config: computed once, cached."""
    if generation is None or not generation.exact_reference or comps.index.exact:
        return None
    from bench.index.faiss_index import FaissIndex

    flat = FaissIndex(factory="Flat", device=device)
    index = Node(IndexOp(flat, device), (embed_docs,),
                 f"FaissIndex {_params_label(flat.cache_params())} (exact reference)")
    node = Node(RetrieveOp(comps.retriever, {}, device), (index, embed_queries, chunk, data),
                EXACT_REFERENCE_LABEL)
    return EXACT_REFERENCE_LABEL, "dense", {"exact_reference": True}, node


def generated_specs(g: GenerationSettings, pools: list[ConfigSpec], chunk: Node,
                    data: Node) -> list[ConfigSpec]:
    """Per pool config (of ``g.kinds``; empty: every kind) and context variant, one generated
    config: the pool's chain, then context -> generate [-> judge]. Its parent is the pool
    config; the variants of a swept context option share the pool node."""
    out = []
    for p in pools:
        if g.kinds and p.kind not in g.kinds:
            continue
        for n in generation_nodes(g, p.leaf, chunk, data, label=p.label):
            params = {**p.params, **n.params,
                      "generator": n.label.rsplit(">gen(", 1)[1].rstrip(")"),
                      "answered_queries": len(g.subset),
                      "judge": None if n.leaf is n.answers
                      else n.leaf.label.rsplit(">judge(", 1)[1][:-1]}
            out.append(ConfigSpec(config_id_of(n.leaf), n.label, "generated", n.leaf, params,
                                  p.config_id, p.filter_pair, pool=p.leaf, answers=n.answers))
    return out
