"""What a plan is made of: configs ("lanes"), the state a stage expander folds, a stage entry.

``plan()`` (``bench.pipeline.plan``) folds the ordered stage list (``bench.pipeline.stages``)
over a :class:`PlanState`: each stage's ``expand(state) -> state`` adds the shared nodes it
builds (chunks, embeddings, an index) and adds or rewrites the run's configs — a retrieval
stage adds a lane per query-time setting, filters turn each lane into its filter modes, a
reranker adds a config per depth after each lane, generation an answered config per pool.
Adding a stage is its package, its ``conf/<group>/`` options and one :class:`Stage` entry.
"""

from __future__ import annotations

import enum
import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from bench.pipeline.node import Node

if TYPE_CHECKING:
    from pathlib import Path

    from omegaconf import DictConfig

    from bench.data.base import Dataset, Query
    from bench.generation.stage import GenerationSettings
    from bench.pipeline.components import Components
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.outputs import Outputs
    from bench.pipeline.view import RunView
    from bench.report.base import StageReport
    from bench.results.records import Comparison


class ConfigKind(enum.StrEnum):
    """What a config's leaf is (configs.parquet ``kind``)."""

    DENSE = "dense"
    LEXICAL = "lexical"
    FUSED = "fused"
    RERANKED = "reranked"
    GENERATED = "generated"
    #: a router's config: per query, the pool of the route it chose (bench.route)
    ROUTED = "routed"
    #: a black-box service's rankings (``system=http``, bench.system)
    SYSTEM = "system"


@dataclass(frozen=True)
class ConfigSpec:
    """One leaf of the plan: one config of the run."""

    config_id: str
    label: str
    #: a ``ConfigKind``, or a kind a stage declares (``Outputs.kinds``) as a string
    kind: ConfigKind | str
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
    #: the exact pool added as the first config of an approximate index's answered run
    reference: bool = False

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


def params_label(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, default=str)


def lane(label: str, kind: ConfigKind | str, node: Node, params: Mapping[str, Any], *,
         parent_id: str | None = None, filter_pair: tuple[str, str] | None = None,
         reference: bool = False) -> ConfigSpec:
    """A config whose leaf is ``node`` (its id is the node's chain)."""
    return ConfigSpec(config_id_of(node), label, kind, node, dict(params), parent_id,
                      filter_pair, reference=reference)


@dataclass(frozen=True)
class PlanState:
    """What the stages folded so far: the run's components, the shared nodes by name
    (``data``, ``chunk``, ``embed_docs``, ``index``, ...) and the configs in report order."""

    comps: Components
    dataset: Dataset
    device: str
    relevance_level: int
    generation: GenerationSettings | None = None
    nodes: Mapping[str, Node] = field(default_factory=dict)
    configs: tuple[ConfigSpec, ...] = ()
    #: loaded queries the run does NOT evaluate (other splits, outside ``subset``): what a
    #: stage may learn from (the router's classifier) without testing on what it learnt
    held_out: tuple[Query, ...] = ()

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no shared node {name!r} yet (stage order?); have "
                           f"{', '.join(self.nodes)}") from None

    def with_nodes(self, **nodes: Node | None) -> PlanState:
        return replace(self, nodes={**self.nodes,
                                    **{k: v for k, v in nodes.items() if v is not None}})

    def with_configs(self, configs: tuple[ConfigSpec, ...] | list[ConfigSpec]) -> PlanState:
        return replace(self, configs=tuple(configs))


@dataclass(frozen=True)
class Stage:
    """One entry of the stage list (``bench.pipeline.stages``).

    ``groups``: the config groups it owns (``conf/<group>/``), in data-flow order; the
    top-level schema has one field per group of every entry. ``expander``: its plan
    expander ``expand(state) -> state`` as ``"module:function"``, imported when a plan is
    made (so the config schema can read the list without importing every stage); None for
    a service (telemetry, budget, report) that adds no plan nodes. ``config_metrics``: the
    configs.parquet columns it fills that release gates may bound.
    """

    name: str
    groups: tuple[str, ...]
    expander: str | None = None
    config_metrics: tuple[str, ...] = ()
    #: ``"module:function"`` building its components, ``(cfg, device) -> {group: component}``;
    #: None: each group's option built from its ``_target_`` (``bench.config.build``)
    builder: str | None = None
    #: its components take the run's resolved ``device`` (embedders, indexes, rerankers)
    takes_device: bool = False
    #: its groups may not be disabled (``_target_: null``)
    required: bool = False
    #: which configs' rows hold ``config_metrics`` (release gates bound only those): config
    #: kinds (empty: every kind) and op stages one of which the config's chain must hold
    #: (empty: any chain)
    config_kinds: tuple[str, ...] = ()
    config_nodes: tuple[str, ...] = ()
    #: ``"module:function"`` writing the stage's own results after the run's tables,
    #: ``(done: RunView, run_dir, comparisons, latency) -> StageReport | None`` (its Parquet
    #: tables, its report.md section, its run.json entry under ``stages.<name>``); None:
    #: nothing
    writer: str | None = None
    #: what it produces (``bench.pipeline.outputs.Outputs``): configs.parquet columns and
    #: their fill, per-query statuses, config kinds, cost components; a value or
    #: ``"module:NAME"`` of a light module of its package (read when a schema is assembled)
    outputs: Outputs | str | None = None

    def declared(self) -> Outputs:
        """This stage's declared outputs (empty without a declaration)."""
        from bench.pipeline.outputs import Outputs, named

        if self.outputs is None:
            return Outputs()
        out = named(self.outputs) if isinstance(self.outputs, str) else self.outputs
        assert isinstance(out, Outputs), f"stage {self.name}: outputs {self.outputs!r}"
        return out

    def write(self, done: RunView, run_dir: Path, comparisons: Sequence[Comparison],
              latency: LatencyRun) -> StageReport | None:
        """The stage's ``StageReport`` (``bench.report.base``), None without a writer (its
        entry's ``writer``, else its declared ``Outputs.writer``)."""
        writer = self.writer or self.declared().writer
        if writer is None:
            return None
        write: Callable[[RunView, Path, Sequence[Comparison], LatencyRun],
                        StageReport | None] = _named(writer)
        return write(done, run_dir, comparisons, latency)

    def expand(self, state: PlanState) -> PlanState:
        if self.expander is None:
            return state
        expand: Callable[[PlanState], PlanState] = _named(self.expander)
        return expand(state)

    def build(self, cfg: DictConfig, device: str) -> dict[str, Any]:
        """This stage's components by group (None where a group is disabled)."""
        if self.builder is not None:
            built: Callable[[DictConfig, str], dict[str, Any]] = _named(self.builder)
            return built(cfg, device)
        from bench.config.build import build
        from bench.errors import ConfigError

        out: dict[str, Any] = {}
        for g in self.groups:
            out[g] = (build(cfg[g], g, device=device) if self.takes_device
                      else build(cfg[g], g))
            if out[g] is None and self.required:
                raise ConfigError(g, "this stage is required; `_target_` must not be null")
        return out


def _named(path: str) -> Any:
    """The function a ``"module:function"`` string names (imported on first use)."""
    module, _, fn = path.partition(":")
    return getattr(importlib.import_module(module), fn)
