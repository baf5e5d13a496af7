"""A stage brings new outputs through its declarations alone (issue 30, part 1).

A stand-in stage, written here as a stage package would be (its op, expander, fill and
writer below; its entry added to the stage list by the test, which is the one line a real
stage adds to ``bench/pipeline/stages.py``), declares a configs.parquet column, a per-query
status that counts as incomplete, a config kind and a report section. No central file names
any of them; the run must still put the column in configs.parquet, the status in
per_query.parquet with its count in summary.parquet and its share in configs.parquet (and in
``incomplete_share``), the section in report.md and the entry in run.json.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.parquet as pq
import pytest

from bench.data.base import Dataset
from bench.pipeline.lanes import PlanState, Stage, label_of, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.pipeline.outputs import Column, Outputs, QueryStatus, RowInput
from bench.pipeline.statuses import merge_statuses
from bench.retrieval.base import Pool
from bench.telemetry.base import TimingLog

# --- the stand-in stage's package --------------------------------------------------------

SKIPPED = "standin_skipped"
KIND = "standin"


@dataclass(frozen=True)
class SkipInputs:
    pool: Pool
    data: Dataset


@dataclass(frozen=True)
class SkipOp(OpTraits):
    """Passes a pool through, except the dataset's first query with a relevant document: it
    gets status ``standin_skipped`` (no ranking, like a request that never completed)."""

    stage: str = "standin"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = SkipInputs
    latency_stages: ClassVar[tuple[str, ...]] = ("standin",)

    def params(self) -> Mapping[str, Any]:
        return {}

    def _skip(self, inputs: SkipInputs, first: str) -> Pool:
        return Pool(inputs.pool.hits, inputs.pool.chunk_result,
                    status=merge_statuses(inputs.pool.status, {first: SKIPPED}))

    def run(self, inputs: SkipInputs, timing: TimingLog) -> Pool:
        with timing.measure("total", inputs.pool.hits.n_queries):
            first = next(q.query_id for q in inputs.data.queries
                         if any(g >= 1 for _, g in q.qrels))
            return self._skip(inputs, first)

    def run_one(self, inputs: SkipInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        with timer.measure("standin"):
            return Pool(inputs.pool.hits, inputs.pool.chunk_result, status=inputs.pool.status)


def expand(s: PlanState) -> PlanState:
    """After each dense config, a ``standin`` config over its pool."""
    out = list(s.configs)
    for c in s.configs:
        if str(c.kind) == "dense":
            node = Node.of(SkipOp(), "standin", pool=c.leaf, data=s.node("data"))
            out.append(lane(label_of(f"{c.label}>standin", {}), KIND, node, {},
                            parent_id=c.config_id))
    return s.with_configs(out)


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    """``standin_queries_kept``: queries the stand-in kept (None on other configs)."""
    if row.run.node("standin") is None or row.run.pool is None:
        return {"standin_queries_kept": None}
    return {"standin_queries_kept": row.run.pool.hits.n_queries - len(row.run.pool.status or {})}


def write(done: Any, run_dir: Path, comparisons: Sequence[Any], latency: Any) -> Any:
    from bench.report.base import StageReport

    kept = [c for c in done.configs if c.node("standin") is not None]
    return StageReport("standin", (), ("## Stand-in stage", "",
                                       f"{len(kept)} stand-in config(s).", ""),
                       {"configs": [c.spec.config_id for c in kept]})


OUTPUTS = Outputs(columns=(Column("standin_queries_kept", "int64"),),
                  fill="test_declared_outputs:fill",
                  statuses=(QueryStatus(SKIPPED, valued=False, incomplete=True,
                                        share_column="standin_skipped_share"),),
                  kinds=(KIND,), writer="test_declared_outputs:write")

#: its stage-list entry (the one line a real stage adds to bench/pipeline/stages.py)
ENTRY = Stage("standin", (), "test_declared_outputs:expand",
              config_metrics=("standin_queries_kept",), config_kinds=(KIND,),
              outputs="test_declared_outputs:OUTPUTS")

# --- the test ----------------------------------------------------------------------------


@pytest.fixture
def with_standin(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.gates.release as gates
    import bench.pipeline.plan as plan
    import bench.pipeline.record as record
    import bench.pipeline.stages as stages

    entries = list(stages.STAGES)
    at = next(i for i, s in enumerate(entries) if s.name == "rerank")
    new = (*entries[:at], ENTRY, *entries[at:])
    # the modules that imported the list by name see the same new list
    for m in (stages, plan, record, gates):
        monkeypatch.setattr(m, "STAGES", new)


def test_the_schema_is_assembled_from_the_declarations(with_standin: None) -> None:
    from bench.results import schema
    from bench.results.records import Accounting

    configs = schema.CONFIGS
    # schema 5's columns first, byte for byte, then the stage's own
    assert configs.names[:len(schema._CONFIGS_V5)] == schema._CONFIGS_V5.names
    assert configs.names[len(schema._CONFIGS_V5):] == ["standin_queries_kept",
                                                       "standin_skipped_share"]
    assert schema.SUMMARY.names[-1] == "n_standin_skipped"
    a = Accounting.of(["scored", SKIPPED, "failed", SKIPPED])
    assert (a.n_expected, a.n_scored, a.n_failed, a.count(SKIPPED)) == (4, 1, 1, 2)
    assert a.columns()["n_standin_skipped"] == 2


@pytest.mark.slow  # a whole run on the synthetic corpus (about 15 s on one core)
def test_a_new_stage_lands_in_every_output_without_central_edits(
        compose_cfg, with_standin: None, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    cfg = compose_cfg(["+experiment=quickstart", "dataset=synthetic",
                       f"cache_dir={tmp_path / 'cache'}", "metrics.bootstrap_resamples=100",
                       "report.plot=false", "latency.queries=4", "latency.warmup=1"])
    res = run(cfg, tmp_path / "run")
    assert res.exit_code == 0
    d = tmp_path / "run"
    configs = {r["label"]: r for r in pq.read_table(d / "configs.parquet").to_pylist()}
    mine = [r for r in configs.values() if r["kind"] == KIND]
    assert len(mine) == 1
    row = mine[0]
    per_query = [r for r in pq.read_table(d / "per_query.parquet").to_pylist()
                 if r["config_id"] == row["config_id"]]
    skipped = {r["query_id"] for r in per_query if r["status"] == SKIPPED}
    expected = {r["query_id"] for r in per_query}
    n_queries = json.loads((d / "run.json").read_text())["dataset"]["queries"]
    # the column: every query but one kept; other configs have none
    assert row["standin_queries_kept"] == n_queries - 1
    assert all(r["standin_queries_kept"] is None for r in configs.values() if r is not row)
    # the status: one query, no value, counted
    assert len(skipped) == 1
    assert all(r["value"] is None for r in per_query if r["status"] == SKIPPED)
    summary = [r for r in pq.read_table(d / "summary.parquet").to_pylist()
               if r["config_id"] == row["config_id"] and r["scope"] == "all"]
    assert summary and all(r["n_standin_skipped"] == len(skipped) for r in summary)
    assert all(r["n_scored"] == len(expected) - len(skipped) for r in summary)
    # its share, and it counts as incomplete
    assert row["standin_skipped_share"] == pytest.approx(len(skipped) / len(expected))
    assert row["incomplete_share"] == pytest.approx(len(skipped) / len(expected))
    others = [r for r in configs.values() if r is not row and r["status"] == "ok"]
    assert all(r["standin_skipped_share"] == 0.0 for r in others)
    # the section and the run.json entry
    report = (d / "report.md").read_text()
    assert "## Stand-in stage" in report and "1 stand-in config(s)." in report
    manifest = json.loads((d / "run.json").read_text())
    assert manifest["stages"]["standin"]["configs"] == [row["config_id"]]
