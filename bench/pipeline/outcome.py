"""What a run produced, as the writers, the capacity driver and callers see it.

``RunResult`` is what ``run(cfg)`` returns; ``ConfigRun`` is one config after execution;
``Executed`` everything the run computed, handed to the core's writer
(``bench.pipeline.record``) and the capacity driver (``bench.capacity.run``). Stages' writers
and fills see it as a ``bench.pipeline.view.RunView`` (its methods below are that view's
narrow doors into the executor, plan and components). Kept apart from the orchestration in
``bench.pipeline.run`` so the writers do not import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data.base import Dataset
from bench.data.splits import Contamination
from bench.data.subset import QuerySelection
from bench.filters.base import FilterOutcome
from bench.filters.stage import FilteredPool
from bench.pipeline.executor import Executor, Resolved
from bench.pipeline.node import Node
from bench.pipeline.plan import ConfigSpec, Plan
from bench.pipeline.probe import ProbeOutcome
from bench.pipeline.settings import RunSettings
from bench.results.records import GenerationSummary, GoldProbeSummary, SummaryRow
from bench.results.scores import ConfigScores
from bench.retrieval.base import Pool
from bench.telemetry.base import StageTiming, Telemetry

if TYPE_CHECKING:
    from bench.generation.sweep import GeneratorSweep
    from bench.judge.base import Judge
    from bench.pipeline.components import Components


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    run_id: str
    exit_code: int
    summary: tuple[SummaryRow, ...]
    cache_hits: dict[str, bool] = field(default_factory=dict)
    failed_gates: tuple[str, ...] = ()
    #: ``plan_only=true``: the rendered plan (nothing ran)
    plan_text: str | None = None
    #: one line per distinct reason configs failed (a served backend failed during work)
    failed_configs: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigRun:
    """One config after execution: its spec, pool (None when pruned), what its chain did."""

    spec: ConfigSpec
    pool: Pool | None
    chain: tuple[Resolved, ...]
    timings: tuple[StageTiming, ...]
    pruned_reason: str | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    #: why the config has no values (a backend its chain needs failed during work: every
    #: query ``failed``; its pool is empty); None: it ran
    failed_reason: str | None = None

    def node(self, stage: str) -> Resolved | None:
        return next((r for r in self.chain if r.node.stage == stage), None)

    @property
    def filter_outcome(self) -> FilterOutcome | None:
        r = self.node("filters")
        return r.value.outcome if r is not None and isinstance(r.value, FilteredPool) else None


@dataclass(frozen=True)
class Executed:
    """Everything a run computed, handed to the core's writer (bench.pipeline.record); a
    ``RunView`` (bench.pipeline.view) for the stages' writers and fills."""

    run_id: str
    settings: RunSettings
    device: str
    dataset: Dataset
    plan: Plan
    executor: Executor
    configs: tuple[ConfigRun, ...]
    scores: tuple[ConfigScores, ...]
    data_timing: StageTiming
    telemetry: Telemetry
    comps: Components
    #: generated configs' answer figures by config id (latency, abstention, judge validity)
    generation: dict[str, GenerationSummary] = field(default_factory=dict)
    #: the budget probe (None: no budget)
    probe: ProbeOutcome | None = None
    #: lost-in-the-middle configs' placement figures by config id (context=gold_position)
    gold_probes: dict[str, GoldProbeSummary] = field(default_factory=dict)
    #: the queries evaluated and the splits' contamination check (bench.data.subset, splits)
    selection: QuerySelection | None = None
    contamination: Contamination | None = None

    # the RunView's narrow doors (bench.pipeline.view)
    def value(self, node: Node) -> Any:
        return self.executor.value(node)

    @property
    def judge(self) -> Judge | None:
        return self.comps.judge

    @property
    def generator_sweep(self) -> GeneratorSweep | None:
        return self.comps.generator_sweep

    def component(self, group: str) -> object:
        return self.comps.get(group)

    def query_time_stages(self) -> tuple[str, ...]:
        return self.plan.query_time_stages()

    def e2e_stages(self, spec: ConfigSpec) -> tuple[str, ...]:
        return self.plan.e2e_stages(spec)
