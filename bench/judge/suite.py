"""Several pointwise judges run as one stage, sharing a judge model and retry options."""

from __future__ import annotations

from collections.abc import Sequence

from bench.config.build import OptionError
from bench.generation.base import Generator
from bench.judge.base import JudgeItem, Verdict
from bench.judge.citations import CitationJudge
from bench.judge.context_relevance import ContextRelevanceJudge
from bench.judge.faithfulness import FaithfulnessJudge
from bench.judge.llm import LLMJudge
from bench.judge.refusal import RefusalJudge
from bench.judge.relevancy import AnswerRelevancyJudge
from bench.metrics.base import QueryValue

#: pointwise judges by name (the pairwise judge compares configs and runs on its own)
JUDGES: dict[str, type[LLMJudge]] = {
    "faithfulness": FaithfulnessJudge,
    "answer_relevancy": AnswerRelevancyJudge,
    "context_relevance": ContextRelevanceJudge,
    "citations": CitationJudge,
    "refusal": RefusalJudge,
}


class JudgeSuite:
    """``judges``: names from :data:`JUDGES`, run in that order; the other options are those
    of ``bench.judge.llm.LLMJudge`` and apply to every judge."""

    name = "suite"

    def __init__(self, *, generator: Generator,
                 judges: Sequence[str] = ("faithfulness", "answer_relevancy",
                                          "context_relevance", "citations", "refusal"),
                 max_retries: int = 2, max_tokens: int = 512, temperature: float = 0.0,
                 seed: int = 0, feedback: bool = True) -> None:
        unknown = [j for j in judges if j not in JUDGES]
        if unknown or not judges:
            raise OptionError("judges", f"unknown {unknown}; choose from {sorted(JUDGES)}")
        if len(set(judges)) != len(judges):
            raise OptionError("judges", "a judge is listed twice")
        self.judges = [JUDGES[j](generator=generator, max_retries=max_retries,
                                 max_tokens=max_tokens, temperature=temperature, seed=seed,
                                 feedback=feedback) for j in judges]
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
