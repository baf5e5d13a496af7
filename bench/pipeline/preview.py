"""What the plan preview (``plan_only=true``) says about each node, before any work.

For each node of a plan: whether the cache has it (``Executor.is_cached``); what computing it
costs, from the store's event log (``bench.cache.events``: the wall seconds of the last
computation of this artifact, or, for an artifact not computed yet, of the latest artifact of
the same stage with the same options over other inputs — e.g. the query vectors of the last
query set, or the chunks of the last corpus); and which budget ceiling would prune it
(``bench.pipeline.plan.prune_node``: the node the probe cuts when that ceiling is broken, so
every config built on it goes too). Nothing is computed or loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.budget.base import Budget
from bench.budget.chain import ChainBudget
from bench.cache.events import read_events
from bench.cache.store import ArtifactStore, canonical_json, read_meta
from bench.pipeline.node import Node, Phase
from bench.pipeline.plan import Plan, prune_node
from bench.pipeline.probe_stages import PlannedProbe, stage_prunes


@dataclass(frozen=True)
class NodeCost:
    """Wall seconds of a computation of the node's stage: of this very artifact (``same``),
    else of the latest artifact of the same stage and options (other inputs)."""

    seconds: float
    same: bool

    def describe(self) -> str:
        return (f"computed in {self.seconds:.1f} s" if self.same
                else f"~{self.seconds:.1f} s (last computed with these options)")


def last_costs(store: ArtifactStore, nodes: list[Node]) -> dict[str, NodeCost]:
    """Per cacheable node (by key) its cost from the store's event log; a node no
    computation of the log matches is left out (cost unknown)."""
    miss: dict[str, dict[str, object]] = {}
    for e in read_events(store.root):  # oldest first: the latest computation wins
        if e.get("event") == "miss" and isinstance(e.get("wall_s"), int | float):
            miss[str(e["key"])] = e
    by_options: dict[tuple[str, str], float] = {}
    wanted = {n.stage for n in nodes if n.cached}
    for key, e in miss.items():
        stage = str(e["stage"])
        found = store.lookup(stage, key) if stage in wanted else None
        if found is None:
            continue
        try:
            params = read_meta(found)["params"]
        except (OSError, ValueError, KeyError):
            continue
        by_options[(stage, canonical_json(params))] = float(e["wall_s"])  # type: ignore[arg-type]
    out: dict[str, NodeCost] = {}
    for n in nodes:
        if not n.cached:
            continue
        own = miss.get(n.key)
        if own is not None:
            out[n.key] = NodeCost(float(own["wall_s"]), True)  # type: ignore[arg-type]
            continue
        other = by_options.get((n.stage, canonical_json(dict(n.op.params()))))
        if other is not None:
            out[n.key] = NodeCost(other, False)
    return out


def pruned_by(the_plan: Plan, budget: Budget | None,
              is_cached: Callable[[Node], bool] = lambda n: False
              ) -> dict[str, tuple[str, ...]]:
    """Per node (by key) the budget ceilings that prune it when the probe finds them
    broken: a stage ceiling prunes the first node of a config's chain that times that
    stage; a ceiling on the whole request (end to end, VRAM, cost) the config's leaf."""
    out: dict[str, dict[str, None]] = {}

    def add(node: Node, ceiling: str) -> None:
        out.setdefault(node.key, {})[ceiling] = None

    for node, ceiling in stage_prunes(budget, the_plan, is_cached):  # probed before it runs
        add(node, ceiling)
    for spec in the_plan.configs:
        if isinstance(budget, ChainBudget):
            timed = {s for n in spec.chain if n.phase is Phase.QUERY for s in n.op.latency_stages}
            for stage in budget.max_stage_p95_ms:
                if stage in timed:
                    add(prune_node(spec, stage), f"budget.max_stage_p95_ms.{stage}")
            for name, limit in (("max_e2e_p95_ms", budget.max_e2e_p95_ms),
                                ("max_vram_bytes", budget.max_vram_bytes),
                                ("max_cost_per_query", budget.max_cost_per_query)):
                if limit is not None:
                    add(spec.leaf, f"budget.{name}")
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class Preview:
    """The preview's facts about every node of a plan (by key)."""

    costs: dict[str, NodeCost]
    prunes: dict[str, tuple[str, ...]]

    def notes(self, node: Node) -> list[str]:
        """What ``Plan.render`` adds to the node's line."""
        out = []
        cost = self.costs.get(node.key)
        if cost is not None:
            out.append(cost.describe())
        elif node.cached:
            out.append("cost unknown")
        if node.key in self.prunes:
            out.append("pruned if over " + ", ".join(self.prunes[node.key]))
        return out

    def fields(self, node: Node) -> dict[str, object]:
        """What ``Plan.to_json`` adds to the node's entry."""
        cost = self.costs.get(node.key)
        return {"last_cost_s": None if cost is None else cost.seconds,
                "last_cost_same_artifact": None if cost is None else cost.same,
                "pruned_by": list(self.prunes.get(node.key, ()))}

    def to_compute(self, the_plan: Plan, is_cached: Callable[[Node], bool]
                   ) -> tuple[float, int, int]:
        """(estimated seconds, nodes with an estimate, nodes without) of the cacheable nodes
        the cache lacks (``is_cached``: ``Executor.is_cached``)."""
        todo = [n for n in the_plan.nodes() if n.cached and not is_cached(n)]
        known = [self.costs[n.key].seconds for n in todo if n.key in self.costs]
        return sum(known), len(known), len(todo) - len(known)


def preview(the_plan: Plan, store: ArtifactStore, budget: Budget | None,
            is_cached: Callable[[Node], bool] = lambda n: False) -> Preview:
    return Preview(last_costs(store, the_plan.nodes()), pruned_by(the_plan, budget, is_cached))


def probe_lines(the_plan: Plan, probes: Sequence[PlannedProbe], assumed: bool) -> list[str]:
    """plan.txt's section on the budget's probes: each one's artifact (a multirun's jobs
    that share its key measure it once), whether the store has it, what a breach prunes."""
    by_key = {n.key: n for n in the_plan.nodes()}
    cached = sum(1 for p in probes if p.cached)
    out = [f"probes before paying: {len(probes)} ({cached} cached; each an artifact keyed "
           "like a node, measured once per key across a sweep's jobs)"]
    for p in probes:
        n_configs = sum(1 for c in the_plan.configs
                        if any(n.key in set(p.prunes) for n in c.chain))
        targets = ", ".join(f"{by_key[k].stage}[{k[:6]}]" for k in p.prunes[:3] if k in by_key)
        more = f" +{len(p.prunes) - 3}" if len(p.prunes) > 3 else ""
        out.append(f"  {p.stage}: {p.label}  (key {p.key[:10]}; "
                   f"{'cached' if p.cached else 'to measure'}; a breach prunes {targets}{more}: "
                   f"{n_configs} configs)")
    if assumed:
        out.append("  (the corpus's chunks are not cached: the embedding and index probes' "
                   "keys assume at least probe_chunks chunks)")
    return out
