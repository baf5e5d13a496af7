"""Components of a run and its mutable bookkeeping; config validation before any work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from bench.budget.base import Budget
from bench.cache.store import ArtifactStore
from bench.chunking.base import Chunker
from bench.config.build import build
from bench.config.toplevel import validate_top_level_config
from bench.data.base import Dataset, DatasetSource
from bench.embedding.base import Embedder, EmbeddingStats
from bench.errors import ConfigError
from bench.filters.base import FilterOutcome, ResultFilter
from bench.filters.hard_vs_soft import HardVsSoft
from bench.fusion.base import Fusion
from bench.index.base import BuildInfo, VectorIndex
from bench.lexical.base import LexicalIndex
from bench.pipeline import stages
from bench.pipeline.summarize import SummaryRow
from bench.report.base import Reporter
from bench.retrieval.base import Retriever
from bench.telemetry.base import StageTiming, Telemetry

#: groups whose stages this pipeline does not run yet; they must be `none`
DISABLED_ONLY = ("reranker", "generator", "judge")
#: groups that shape the candidates, hashed into every config_id
PIPELINE_GROUPS = ("dataset", "chunker", "embedder", "index", "retriever", "lexical",
                   "fusion", "filters", "reranker", "generator", "judge")


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    run_id: str
    exit_code: int
    summary: tuple[SummaryRow, ...]
    cache_hits: dict[str, bool] = field(default_factory=dict)
    failed_gates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Components:
    source: DatasetSource
    chunker: Chunker
    embedder: Embedder
    index: VectorIndex
    retriever: Retriever
    lexical: LexicalIndex | None
    fusion: Fusion | None
    filters: ResultFilter | HardVsSoft | None
    budget: Budget | None
    reporter: Reporter | None


def build_components(cfg: DictConfig, device: str) -> Components:
    for group in DISABLED_ONLY:
        if build(cfg[group], group) is not None:
            raise ConfigError(group, "this stage is not part of the pipeline yet; use `none`")
    required: dict[str, Any] = {
        "dataset": build(cfg.dataset, "dataset"),
        "chunker": build(cfg.chunker, "chunker"),
        "embedder": build(cfg.embedder, "embedder", device=device),
        "index": build(cfg.index, "index", device=device),
        "retriever": build(cfg.retriever, "retriever"),
    }
    for group, obj in required.items():
        if obj is None:
            raise ConfigError(group, "this stage is required; `_target_` must not be null")
    fusion = build(cfg.fusion, "fusion")
    lexical = build(cfg.lexical, "lexical")
    if fusion is not None and lexical is None:
        raise ConfigError("fusion", "fusing needs a lexical lane: set lexical=bm25")
    return Components(
        required["dataset"], required["chunker"], required["embedder"], required["index"],
        required["retriever"], lexical, fusion, build(cfg.filters, "filters"),
        build(cfg.budget, "budget"), build(cfg.report, "report"),
    )


def validate_top_level(cfg: DictConfig) -> None:
    # unknown `+` keys, huge ints, gates that can never fire, cache_dir on a file: see there
    validate_top_level_config(cfg)


@dataclass
class RunContext:
    """Mutable bookkeeping of one run (never crosses a stage boundary)."""

    cfg: DictConfig
    comps: Components
    store: ArtifactStore
    telemetry: Telemetry
    device: str
    run_id: str
    pipeline: dict[str, Any]
    nodes: dict[str, stages.Node] = field(default_factory=dict)
    base_timings: list[StageTiming] = field(default_factory=list)
    pruned: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    embedding_stats: EmbeddingStats | None = None
    build_info: BuildInfo | None = None
    n_chunks: int = 0
    filter_outcomes: dict[str, FilterOutcome] = field(default_factory=dict)
    #: lane label -> {"hard": config_id, "soft": config_id} when filters=hard_vs_soft
    filter_pairs: dict[str, dict[str, str]] = field(default_factory=dict)
    dataset_ref: Dataset | None = None
    chunk_report: dict[str, Any] = field(default_factory=dict)


