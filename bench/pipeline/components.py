"""Build a run's components from its config; validate the top level before any work."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig

from bench.budget.base import Budget
from bench.chunking.base import Chunker
from bench.config.build import build
from bench.context.base import ContextBuilder, ContextSweep
from bench.data.base import DatasetSource
from bench.embedding.base import Embedder
from bench.errors import ConfigError
from bench.filters.base import ResultFilter
from bench.filters.hard_vs_soft import HardVsSoft
from bench.fusion.base import Fusion
from bench.generation.base import Generator
from bench.generation.memo import memoised
from bench.generation.sweep import GeneratorSweep
from bench.index.base import VectorIndex
from bench.judge.base import Judge
from bench.lexical.base import LexicalIndex
from bench.metrics.answer import AnswerChecks
from bench.rerank.base import Reranker
from bench.retrieval.base import Retriever

if TYPE_CHECKING:
    from bench.report.base import Reporter


@dataclass(frozen=True)
class Components:
    """Every stage's built components by config group (``None``: the group is disabled),
    built from the stage list. Typed accessors name the core stages; a stage added later
    reads its own with ``get(group)``."""

    parts: Mapping[str, Any]

    def get(self, group: str) -> Any:
        if group not in self.parts:
            raise KeyError(f"no config group {group!r}; groups: {', '.join(self.parts)}")
        return self.parts[group]

    @property
    def source(self) -> DatasetSource:
        return cast(DatasetSource, self.parts["dataset"])

    @property
    def chunker(self) -> Chunker:
        return cast(Chunker, self.parts["chunker"])

    @property
    def embedder(self) -> Embedder:
        return cast(Embedder, self.parts["embedder"])

    @property
    def index(self) -> VectorIndex:
        return cast(VectorIndex, self.parts["index"])

    @property
    def retriever(self) -> Retriever:
        return cast(Retriever, self.parts["retriever"])

    @property
    def lexical(self) -> LexicalIndex | None:
        return cast("LexicalIndex | None", self.parts.get("lexical"))

    @property
    def fusion(self) -> Fusion | None:
        return cast("Fusion | None", self.parts.get("fusion"))

    @property
    def filters(self) -> ResultFilter | HardVsSoft | None:
        return cast("ResultFilter | HardVsSoft | None", self.parts.get("filters"))

    @property
    def reranker(self) -> Reranker | None:
        return cast("Reranker | None", self.parts.get("reranker"))

    @property
    def budget(self) -> Budget | None:
        return cast("Budget | None", self.parts.get("budget"))

    @property
    def reporter(self) -> Reporter | None:
        return cast("Reporter | None", self.parts.get("report"))

    @property
    def generator(self) -> Generator | None:
        return cast("Generator | None", self.parts.get("generator"))

    @property
    def context(self) -> ContextBuilder | ContextSweep | None:
        return cast("ContextBuilder | ContextSweep | None", self.parts.get("context"))

    @property
    def answers(self) -> AnswerChecks | None:
        return cast("AnswerChecks | None", self.parts.get("answers"))

    @property
    def judge(self) -> Judge | None:
        return cast("Judge | None", self.parts.get("judge"))

    @property
    def generator_sweep(self) -> GeneratorSweep | None:
        """``generator=sweep``: every generator of the run (``generator`` is its first)."""
        return cast("GeneratorSweep | None", self.parts.get("generator_sweep"))


def build_components(cfg: DictConfig, device: str) -> Components:
    """Each stage of the stage list builds its groups' components (before any work)."""
    from bench.pipeline.stages import STAGES

    parts: dict[str, Any] = {}
    for stage in STAGES:
        parts.update(stage.build(cfg, device))
    return Components(parts)


def build_nothing(cfg: DictConfig, device: str) -> dict[str, Any]:
    """A service group the run builds itself (telemetry: before the dataset loads)."""
    return {}


def build_answers(cfg: DictConfig, device: str) -> dict[str, Any]:
    """The generation stage's groups: generator, context builder, answer checks, judge (and
    with ``generator=sweep`` every generator of the sweep, ``generator`` being its first)."""
    generator, context, answers, judge, sweep = _build_generation(cfg)
    return {"generator": generator, "context": context, "answers": answers, "judge": judge,
            "generator_sweep": sweep}


def build_generation(cfg: DictConfig) -> tuple[Generator | None,
                                                ContextBuilder | ContextSweep | None,
                                                AnswerChecks | None, Judge | None]:
    """The generator, context builder, answer checks and judge of a run.

    The judge model: ``judge.generator`` (a generator block, e.g.
    ``+generator@judge.generator=vllm judge.generator.model=...``) when given, else the run's
    own generator (a sweep's first member). Judges read answers, so a judge without a
    generator is a config error.
    """
    return _build_generation(cfg)[:4]


