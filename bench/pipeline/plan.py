"""Plan, then execute: expand a run's config into a graph of content-keyed nodes.

``plan(comps, dataset, ...)`` folds the stage list (``bench.pipeline.stages``) over a
``PlanState``: each stage's expander adds its shared nodes and expands the configs — the
query-time settings of the index, the lexical lane, fusion variants, filter modes, reranker x
depth, answers. A node shared by several configs (the chunks, embeddings, index, a candidate
pool) is ONE node, so a sweep computes each distinct artifact once. Each leaf is one config;
its ``config_id`` is a hash of its own chain (stages and their parameters, rooted in the
corpus fingerprint, code versions left out): adding an option to a run never changes another
config's id, and the same config in two runs over one corpus has the same id whatever their
queries, so ``bench.compare`` and the regression gates pair it across runs.

The graph has two roots (``expand_dataset``): the corpus (documents alone) and the dataset
(documents and queries). Document-side ops (chunks, and through them document embeddings and
indexes) read the corpus, so their keys hold no query; every op that reads a query reads the
dataset and is keyed on its fingerprint. A key is a hash over the inputs' keys, so which root
a node descends from decides, by construction, whether a change of queries reaches its key.

What the run needs to know about stages is read from the ops in the plan: which latency
stages add up end to end (``query_time_stages``), which node a broken stage ceiling prunes
(``prune_node``), how run.json names a node (``node_name``).

``Plan.render`` prints the graph (nodes, which are shared, which are cached, how many
configs) for ``plan_only=true``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from bench.cache.store import make_key
from bench.data.base import Dataset, Query
from bench.generation.stage import GenerationSettings
from bench.pipeline.lanes import (
    ConfigKind,
    ConfigSpec,
    PlanState,
    config_id_of,
    label_of,
    params_label,
)
from bench.pipeline.node import CorpusOp, Node, OpTraits, Phase, ValueOp
from bench.pipeline.stages import STAGES, config_kinds
from bench.retrieval.stage import EXACT_REFERENCE_LABEL

if TYPE_CHECKING:
    from bench.pipeline.components import Components

__all__ = ["EXACT_REFERENCE_LABEL", "ConfigKind", "ConfigSpec", "Plan", "config_id_of",
           "expand_dataset", "label_of", "params_label", "plan"]


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
        return list(self._nodes)

    @cached_property
    def _nodes(self) -> tuple[Node, ...]:
        seen: dict[str, Node] = {}
        for root in (self.chunk_stats, *(c.leaf for c in self.configs)):
            for n in root.ancestors():
                seen.setdefault(n.key, n)
        for c in self.configs:
            for n in self.measured_with(c.chain):
                seen.setdefault(n.key, n)
        return tuple(seen.values())

    def users(self) -> dict[str, int]:
        """How many configs use each node (by key)."""
        count: dict[str, int] = {}
        for c in self.configs:
            for n in (*c.chain, *self.measured_with(c.chain)):
                count[n.key] = count.get(n.key, 0) + 1
        return count

    def render(self, is_cached: Callable[[Node], bool],
               notes: Callable[[Node], list[str]] | None = None,
               header: tuple[str, ...] = ()) -> str:
        """The graph as indented trees from each root (the corpus: document-side work; the
        dataset: query-side work) along each node's first input; a node reached again through
        another path is printed once and referred to by its key afterwards. ``notes`` adds
        to each node's line, ``header`` lines after the first (``bench.pipeline.preview``)."""
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
            f"cacheable nodes already cached)", *header,
        ]

        def describe(n: Node) -> str:
            state = ("cached" if n.key in cached else "to compute") if n.cached else "in memory"
            extra = [f"key {n.key[:10]}", state]
            if users.get(n.key, 0) > 1:
                extra.append(f"shared by {users[n.key]} configs")
            others = [i for i in n.inputs[1:]]
            if others:
                extra.append("also reads " + ", ".join(f"{i.stage}[{i.key[:6]}]" for i in others))
            if notes is not None:
                extra += notes(n)
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

        for root in (n for n in nodes if not n.inputs):  # the corpus, the dataset, ...
            walk(root, "", True, True)
        lines.append("configs:")
        for c in self.configs:
            lines.append(f"  {c.config_id}  {c.label}  ({c.kind}; {len(c.chain)} nodes in chain)")
        return "\n".join(lines)

    def to_json(self, is_cached: Callable[[Node], bool],
                fields: Callable[[Node], dict[str, object]] | None = None) -> dict[str, Any]:
        users = self.users()
        return {
            "configs": [{"config_id": c.config_id, "label": c.label, "kind": c.kind,
                         "leaf": c.leaf.key, "parent_id": c.parent_id} for c in self.configs],
            "nodes": [{"key": n.key, "stage": n.stage, "label": n.label,
                       "inputs": [i.key for i in n.inputs], "cacheable": n.cached,
                       "cached": is_cached(n), "configs": users.get(n.key, 0),
                       **(fields(n) if fields is not None else {})}
                      for n in self.nodes()],
        }


    def query_time_stages(self) -> tuple[str, ...]:
        """The latency stages of the plan's query-time ops, in chain order: per query, the
        samples of these stages along a config's chain add up to its end-to-end latency."""
        return self._query_time_stages

    @cached_property
    def _query_time_stages(self) -> tuple[str, ...]:
        out: dict[str, None] = {}
        for n in self._nodes:
            if n.phase is Phase.QUERY:
                out.update(dict.fromkeys(n.op.latency_stages))
        return tuple(out)

    def e2e_stages(self, spec: ConfigSpec) -> tuple[str, ...]:
        """The stages whose samples add up to ``spec``'s end-to-end latency: the plan's
        query-time stages, then the request stages of its chain's batch ops (a generated
        config's context assembly and generation). A retrieval config's are the plan's
        query-time stages alone."""
        extra: dict[str, None] = {}
        for n in spec.chain:
            if isinstance(n.op, OpTraits):  # an op without the traits serves no requests
                extra.update(dict.fromkeys(s for s in n.op.request_stages
                                           if s not in self._query_time_stages))
        return (*self._query_time_stages, *extra)

    def node_name(self, node: Node) -> str:
        """run.json's cache-hit key: the stage, with the label where the plan has several
        nodes of that stage."""
        same = self._stage_counts.get(node.stage, 0)
        return node.stage if same <= 1 else f"{node.stage}[{node.label}]"

    @cached_property
    def _stage_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self._nodes:
            counts[n.stage] = counts.get(n.stage, 0) + 1
        return counts


