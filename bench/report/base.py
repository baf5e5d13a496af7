"""Records and Protocol of the `report` stage.

Reporters read typed records only (never scrape printed output). Adding one: implement
``Reporter`` in a module here, add ``conf/report/<name>.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.capacity.base import CapacityRun
from bench.chunking.stage import ChunkReport
from bench.cost.prices import CostSummary
from bench.gates.regression import RegressionOutcome
from bench.metrics.decisions import DecisionRecord
from bench.metrics.stats import CompletionAccounting
from bench.results.records import (
    Comparison,
    ConfigRow,
    FilterDecisionRecord,
    GenerationSummary,
    GoldProbeSummary,
    SummaryRow,
)
from bench.results.scores import ConfigScores
from bench.rewrite.decide import RewriteReport
from bench.telemetry.base import ResourceSample, StageTiming


@dataclass(frozen=True)
class StageReport:
    """What a stage's own writer (``Stage.writer``) produced: the tables it wrote, its
    report.md section (markdown lines), its run.json entry (``stages.<name>``)."""

    name: str
    tables: tuple[str, ...]
    markdown: tuple[str, ...]
    manifest: dict[str, Any]


@dataclass(frozen=True)
class ConfigReport:
    config_id: str
    label: str
    query_params: dict[str, Any]
    accounting: CompletionAccounting
    summary: tuple[SummaryRow, ...]
    timings: tuple[StageTiming, ...]
    pruned_reason: str | None
    #: the config's row of configs.parquet (QPS, latency, index size, filter figures)
    ops: ConfigRow
    #: its per-query values (the paired Pareto rule pairs configs on them)
    scores: ConfigScores | None = None
    #: why it has no values: a served backend its chain needs failed during work
    failed_reason: str | None = None


@dataclass(frozen=True)
class RunReport:
    run_id: str
    run_dir: Path
    experiment: str
    device: str
    dataset_name: str
    dataset_fingerprint: str
    n_documents: int
    n_queries: int
    #: queries with no relevant (eligible) document: the unanswerable slice
    n_without_relevant: int
    n_chunks: int
    configs: tuple[ConfigReport, ...]
    #: rows of comparisons.parquet (each config vs the first, paired per query)
    comparisons: tuple[Comparison, ...]
    #: hard-vs-soft filter decisions (filters=hard_vs_soft), one per lane
    decisions: tuple[FilterDecisionRecord, ...]
    cache_hits: dict[str, bool]
    #: whether a filter stage ran (entitlement enforced)
    filters_enabled: bool
    #: chunk counts, token stats, traceability, near-duplicates (bench.chunking.stats)
    chunk_report: ChunkReport | None
    failed_gates: tuple[str, ...]
    wall_s: float
    resources: tuple[ResourceSample, ...]
    #: generated configs' answer figures (empty for a retrieval-only run)
    generation: tuple[GenerationSummary, ...] = ()
    #: lost-in-the-middle positions (context=gold_position), in plan order
    gold_probes: tuple[GoldProbeSummary, ...] = ()
    #: passages longer than the embedder's maximum length (embedded truncated)
    n_truncated_chunks: int = 0
    #: the computed sentence saying what was cut (``EmbeddingStats.truncation``)
    truncation: str = ""
    #: queries of the source left out for having no positive judgement, and why
    n_dropped_queries: int = 0
    dropped_reason: str = ""
    #: the capacity run of one config (``capacity.config``), None without one
    capacity: CapacityRun | None = None
    #: the capacity section as the run rendered it (``sections/capacity.md``), when the report
    #: is read back from the files (``bench.report.inrun``) instead of ``capacity``
    capacity_lines: tuple[str, ...] = ()
    #: the experiment's pre-registered decisions (``decisions:``), evaluated
    registered: tuple[DecisionRecord, ...] = ()
    #: regression gates against ``gates_against`` (None: no baseline)
    regression: RegressionOutcome | None = None
    #: lines for the report header: the queries evaluated, contamination warnings
    data_notes: tuple[str, ...] = ()
    #: release gates that held, one line each (value, bound, margin)
    passed_gates: tuple[str, ...] = ()
    #: cost per query by component of each priced config (``cost`` group)
    costs: tuple[CostSummary, ...] = ()
    #: query rewrites against the raw query, per slice, with verdicts (bench.rewrite.decide)
    rewrite: RewriteReport | None = None
    #: stages' own sections (``Stage.writer``: routing, iterative retrieval), in stage order
    stage_reports: tuple[StageReport, ...] = ()


class Reporter(Protocol):
    def write(self, report: RunReport) -> list[Path]:
        """Write report files into ``report.run_dir``; return their paths."""
        ...
