"""Build a run's components from its config; validate the top level before any work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from bench.budget.base import Budget
from bench.chunking.base import Chunker
from bench.config.build import build
from bench.config.toplevel import validate_top_level_config
from bench.data.base import DatasetSource
from bench.embedding.base import Embedder
from bench.errors import ConfigError
from bench.filters.base import ResultFilter
from bench.filters.hard_vs_soft import HardVsSoft
from bench.fusion.base import Fusion
from bench.index.base import VectorIndex
from bench.lexical.base import LexicalIndex
from bench.report.base import Reporter
from bench.rerank.base import Reranker
from bench.retrieval.base import Retriever

#: groups whose stages this pipeline does not run yet; they must be `none`
DISABLED_ONLY = ("generator", "judge")


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
    reranker: Reranker | None
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
        build(cfg.reranker, "reranker", device=device),
        build(cfg.budget, "budget"), build(cfg.report, "report"),
    )


def validate_top_level(cfg: DictConfig) -> None:
    # unknown `+` keys, huge ints, gates that can never fire, cache_dir on a file: see there
    validate_top_level_config(cfg)
