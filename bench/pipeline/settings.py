"""The typed settings a run reads from its config, taken once from the ``DictConfig``.

``run(cfg)`` validates the config and builds the components from it; everything after
that — execution, scoring, comparisons, the writers, the capacity driver — reads these
frozen records instead of the ``DictConfig`` (``bench.config.schema`` declares their fields
and defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from bench.config.schema import (
    CapacityConfig,
    GateConfig,
    GenerationConfig,
    LatencyConfig,
    MetricsConfig,
    ScalePlanConfig,
    SubsetConfig,
)
from bench.gates.regression import RegressionSettings, from_config
from bench.metrics.decisions import DecisionRule, rules_from_config
from bench.pipeline.latency import LatencySettings
from bench.pipeline.scoring import SummarySettings


@dataclass(frozen=True)
class RunSettings:
    experiment: str
    seed: int
    plan_only: bool
    metrics: MetricsConfig
    generation: GenerationConfig
    gates: tuple[GateConfig, ...]
    capacity: CapacityConfig
    #: the resolved config as run.json records it
    resolved: Mapping[str, Any]
    #: the chunker's class name, for log lines
    chunker: str
    #: pre-registered decisions (``decisions:``), evaluated after scoring
    decisions: tuple[DecisionRule, ...] = ()
    latency_config: LatencyConfig = field(default_factory=LatencyConfig)
    #: the queries evaluated: split and seeded stratified subset (bench.data.subset)
    subset: SubsetConfig = field(default_factory=SubsetConfig)
    #: regression gates against ``gates_against`` (None: no baseline)
    regression: RegressionSettings | None = None
    #: an extra path for the gates' JUnit XML (the run dir always gets gates.junit.xml)
    gates_junit: str | None = None
    #: ``regression.critical.query_ids``: kept in any subset, judged when there is a baseline
    critical_ids: tuple[str, ...] = ()
    #: the robustness study after the run (``robustness:``; empty: off)
    robustness: Mapping[str, Any] = field(default_factory=dict)
    #: the scale planner of the plan preview (``scale_plan:``; bench.scaling)
    scale_plan: ScalePlanConfig = field(default_factory=ScalePlanConfig)

    @property
    def primary_metric(self) -> str:
        return str(self.metrics.names[0])

    @property
    def latency(self) -> LatencySettings:
        lc, m = self.latency_config, self.metrics
        return LatencySettings(lc.interleave, lc.queries, lc.warmup, self.seed,
                               m.bootstrap_resamples, m.confidence)

    @property
    def summary(self) -> SummarySettings:
        m = self.metrics
        return SummarySettings(dict(m.category_weights), m.bootstrap_resamples, m.confidence,
                               self.seed)


def run_settings(cfg: DictConfig) -> RunSettings:
    """The settings of a validated config (``validate_top_level`` ran first)."""
    def typed(node: Any, cls: type) -> Any:
        obj = OmegaConf.to_object(node)
        return obj if isinstance(obj, cls) else cls(**cast(dict, obj))

    target = str((cfg.chunker or {}).get("_target_") or "?")
    return RunSettings(
        experiment=str(cfg.experiment_name), seed=int(cfg.seed), plan_only=bool(cfg.plan_only),
        metrics=typed(cfg.metrics, MetricsConfig),
        generation=typed(cfg.generation, GenerationConfig),
        gates=tuple(typed(g, GateConfig) for g in cfg.gates),
        capacity=typed(cfg.capacity, CapacityConfig),
        resolved=cast(dict, OmegaConf.to_container(cfg, resolve=True)),
        chunker=target.rsplit(".", 1)[-1],
        decisions=rules_from_config(cast(list, OmegaConf.to_container(cfg.decisions,
                                                                      resolve=True))),
        latency_config=typed(cfg.latency, LatencyConfig),
        subset=typed(cfg.subset, SubsetConfig), regression=from_config(cfg),
        gates_junit=cfg.gates_junit,
        critical_ids=tuple(str(q) for q in cfg.regression.critical.query_ids),
        robustness=cast(dict, OmegaConf.to_container(cfg.robustness, resolve=True)),
        scale_plan=typed(cfg.scale_plan, ScalePlanConfig))
