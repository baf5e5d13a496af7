"""Build a run's components from its config; validate the top level before any work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from bench.budget.base import Budget
from bench.chunking.base import Chunker
from bench.config.build import build
from bench.config.toplevel import validate_top_level_config
from bench.context.base import ContextBuilder, ContextSweep
from bench.data.base import DatasetSource
from bench.embedding.base import Embedder
from bench.errors import ConfigError
from bench.filters.base import ResultFilter
from bench.filters.hard_vs_soft import HardVsSoft
from bench.fusion.base import Fusion
from bench.generation.base import Generator
from bench.index.base import VectorIndex
from bench.judge.base import Judge
from bench.lexical.base import LexicalIndex
from bench.metrics.answer import AnswerChecks
from bench.report.base import Reporter
from bench.rerank.base import Reranker
from bench.retrieval.base import Retriever

#: groups whose stages this pipeline does not run yet; they must be `none`
DISABLED_ONLY: tuple[str, ...] = ()


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
    #: generation variants (all None for a retrieval-only run)
    generator: Generator | None = None
    context: ContextBuilder | ContextSweep | None = None
    answers: AnswerChecks | None = None
    judge: Judge | None = None


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
    generator, context, answers, judge = build_generation(cfg)
    return Components(
        required["dataset"], required["chunker"], required["embedder"], required["index"],
        required["retriever"], lexical, fusion, build(cfg.filters, "filters"),
        build(cfg.reranker, "reranker", device=device),
        build(cfg.budget, "budget"), build(cfg.report, "report"),
        generator, context, answers, judge,
    )


def build_generation(cfg: DictConfig) -> tuple[Generator | None,
                                                ContextBuilder | ContextSweep | None,
                                                AnswerChecks | None, Judge | None]:
    """The generator, context builder, answer checks and judge of a run.

    The judge model: ``judge.generator`` (a generator block, e.g.
    ``+generator@judge.generator=vllm judge.generator.model=...``) when given, else the run's
    own generator. Judges read answers, so a judge without a generator is a config error.
    """
    from bench.generation.stage import check_generation_config

    generator = build(cfg.generator, "generator")
    if generator is None:
        if build_judge_target(cfg) is not None:
            raise ConfigError("judge", "judges read generated answers: set generator=... too")
        return None, None, None, None
    check_generation_config(cfg.generation)
    if cfg.generation.memo:
        generator = memoised(generator, cfg)
    context = build(cfg.context, "context")
    if context is None:
        raise ConfigError("context", "a generator needs a context builder (context=budgeted)")
    answers = build(cfg.answers, "answers")
    judge = None
    node = build_judge_target(cfg)
    if node is not None:
        judge_gen = generator
        if "generator" in node:
            judge_gen = build(node.pop("generator"), "judge.generator")
            if judge_gen is None:  # `_target_: null` in the block: the run's generator
                judge_gen = generator
            elif cfg.generation.memo:
                judge_gen = memoised(judge_gen, cfg)
        judge = build(node, "judge", generator=judge_gen)
    return generator, context, answers, judge


def memoised(generator: Generator, cfg: DictConfig) -> Generator:
    """``generator`` behind the prompt memo (``generation.memo``), stored in the run's cache."""
    from pathlib import Path

    from bench.cache.store import ArtifactStore
    from bench.generation.memo import MemoGenerator

    return MemoGenerator(generator, ArtifactStore(Path(cfg.cache_dir).expanduser()))


def build_judge_target(cfg: DictConfig) -> dict[str, Any] | None:
    """The judge config as a plain dict, or None for `judge=none`."""
    from bench.config.build import target_of, to_container

    if target_of({k: v for k, v in to_container(cfg.judge).items() if k != "generator"},
                 "judge") is None:
        return None
    return dict(to_container(cfg.judge))


def validate_top_level(cfg: DictConfig) -> None:
    # unknown `+` keys, huge ints, gates that can never fire, cache_dir on a file: see there
    validate_top_level_config(cfg)
