"""The run as a stage's writer sees it: read-only, and only what writers read.

A stage's writer (``Stage.writer``) and its configs.parquet fill (``Outputs.fill``) take a
:class:`RunView`, never the engine's ``Executed``: the run's identity and settings, the
dataset, each config's run and scores, the per-config summaries the run computed, and three
narrow doors into the engine — a node's loaded value (:meth:`RunView.value`), the stages a
config's end-to-end latency sums (:meth:`RunView.e2e_stages`) and a built component by config
group (:meth:`RunView.component`). ``bench.pipeline.outcome.Executed`` satisfies it; a test
hands a writer any object with these members (``tests/pipeline/test_run_view.py``).

Adding a member: only when a writer reads it, typed, and as small as the question it answers
(a method returning a value, not the object that computes it). This module imports nothing at
run time, so a stage package may import it without pulling in the pipeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

    from bench.data.base import Dataset
    from bench.generation.sweep import GeneratorSweep
    from bench.judge.base import Judge
    from bench.pipeline.lanes import ConfigSpec
    from bench.pipeline.node import Node
    from bench.pipeline.outcome import ConfigRun
    from bench.pipeline.probe import ProbeOutcome
    from bench.pipeline.settings import RunSettings
    from bench.results.records import GenerationSummary
    from bench.results.scores import ConfigScores
    from bench.telemetry.base import Telemetry


class NodeValues(Protocol):
    """Loaded node values: what ``bench.pipeline.answers.answered`` reads."""

    def value(self, node: Node) -> Any:
        """``node``'s value as the run resolved it (computed or loaded from the cache)."""
        ...


class RunView(NodeValues, Protocol):
    """What a stage's writer or fill reads of a finished run."""

    @property
    def run_id(self) -> str: ...

    @property
    def settings(self) -> RunSettings: ...

    @property
    def dataset(self) -> Dataset: ...

    @property
    def configs(self) -> tuple[ConfigRun, ...]: ...

    @property
    def scores(self) -> tuple[ConfigScores, ...]:
        """One per config, in ``configs`` order."""
        ...

    @property
    def generation(self) -> Mapping[str, GenerationSummary]:
        """Generated configs' answer figures by config id."""
        ...

    @property
    def probe(self) -> ProbeOutcome | None:
        """The budget probe (None: no budget)."""
        ...

    @property
    def telemetry(self) -> Telemetry: ...

    @property
    def judge(self) -> Judge | None:
        """The run's judge (None: no judge)."""
        ...

    @property
    def generator_sweep(self) -> GeneratorSweep | None:
        """``generator=sweep``: every generator of the run (None: one generator)."""
        ...

    def component(self, group: str) -> object:
        """The component built for config group ``group`` (None: disabled); callers check
        its type."""
        ...

    def query_time_stages(self) -> tuple[str, ...]:
        """The latency stages of the plan's query-time ops, in chain order."""
        ...

    def e2e_stages(self, spec: ConfigSpec) -> tuple[str, ...]:
        """The stages whose samples add up to ``spec``'s end-to-end latency."""
        ...
