"""Stage writers and fills on a minimal ``RunView`` (bench.pipeline.view), not a whole
``Executed``: a frozen dataclass holding only what writers read, node values from a dict and
a fixed list of end-to-end stages. No executor, plan or components behind it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bench.cost.outputs import cost_columns, query_cost_of
from bench.cost.prices import Prices
from bench.data.base import Dataset, Document, Query
from bench.generation.base import Generation
from bench.judge import report as judge_report
from bench.judge.labelling import labelling_rows
from bench.pipeline.lanes import ConfigKind, ConfigSpec
from bench.pipeline.latency import LatencyRun
from bench.pipeline.node import Node, ValueOp
from bench.pipeline.outcome import ConfigRun
from bench.pipeline.outputs import RowInput
from bench.pipeline.record import core_columns
from bench.results.scores import ConfigScores
from bench.telemetry.base import StageTiming
from bench.telemetry.basic import BasicTelemetry

QIDS = ("q0", "q1")


def _node(label: str) -> Node:
    return Node(ValueOp(label, None), (), label, root_key=f"root-{label}")


@dataclass(frozen=True)
class MiniRun:
    """A ``RunView``: every member a writer may read, nothing else."""

    configs: tuple[ConfigRun, ...]
    scores: tuple[ConfigScores, ...]
    values: Mapping[str, Any] = field(default_factory=dict)  # node key -> its value
    parts: Mapping[str, object] = field(default_factory=dict)  # config group -> component
    run_id: str = "run-1"
    #: only ``settings.latency`` is read, and only for a config that was timed
    settings: Any = field(default_factory=lambda: SimpleNamespace(latency=None))
    dataset: Dataset = field(default_factory=lambda: Dataset(
        "mini", (Document("d0", "zero"),), tuple(Query(q, q) for q in QIDS)))
    generation: Mapping[str, Any] = field(default_factory=dict)
    probe: None = None
    telemetry: BasicTelemetry = field(default_factory=BasicTelemetry)
    judge: None = None
    generator_sweep: None = None

    def value(self, node: Node) -> Any:
        return self.values[node.key]

    def component(self, group: str) -> object:
        return self.parts.get(group)

    def query_time_stages(self) -> tuple[str, ...]:
        return ("retrieve",)

    def e2e_stages(self, spec: ConfigSpec) -> tuple[str, ...]:
        return ("retrieve",)


def _scores(cid: str, **values: list[float]) -> ConfigScores:
    return ConfigScores(cid, QIDS, ("a", "a"), {m: np.asarray(v) for m, v in values.items()},
                        {m: ("scored",) * len(QIDS) for m in values}, ())


def _gen(qid: str, prompt: int, output: int) -> Generation:
    return Generation(qid, f"answer {qid}", "ok", "stop", prompt, output, None, None, 1.0)


def test_a_generated_configs_cost_reads_its_answers_through_the_view() -> None:
    answers = _node("answers")
    spec = ConfigSpec("c1", "dense+gen", ConfigKind.GENERATED, answers, {}, answers=answers)
    timings = tuple(StageTiming("retrieve", "query", 1, ms, query_id=q)
                    for q, ms in zip(QIDS, (5.0, 15.0), strict=True))
    run = ConfigRun(spec, None, (), timings)
    view = MiniRun((run,), (_scores("c1"),),
                   values={answers.key: [_gen("q0", 100, 10), _gen("q1", 200, 20)]})
    prices = Prices(price_per_hour=3.6, prompt_price_per_mtok=2.0, output_price_per_mtok=10.0)
    costs = query_cost_of(run, view, prices)
    assert costs.query_ids == QIDS
    # 3.6 per hour = 1e-6 per ms; tokens at 2 / 10 per million
    assert costs.components["retrieval"] == pytest.approx([5.0e-6, 15.0e-6])
    assert costs.components["generation"] == pytest.approx(
        [(100 * 2.0 + 10 * 10.0) / 1e6, (200 * 2.0 + 20 * 10.0) / 1e6])
    cols = cost_columns(costs, prices)
    assert cols["cost_per_query"] == pytest.approx((5e-6 + 3e-4 + 15e-6 + 6e-4) / 2)


def test_the_cores_columns_of_a_pruned_config_from_the_view() -> None:
    spec = ConfigSpec("c2", "dense", ConfigKind.DENSE, _node("search"), {"k": 10})
    run = ConfigRun(spec, None, (), (), pruned_reason="over budget")
    view = MiniRun((run,), (_scores("c2"),))
    cols = core_columns(RowInput(run, view.scores[0], view, LatencyRun({}, [])))
    assert (cols["config_id"], cols["kind"], cols["params_json"], cols["status"],
            cols["pruned_reason"], cols["n_e2e_samples"], cols["unauthorized_hits"]) == (
        "c2", "dense", '{"k": 10}', "pruned", "over budget", 0, 0)


def test_the_judge_writer_without_a_judge_and_the_verifier_rates(tmp_path: Path) -> None:
    spec = ConfigSpec("c3", "dense+gen", ConfigKind.GENERATED, _node("verdicts"), {})
    view = MiniRun((ConfigRun(spec, None, (), ()),),
                   (_scores("c3", unsupported_numbers=[0.0, 1.0], nli_support=[1.0, 1.0]),))
    assert judge_report.write(view, tmp_path, (), LatencyRun({}, [])) is None
    assert labelling_rows(view) == []
    assert not any(tmp_path.iterdir())
    # in VERIFIER_METRICS order: (label, metric, mean, scored, expected)
    assert judge_report._verifier_rows(view) == [
        ("dense+gen", "unsupported_numbers", (0.0 + 1.0) / 2, 2, 2),
        ("dense+gen", "nli_support", 1.0, 2, 2)]