def _build_generation(cfg: DictConfig) -> tuple[Generator | None,
                                                 ContextBuilder | ContextSweep | None,
                                                 AnswerChecks | None, Judge | None,
                                                 GeneratorSweep | None]:
    from bench.generation.stage import check_generation_config

    built = build(cfg.generator, "generator")
    sweep = built if isinstance(built, GeneratorSweep) else None
    generator: Generator | None = sweep.primary if sweep is not None else built
    if generator is None:
        if served_answers(cfg):
            return None, None, build(cfg.answers, "answers"), served_judge(cfg), None
        if build_judge_target(cfg) is not None:
            raise ConfigError("judge", "judges read generated answers: set generator=... too")
        return None, None, None, None, None
    check_generation_config(cfg.generation)
    if cfg.generation.memo:
        if sweep is not None:
            hot = [m.name for m in sweep.members if (m.sampling.get("temperature") or 0) > 0]
            if hot:
                raise ConfigError(f"generator.members.{hot[0]}.sampling.temperature",
                                  "generation.memo memoises greedy answers only: needs 0")
            sweep = sweep.with_generators(lambda g: memoised(g, cfg.cache_dir))
            generator = sweep.primary
        else:
            generator = memoised(generator, cfg.cache_dir)
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
                judge_gen = memoised(judge_gen, cfg.cache_dir)
        repeats = node.pop("repeats", 1)
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ConfigError("judge.repeats", f"must be an integer >= 1, got {repeats!r}")
        extra: dict[str, Any] = {}
        if "cross_generator" in node:  # the pairwise judge's second model (self-preference)
            _check_cross(node)
            cross = build(node.pop("cross_generator"), "judge.cross_generator")
            extra["cross_generator"] = (memoised(cross, cfg.cache_dir) if cross is not None
                                        and cfg.generation.memo else cross)
        judge = build(node, "judge", generator=judge_gen, **extra)
        if judge is not None and repeats > 1:
            from bench.judge.llm import LLMJudge
            from bench.judge.pairwise import PairwisePreferenceJudge
            from bench.judge.repeats import RepeatedJudge
            from bench.judge.suite import JudgeSuite

            pointwise = isinstance(judge, LLMJudge | JudgeSuite)
            if isinstance(judge, PairwisePreferenceJudge) or not pointwise:
                raise ConfigError("judge.repeats", "repeats apply to pointwise judges (and "
                                  "suites of them), not to " + type(judge).__name__)
            judge = RepeatedJudge(judge, repeats)
    check_sweep_judge(sweep, judge)
    return generator, context, answers, judge, sweep


def check_sweep_judge(sweep: GeneratorSweep | None, judge: Judge | None) -> None:
    """A pairwise judge in a generator sweep compares the sweep's generators: it needs two."""
    from bench.judge.base import PairwiseJudge

    if sweep is not None and isinstance(judge, PairwiseJudge) and len(sweep.members) < 2:
        raise ConfigError("generator.members", "judge=pairwise compares the sweep's "
                          f"generators: it has {len(sweep.members)} "
                          f"({', '.join(m.name for m in sweep.members)}); add one "
                          "(+generator@generator.members.NAME.generator=OPTION)")


def served_answers(cfg: DictConfig) -> bool:
    """A black-box system answers (``system=http``): its answers are checked and judged
    like generated ones, with no generator of bench's own."""
    from bench.config.build import target_of, to_container

    return "system" in cfg and target_of(to_container(cfg.system), "system") is not None


def served_judge(cfg: DictConfig) -> Judge | None:
    """The judge of a run without a generator of its own: its model is ``judge.generator``."""
    node = build_judge_target(cfg)
    if node is None:
        return None
    if "generator" not in node:
        raise ConfigError("judge.generator", "without generator=..., the judge's model is "
                          "judge.generator (+generator@judge.generator=...)")
    judge_gen = build(node.pop("generator"), "judge.generator")
    if judge_gen is None:
        raise ConfigError("judge.generator", "must name a model (no run generator to reuse)")
    if cfg.generation.memo:
        judge_gen = memoised(judge_gen, cfg.cache_dir)
    node.pop("repeats", None)
    node.pop("cross_generator", None)
    return cast("Judge | None", build(node, "judge", generator=judge_gen))


def _check_cross(node: dict[str, Any]) -> None:
    import inspect

    from bench.config.build import target_of

    cls = target_of({k: v for k, v in node.items() if k != "cross_generator"}, "judge")
    if cls is None or "cross_generator" not in inspect.signature(cls).parameters:
        raise ConfigError("judge.cross_generator",
                          "only judge=pairwise takes a second judge model")


def build_judge_target(cfg: DictConfig) -> dict[str, Any] | None:
    """The judge config as a plain dict, or None for `judge=none`. ``calibration`` is the
    gates' policy (bench.judge.calibration, read by the run's gate check), not an option."""
    from bench.config.build import target_of, to_container

    if target_of({k: v for k, v in to_container(cfg.judge).items() if k != "generator"},
                 "judge") is None:
        return None
    return {k: v for k, v in to_container(cfg.judge).items() if k != "calibration"}
