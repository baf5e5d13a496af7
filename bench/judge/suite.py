"""Several pointwise judges run as one stage, sharing a judge model and retry options.

A judge's name is its option's file name, as everywhere: ``conf/judge/<name>.yaml`` names its
class in ``_target_`` (no second registry). A suite member must be a pointwise judge
(``bench.judge.llm.LLMJudge``) or a verifier that asks no model (``bench.judge.verifiers``);
the pairwise judge compares configs and runs on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.config.build import OptionError, target_of
from bench.generation.base import Generator
from bench.judge.base import JudgeItem, Verdict
from bench.judge.llm import LLMJudge
from bench.judge.verifiers import Verifier
from bench.metrics.base import QueryValue

#: where the judge options live (``conf/judge/<name>.yaml``)
JUDGE_CONF = Path(__file__).resolve().parents[2] / "conf" / "judge"
#: options of the judge group that are not judges
NOT_MEMBERS = ("none", "suite", "pairwise")


def pointwise_judges() -> dict[str, type[LLMJudge] | type[Verifier]]:
    """Every pointwise judge option by name: ``conf/judge/<name>.yaml`` whose ``_target_`` is
    an ``LLMJudge`` or a ``Verifier`` (bench.judge.verifiers: no model, built with its
    defaults in a suite)."""
    from omegaconf import OmegaConf

    out: dict[str, type[LLMJudge] | type[Verifier]] = {}
    for path in sorted(JUDGE_CONF.glob("*.yaml")):
        if path.stem in NOT_MEMBERS:
            continue
        cls = target_of(OmegaConf.load(path), f"judge={path.stem}")
        if isinstance(cls, type) and issubclass(cls, LLMJudge | Verifier):
            out[path.stem] = cls
    return out


class JudgeSuite:
    """``judges``: pointwise judge options by name (``conf/judge/<name>.yaml``), run in that
    order; the other options are those of ``bench.judge.llm.LLMJudge`` and apply to every
    judge."""

    name = "suite"

    def __init__(self, *, generator: Generator,
                 judges: Sequence[str] = ("faithfulness", "answer_relevancy",
                                          "context_relevance", "citations", "refusal"),
                 max_retries: int = 2, max_tokens: int = 512, temperature: float = 0.0,
                 seed: int = 0, feedback: bool = True) -> None:
        known = pointwise_judges()
        unknown = [j for j in judges if j not in known]
        if unknown or not judges:
            raise OptionError("judges", f"unknown {unknown}; choose from {sorted(known)}")
        if len(set(judges)) != len(judges):
            raise OptionError("judges", "a judge is listed twice")
        self.judges: list[LLMJudge | Verifier] = [
            cls() if issubclass(cls, Verifier) else
            cls(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                temperature=temperature, seed=seed, feedback=feedback)
            for cls in (known[j] for j in judges)]
        self.metrics = tuple(m for j in self.judges for m in j.metrics)

    def cache_params(self) -> dict[str, object]:
        return {"suite": [j.cache_params() for j in self.judges]}

    def values(self, verdicts: Sequence[Verdict]) -> list[QueryValue]:
        """Per-query rows of every judge's metrics (``per_query.parquet`` shape)."""
        metrics = {j.name: j.metrics for j in self.judges}
        return [row for v in verdicts for row in v.values(metrics[v.judge])]

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """Every judge's verdicts, judge by judge (``len(judges) * len(items)`` verdicts)."""
        return [v for j in self.judges for v in j.judge(items)]
