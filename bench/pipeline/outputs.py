"""What a stage produces, declared next to it: its configs.parquet columns, its per-query
statuses, the config kinds it introduces and the cost component of its latency stages.

A stage entry (``bench.pipeline.stages``) names its :class:`Outputs` (``outputs=``, a value or
``"module:NAME"`` of a light module in the stage's package). The results side is a fold over
the stage list: configs.parquet's schema (``bench.results.schema.CONFIGS``), summary.parquet's
completion counts, the statuses that carry a value, the completion shares, the gateable config
metrics and each latency stage's cost component are assembled from these declarations plus
the core's (:data:`CORE`: what every config has whatever its stages). ``write_results`` fills
a config's row by calling each declared ``fill`` in stage order and knows no stage by name;
a stage's own tables, report.md section and run.json entry come from its ``writer``
(``Stage.writer``).

This module imports nothing heavy: the config schema reads the declarations before argument
parsing, and fills are named (``"module:function"``), imported when a run writes its rows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.outcome import ConfigRun
    from bench.pipeline.view import RunView
    from bench.results.scores import ConfigScores

#: Arrow types a declared column may have (``bench.results.schema`` maps them to pyarrow)
COLUMN_TYPES = ("float64", "int64", "int32", "string", "bool")


@dataclass(frozen=True)
class Column:
    """One configs.parquet column a stage fills (one value per config; None where the config
    has no such figure unless ``nullable`` is False)."""

    name: str
    type: str  # one of COLUMN_TYPES
    nullable: bool = True
    doc: str = ""

    def __post_init__(self) -> None:
        if self.type not in COLUMN_TYPES:
            raise ValueError(f"column {self.name}: type {self.type!r} is not one of "
                             f"{', '.join(COLUMN_TYPES)}")


@dataclass(frozen=True)
class QueryStatus:
    """A per-(query, metric) status a stage can give (per_query.parquet ``status``).

    ``valued``: the query keeps its value (scored on what it had: ``missing_run`` as an empty
    ranking, ``budget_exhausted`` on the loop's evidence); otherwise its value is null and it
    is counted, never averaged. ``incomplete``: it counts into configs.parquet's
    ``incomplete_share`` (the work for that query did not complete). ``count_column``: its
    summary.parquet count (default ``n_<name>``); ``share_column``: the configs.parquet column
    holding, per config, the largest share over its metrics of expected queries in this status
    (None: no such column)."""

    name: str
    valued: bool
    incomplete: bool = False
    count_column: str = ""
    share_column: str | None = None
    doc: str = ""

    @property
    def count(self) -> str:
        return self.count_column or f"n_{self.name}"


@dataclass(frozen=True)
class RowInput:
    """What a fill reads for one config: its run, its scores, the run as writers see it
    (``done``, a ``bench.pipeline.view.RunView``) and the interleaved latency pass."""

    run: ConfigRun
    scores: ConfigScores
    done: RunView
    latency: LatencyRun


#: a fill: (what the config ran, its row so far by column) -> the columns it fills
Fill = Callable[[RowInput, Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class Outputs:
    """A stage's declared outputs.

    ``columns``: the configs.parquet columns it fills, computed by ``fill``
    (``"module:function"``, ``(RowInput, row so far) -> {column: value}``; called for every
    config in stage-list order after the core's, so it may read columns filled before it).
    ``statuses``: the per-query statuses its ops can give. ``kinds``: the config kinds
    (configs.parquet ``kind``) its expander introduces. ``cost``: (latency stage, cost
    component) for its latency stages whose time is not retrieval work (``bench.cost.prices``:
    embedding, retrieval, rerank, generation; unlisted stages are retrieval). ``writer``: its
    own tables, report.md section and run.json ``stages.<name>`` entry (see ``Stage.writer``)."""

    columns: tuple[Column, ...] = ()
    fill: str | None = None
    statuses: tuple[QueryStatus, ...] = ()
    kinds: tuple[str, ...] = ()
    cost: tuple[tuple[str, str], ...] = ()
    #: ``"module:function"`` writing the stage's own tables after the run's, returning its
    #: report.md section and run.json entry (``Stage.writer``; either place)
    writer: str | None = None

    def filled(self, row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
        """This stage's columns of one config (checked against its declaration)."""
        if self.fill is None:
            return {}
        fill: Fill = named(self.fill)
        out = dict(fill(row, so_far))
        mine = {c.name for c in self.columns}
        stray = set(out) - mine
        if stray:
            raise ValueError(f"{self.fill} filled undeclared columns {sorted(stray)}")
        return out


def named(path: str) -> Any:
    """The object a ``"module:NAME"`` string names (imported on first use)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _f(name: str, doc: str = "") -> Column:
    return Column(name, "float64", True, doc)


#: per-(query, metric) statuses of the core (docs/metrics.md completion accounting): scored,
#: an empty ranking (scored 0, as trec_eval -c, and counted), work that did not complete
#: (counted into ``incomplete_share``), a judge that found nothing to check, a pruned config
CORE_STATUSES = (
    QueryStatus("scored", valued=True, count_column="n_scored"),
    QueryStatus("missing_run", valued=True, count_column="n_missing",
                doc="an empty ranking, scored 0 as trec_eval -c and counted"),
    QueryStatus("timeout", valued=False, incomplete=True, share_column="timeout_share"),
    QueryStatus("invalid", valued=False, incomplete=True, share_column="invalid_share"),
    QueryStatus("no_claims", valued=False),
    QueryStatus("pruned", valued=False),
    QueryStatus("failed", valued=False, incomplete=True, share_column="failed_share"),
)

#: configs.parquet columns every config has, filled by the core (``bench.pipeline.record``):
#: identity, end-to-end latency along the chain, entitlement, completion, peak VRAM
CORE_COLUMNS = (
    Column("schema_version", "int32", False), Column("run_id", "string", False),
    Column("config_id", "string", False), Column("label", "string", False),
    Column("kind", "string", False), Column("params_json", "string", False),
    Column("parent_config_id", "string"), Column("status", "string", False),
    Column("pruned_reason", "string"),
    _f("e2e_p50_ms"), _f("e2e_p95_ms"), _f("e2e_p99_ms"),
    Column("n_e2e_samples", "int64", False),
    Column("unauthorized_hits", "int64", False),
    Column("peak_vram_bytes", "int64"), Column("peak_vram_measure", "string"),
    _f("e2e_p50_ci_low"), _f("e2e_p50_ci_high"), _f("e2e_p95_ci_low"), _f("e2e_p95_ci_high"),
    _f("e2e_p99_ci_low"), _f("e2e_p99_ci_high"),
    Column("n_latency_warmup", "int64"), Column("latency_source", "string"),
    _f("incomplete_share"), Column("incomplete_metric", "string"),
)

#: the core's declarations (every config, whatever its stages)
CORE = Outputs(columns=CORE_COLUMNS, statuses=CORE_STATUSES,
               kinds=("dense", "lexical", "fused", "reranked", "generated"))


def percentiles(ms: list[float]) -> tuple[float | None, float | None, float | None]:
    """p50 / p95 / p99 of ``ms`` (None each when empty)."""
    if not ms:
        return None, None, None
    import numpy as np

    p50, p95, p99 = (float(x) for x in np.percentile(np.asarray(ms), [50, 95, 99]))
    return p50, p95, p99