def prune_node(spec: ConfigSpec, latency_stage: str) -> Node:
    """The node a ceiling broken on ``latency_stage`` prunes: the first node of the config's
    chain whose op emits that stage (every config built on it goes too); the config's own
    leaf when no op of its chain does."""
    return next((n for n in spec.chain if n.phase is Phase.QUERY
                 and latency_stage in n.op.latency_stages), spec.leaf)


def expand_dataset(s: PlanState) -> PlanState:
    """The two roots: the corpus (documents alone, keyed by their fingerprint: what chunks,
    document embeddings and indexes read) and the loaded dataset (keyed by its fingerprint,
    documents and queries: what every query-side node reads). The dataset root is named by
    its corpus, so config ids pair across query sets of one corpus (subsets, splits, edited
    golden sets)."""
    d = s.dataset
    corpus = d.corpus
    return s.with_nodes(
        corpus=Node.of(CorpusOp("corpus", corpus), f"corpus {d.name}"),
        data=Node(ValueOp("data", d), (), f"dataset {d.name}", root_key=d.fingerprint,
                  root_ident=make_key("data", "", {}, [corpus.fingerprint])))


def dedupe(configs: tuple[ConfigSpec, ...]) -> tuple[ConfigSpec, ...]:
    """Two options that expand to the same chain are one config, listed once."""
    seen: set[str] = set()
    out = []
    for c in configs:
        if c.config_id not in seen:
            seen.add(c.config_id)
            out.append(c)
    return tuple(out)


def plan(comps: Components, dataset: Dataset, *, device: str, relevance_level: int,
         generation: GenerationSettings | None = None, held_out: tuple[Query, ...] = ()
         ) -> Plan:
    state = PlanState(comps, dataset, device, relevance_level, generation, held_out=held_out)
    for stage in STAGES:
        state = stage.expand(state)
        state = state.with_configs(dedupe(state.configs))
    kinds = config_kinds()
    for c in state.configs:
        if str(c.kind) not in kinds:  # a stage's own kind must be declared (Outputs.kinds)
            raise ValueError(f"config {c.label}: kind {str(c.kind)!r} is not declared by any "
                             f"stage (declared: {', '.join(kinds)})")
    n = state.nodes
    return Plan(n["data"], n["chunk"], n["chunk_stats"], n["embed_docs"], n["embed_queries"],
                n["index"], n.get("exact"), state.configs, n.get("query_latency"))


