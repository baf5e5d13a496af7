"""The in-run report's model read from a finished run dir: ``run_report(run_dir) -> RunReport``.

The run writes its tables and run.json first; report.md is then rendered from what this module
reads back (``bench.report.load.load_run`` for the Parquet tables, ``bench.report.manifest``
for run.json), never from the pipeline's memory. So ``python -m bench.report RUN_DIR --in-run``
re-renders the report.md the run wrote, byte for byte (a later renderer fix applies to old
runs too).

Sections a stage renders itself (``Stage.writer``) and the capacity section are read from
``report_sections/<name>.md``, which the run writes beside its tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.metrics.stats import CompletionAccounting
from bench.report.base import ConfigReport, RunReport, StageReport
from bench.report.load import ConfigView, load_run
from bench.report.manifest import RunManifest, read_manifest, records
from bench.telemetry.base import StageTiming

#: where a run keeps the report sections rendered by stages (and capacity)
SECTIONS = "report_sections"
CAPACITY_SECTION = "capacity"


def section_path(run_dir: Path, name: str) -> Path:
    return run_dir / SECTIONS / f"{name}.md"


def write_sections(run_dir: Path, sections: Sequence[tuple[str, Sequence[str]]]) -> None:
    """``report_sections/<name>.md`` for each (name, markdown lines) with lines."""
    from bench.results.write import atomic_write_bytes

    for name, lines in sections:
        if lines:
            path = section_path(run_dir, name)
            path.parent.mkdir(exist_ok=True)
            atomic_write_bytes(path, "\n".join(lines).encode())


def read_section(run_dir: Path, name: str) -> tuple[str, ...]:
    path = section_path(run_dir, name)
    return tuple(path.read_text().split("\n")) if path.is_file() else ()


def run_report(run_dir: Path) -> RunReport:
    """The report model of the finished run in ``run_dir``, from its files."""
    from bench.chunking.stage import ChunkReport
    from bench.cost.prices import CostSummary
    from bench.gates.regression import RegressionOutcome
    from bench.gates.release import GateResult
    from bench.metrics.decisions import DecisionRecord
    from bench.results.records import (
        FilterDecisionRecord,
        GenerationSummary,
        GoldProbeSummary,
    )
    from bench.rewrite.decide import RewriteReport
    from bench.telemetry.base import ResourceSample

    m = read_manifest(run_dir)
    data = load_run(run_dir)
    timings = _timings(data.timings)
    configs = tuple(_config_report(v, m, timings.get(v.config_id, ())) for v in data.configs)
    gen = m.section("generation") or {}
    gates: tuple[GateResult, ...] = m.typed("gates", tuple[GateResult, ...]) or ()
    cost = m.section("cost")
    chunks = m.section("chunks")
    return RunReport(
        run_id=m.run_id, run_dir=run_dir, experiment=m.experiment, device=m.device,
        dataset_name=m.dataset.name, dataset_fingerprint=m.dataset.fingerprint,
        n_documents=m.dataset.documents, n_queries=m.dataset.queries,
        n_without_relevant=m.dataset.queries - _n_expected(data.configs, m),
        n_chunks=m.dataset.chunks, configs=configs, comparisons=data.comparisons,
        decisions=m.typed("filter_decisions", tuple[FilterDecisionRecord, ...]) or (),
        cache_hits=dict(m.cache_hits), filters_enabled=m.filters_enabled,
        chunk_report=None if chunks is None else ChunkReport.from_json(chunks),
        failed_gates=m.failed_gates, wall_s=m.wall_s,
        resources=m.typed("resources", tuple[ResourceSample, ...]) or (),
        generation=records(tuple[GenerationSummary, ...],
                           list((gen.get("configs") or {}).values()), "generation.configs",
                           m.path),
        gold_probes=m.typed("lost_in_middle", tuple[GoldProbeSummary, ...]) or (),
        n_truncated_chunks=m.truncated_chunks, truncation=m.truncation,
        n_dropped_queries=m.dataset.dropped_queries, dropped_reason=m.dataset.dropped_reason,
        capacity_lines=read_section(run_dir, CAPACITY_SECTION),
        registered=m.typed("preregistered_decisions", tuple[DecisionRecord, ...]) or (),
        regression=m.typed("regression_gates", RegressionOutcome),
        data_notes=m.data_notes, passed_gates=tuple(g.line for g in gates if g.passed),
        costs=() if cost is None else records(tuple[CostSummary, ...], cost.get("configs") or [],
                                              "cost.configs", m.path),
        rewrite=m.typed("rewrite", RewriteReport),
        stage_reports=tuple(_stage_report(run_dir, name, entry)
                            for name, entry in m.stages.items()))


def _config_report(v: ConfigView, m: RunManifest, timings: Sequence[StageTiming]
                   ) -> ConfigReport:
    entry = m.configs.get(v.config_id)
    completion = CompletionAccounting(**entry.completion) if entry is not None \
        else CompletionAccounting(0, 0, 0, 0, 0, 0, 0)
    return ConfigReport(
        v.config_id, v.label, dict(entry.params) if entry is not None else v.params,
        completion, tuple(v.summary.values()), tuple(timings), v.row.pruned_reason, v.row,
        v.scores, failed_reason=None if entry is None else entry.failed_reason)


def _timings(table: pa.Table | None) -> dict[str, list[StageTiming]]:
    """config id -> its timing samples in recorded order."""
    out: dict[str, list[StageTiming]] = {}
    if table is None:
        return out
    names = set(table.column_names)
    for r in table.to_pylist():
        out.setdefault(r["config_id"], []).append(StageTiming(
            r["stage"], r["sample_kind"], int(r["n_items"]), float(r["wall_ms"]),
            r.get("device", "cpu") if "device" in names else "cpu",
            bool(r.get("from_cache", False)), r.get("query_id")))
    return out


def _n_expected(views: Sequence[ConfigView], m: RunManifest) -> int:
    """Queries the first config is scored on (those with a relevant document): its rows in
    per_query.parquet, else its completion's ``expected``."""
    if views and views[0].scores is not None:
        return len(views[0].scores.query_ids)
    first = next(iter(m.configs.values()), None)
    return int(first.completion.get("expected", 0)) if first is not None else 0


def _stage_report(run_dir: Path, name: str, entry: Any) -> StageReport:
    manifest = dict(entry) if isinstance(entry, dict) else {}
    tables = tuple(manifest.pop("tables", ()) or ())
    return StageReport(name, tables, read_section(run_dir, name), manifest)


def reporter_of(m: RunManifest) -> Any:
    """The run's reporter as configured (``report`` group of the resolved config), for a
    re-render: MarkdownReport's options (primary metrics, title); no plot."""
    from bench.report.markdown import MarkdownReport

    block = m.config.get("report") or {}
    return MarkdownReport(primary_metrics=list(block.get("primary_metrics") or [])
                          or None, plot=False, title=str(block.get("title") or ""))


def rerender(run_dir: Path, out: Path | None = None) -> Path:
    """Render ``run_dir``'s report.md again from its files into ``out`` (default: in place)."""
    from bench.results.write import atomic_write_bytes

    text = reporter_of(read_manifest(run_dir)).render(run_report(run_dir))
    path = out or run_dir / "report.md"
    atomic_write_bytes(path, text.encode())
    return path
