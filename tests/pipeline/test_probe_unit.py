"""``bench.pipeline.probe`` on fake ops: which configs a chain budget prunes, by which node,
what a pruned prefix takes with it, and the work-saved arithmetic (no stage code, no model).

A fake query op sleeps a fixed time inside its timed stage, so its per-query milliseconds
are at least that long whatever the machine: a ceiling far below it is broken with
confidence, one far above it is not.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest

from bench.budget.chain import ChainBudget
from bench.cache.store import ArtifactStore
from bench.data.base import Dataset, Document, Query
from bench.pipeline.executor import Executor
from bench.pipeline.lanes import ConfigKind, ConfigSpec, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer, ValueOp
from bench.pipeline.plan import Plan
from bench.pipeline.probe import probe_configs, probe_json, probe_sample, work_saved
from bench.telemetry.base import TimingLog
from bench.telemetry.basic import BasicTelemetry


def _dataset(n_queries: int = 12) -> Dataset:
    docs = tuple(Document(f"d{i}", f"text {i}") for i in range(3))
    return Dataset("fake", docs, tuple(Query(f"q{i}", f"query {i}") for i in range(n_queries)))


@dataclass(frozen=True)
class StepInputs:
    data: Dataset


@dataclass(frozen=True)
class ChainInputs:
    prev: list[str]
    data: Dataset


@dataclass(frozen=True)
class Step(OpTraits):
    """A query-time step of ``sleep_ms`` per query, timed as ``stage`` (a root step reads
    the dataset; a chained one also its parent's value)."""

    name: str = "step"
    sleep_ms: float = 0.0
    stage: str = "step"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = StepInputs

    @property
    def latency_stages(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.stage,)

    @property
    def work_stages(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.stage,)

    def params(self) -> Mapping[str, Any]:
        return {"name": self.name, "sleep_ms": self.sleep_ms}

    def run(self, inputs: Any, timing: TimingLog) -> list[str]:
        return [f"{self.name}:{q.query_id}" for q in inputs.data.queries]

    def run_one(self, inputs: Any, query: OneQuery, timer: QueryTimer) -> list[str]:
        with timer.measure(self.stage):
            time.sleep(self.sleep_ms / 1000.0)
            return [f"{self.name}:{query.query.query_id}"]


@dataclass(frozen=True)
class ChainedStep(Step):
    Inputs: ClassVar[type] = ChainInputs


def _plan(slow_ms: float = 20.0, slow_base: bool = True
          ) -> tuple[Plan, dict[str, ConfigSpec], Dataset]:
    ds = _dataset()
    data = Node(ValueOp("data", ds), (), "data", root_key=ds.fingerprint)
    fast = Node.of(Step("fast", 0.0, stage="search"), "search", data=data)
    slow = Node.of(Step("slow", slow_ms, stage="search"), "search", data=data)
    on_slow = Node.of(ChainedStep("rerank", 0.0, stage="rerank"), "rerank", prev=slow,
                      data=data)
    on_fast = Node.of(ChainedStep("rerank", 0.0, stage="rerank"), "rerank", prev=fast,
                      data=data)
    specs = {"fast": lane("fast", ConfigKind.DENSE, fast, {}),
             "slow": lane("slow", ConfigKind.DENSE, slow, {})}
    specs["slow+rr"] = lane("slow+rr", ConfigKind.RERANKED, on_slow, {},
                            parent_id=specs["slow"].config_id)
    specs["fast+rr"] = lane("fast+rr", ConfigKind.RERANKED, on_fast, {},
                            parent_id=specs["fast"].config_id)
    if not slow_base:
        del specs["slow"]
    plan = Plan(data, data, data, data, data, data, None, tuple(specs.values()))
    return plan, specs, ds


def _probe(tmp_path: Path, budget: ChainBudget | None, slow_base: bool = True) -> Any:
    plan, specs, ds = _plan(slow_base=slow_base)
    ex = Executor(ArtifactStore(tmp_path), BasicTelemetry(), "cpu")
    comps = SimpleNamespace(budget=budget)
    out = probe_configs(comps, plan, ex, ds, "cpu", BasicTelemetry())  # type: ignore[arg-type]
    return out, plan, specs, ex


def test_a_stage_ceiling_prunes_the_node_that_broke_it_and_everything_built_on_it(
        tmp_path: Path) -> None:
    budget = ChainBudget(probe_queries=6, seed=3, max_stage_p95_ms={"search": 5.0},
                         resamples=200)
    out, _, specs, _ = _probe(tmp_path, budget)
    slow_search = specs["slow"].leaf
    assert out.pruned == {slow_search.key: out.configs[specs["slow"].config_id].pruned_reason}
    slow = out.configs[specs["slow"].config_id]
    assert slow.pruned_check is not None and slow.pruned_check.over
    assert slow.pruned_check.name == "stage_p95_ms[search]" and slow.pruned_check.bound >= 20.0
    assert slow.pruned_key == slow_search.key and not slow.by_prefix
    assert len(slow.stage_ms["search"]) == 6  # the sample; the warm-up query is not counted
    child = out.configs[specs["slow+rr"].config_id]
    assert child.by_prefix and not child.stage_ms and child.pruned_reason is not None
    assert child.pruned_reason.startswith("pruned prefix: stage_p95_ms[search]")
    for kept in ("fast", "fast+rr"):
        p = out.configs[specs[kept].config_id]
        assert p.pruned_reason is None and p.pruned_key is None
        assert all(not c.over for c in p.checks)
    # the reranked config's chain is both steps: its end to end is their per-query sum
    rr = out.configs[specs["fast+rr"].config_id]
    assert set(rr.stage_ms) == {"search", "rerank"}
    sums = np.add(rr.stage_ms["search"], rr.stage_ms["rerank"])
    assert np.allclose(rr.e2e_ms, sums)
    assert out.sample_query_ids == tuple(f"q{i}" for i in probe_sample(12, 6, 3))


def test_an_end_to_end_ceiling_prunes_the_config_leaf_not_the_stage_node(
        tmp_path: Path) -> None:
    # only the reranked config sits on the slow search: an end-to-end breach is the
    # config's, so its own leaf goes; a stage ceiling on "search" would take the search node
    e2e = ChainBudget(probe_queries=5, max_e2e_p95_ms=5.0, resamples=200)
    out, _, specs, _ = _probe(tmp_path, e2e, slow_base=False)
    child = specs["slow+rr"]
    slow_search = child.leaf.inputs[0]
    assert set(out.pruned) == {child.leaf.key}
    assert out.configs[child.config_id].pruned_check.name == "e2e_p95_ms"  # type: ignore[union-attr]
    stage = ChainBudget(probe_queries=5, max_stage_p95_ms={"search": 5.0}, resamples=200)
    out, _, _, _ = _probe(tmp_path / "stage", stage, slow_base=False)
    assert set(out.pruned) == {slow_search.key}


def test_a_ceiling_above_the_measured_figure_keeps_every_config(tmp_path: Path) -> None:
    budget = ChainBudget(probe_queries=4, max_stage_p95_ms={"search": 60_000.0},
                         max_e2e_p95_ms=60_000.0, resamples=200)
    out, _, specs, _ = _probe(tmp_path, budget)
    assert out.pruned == {}
    assert all(p.pruned_reason is None and p.checks for p in out.configs.values())
    assert len(out.configs) == len(specs)


def test_no_budget_probes_nothing(tmp_path: Path) -> None:
    out, _, _, ex = _probe(tmp_path, None)
    assert out.pruned == {} and out.configs == {} and ex.resolutions == []


def test_work_saved_counts_the_nodes_never_resolved_and_prices_them_from_the_probe(
        tmp_path: Path) -> None:
    budget = ChainBudget(probe_queries=6, seed=1, max_stage_p95_ms={"search": 5.0},
                         resamples=200)
    out, plan, specs, ex = _probe(tmp_path, budget)
    # the run resolves what survives: the fast search and its rerank
    ex.value(specs["fast+rr"].leaf)
    saved = work_saved(plan, ex, out, n_queries=12)
    assert saved["configs"] == 4 and saved["configs_pruned"] == 2
    assert saved["nodes_skipped"] == 2  # slow search and the rerank on it
    assert saved["skipped_by_stage"] == {"search": 1, "rerank": 1}
    slow = out.configs[specs["slow"].config_id]
    # the slow search's estimate: its probe mean x 12 queries; the rerank on it was never
    # probed (pruned by its prefix), so it has no estimate
    expected = float(np.mean(slow.stage_ms["search"])) * 12 / 1000.0
    assert saved["seconds_saved_estimate"] == pytest.approx(expected)
    assert saved["nodes_skipped_without_estimate"] == 1
    rows = {r["label"]: r for r in probe_json(out)}
    assert rows["slow"]["checks"][0]["over"] and rows["slow"]["n_queries"] == 6
    assert rows["slow+rr"]["by_prefix"] and rows["slow+rr"]["e2e_p50_ms"] is None