def sweep_plan(jobs: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """One plan across the jobs of a multirun, from each job's ``plan.json``: every node
    once (by key), which nodes several jobs share (computed once, by the first job that
    needs it; the others load it from the cache), and each job's configs. Returns the text
    ``plan_only=true`` prints and the merged JSON."""
    nodes: dict[str, dict[str, Any]] = {}
    used_by: dict[str, list[str]] = {}
    for name, p in jobs:
        for n in p["nodes"]:
            nodes.setdefault(n["key"], n)
            used_by.setdefault(n["key"], []).append(name)
    shared = [k for k, js in used_by.items() if len(js) > 1]
    cacheable = [n for n in nodes.values() if n["cacheable"]]
    cached = [n for n in cacheable if n["cached"]]
    n_configs = sum(len(p["configs"]) for _, p in jobs)
    lines = [f"sweep plan: {len(jobs)} jobs, {n_configs} configs, {len(nodes)} distinct nodes "
             f"({len(shared)} shared by several jobs; {len(cached)} of {len(cacheable)} "
             f"cacheable nodes already cached)"]
    todo = [n for n in cacheable if not n["cached"]]
    known = [float(n["last_cost_s"]) for n in todo if n.get("last_cost_s") is not None]
    if todo:  # each distinct node once: what the whole sweep still computes
        lines.append(f"to compute: ~{sum(known):.1f} s for the {len(known)} uncached nodes of "
                     f"known cost" + (f", {len(todo) - len(known)} of unknown cost"
                                      if len(todo) > len(known) else "")
                     + " (the store's last computations of each node's stage and options)")
    if shared:
        lines.append("shared by several jobs (computed once):")
        for k in shared:
            n = nodes[k]
            state = ("cached" if n["cached"] else "to compute") if n["cacheable"] else "in memory"
            extra = [f"~{n['last_cost_s']:.1f} s"] if n.get("last_cost_s") is not None else []
            if n.get("pruned_by"):
                extra.append("pruned if over " + ", ".join(n["pruned_by"]))
            lines.append(f"  {n['stage']}: {n['label']}  (key {k[:10]}; {state}; "
                         + "".join(f"{e}; " for e in extra)
                         + f"jobs {', '.join(used_by[k])})")
    probes: dict[str, dict[str, Any]] = {}
    probe_jobs: dict[str, list[str]] = {}
    for name, p in jobs:  # budget=stages: each probe an artifact, measured once per key
        for pr in p.get("probes", ()):
            probes.setdefault(pr["key"], pr)
            probe_jobs.setdefault(pr["key"], []).append(name)
    if probes:
        shared_probes = [k for k, js in probe_jobs.items() if len(js) > 1]
        lines.append(f"probes before paying: {len(probes)} distinct "
                     f"({sum(len(js) for js in probe_jobs.values())} over the jobs; "
                     f"{len(shared_probes)} shared by several jobs, measured once; "
                     f"{sum(1 for pr in probes.values() if pr['cached'])} cached)")
        for k in shared_probes:
            pr = probes[k]
            lines.append(f"  {pr['stage']}: {pr['label']}  (key {k[:10]}; "
                         f"{'cached' if pr['cached'] else 'to measure'}; jobs "
                         f"{', '.join(probe_jobs[k])})")
    for name, p in jobs:
        own = sum(1 for n in p["nodes"] if len(used_by[n["key"]]) == 1)
        lines.append(f"job {name}: {len(p['configs'])} configs, {len(p['nodes'])} nodes "
                     f"({own} its own)")
        for c in p["configs"]:
            lines.append(f"  {c['config_id']}  {c['label']}  ({c['kind']})")
    merged = {"jobs": [{"job": name, "configs": p["configs"]} for name, p in jobs],
              "nodes": [{**n, "jobs": used_by[k]} for k, n in nodes.items()]}
    if probes:
        merged["probes"] = [{**pr, "jobs": probe_jobs[k]} for k, pr in probes.items()]
    return "\n".join(lines), merged
