"""Pairwise preference between two configs' answers, asked in both presentation orders.

Each pair is asked as (A = config_a, B = config_b) and as (A = config_b, B = config_a). When
both orders name the same config (or both say tie) that is the verdict and it is
position-consistent; a verdict that flips with the order is inconsistent
(``bench.judge.base.position_consistency``). If either order fails its schema after retries,
the pair is ``invalid`` (``error`` for a backend failure).

Options (``conf/judge/pairwise.yaml``): ``orders``: ``both`` (default) or ``ab`` (one order:
half the calls, but position bias can neither be measured nor cancelled); ``aggregate``, how
two orders become one preference: ``flip_is_tie`` (docs/metrics.md: a verdict that flips with
the order is a tie) or ``mean`` (the mean of the two orders' preferences: a flip between a
win and a tie scores 0.75); ``cross_generator``: a second judge model that answers the same
pairs (its verdicts measure self-preference, ``bench.judge.pairing``); ``family`` /
``cross_family``: the judge models' families for self-preference (null: the heuristic of
``bench.judge.pairing.family``). The families name what the verdicts are compared with, not
how they are made, so they are not in the cache key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from bench.config.build import OptionError
from bench.context.base import strip_citations
from bench.generation.base import ChatMessage, Generator
from bench.judge.base import OK, JudgeCall, PairItem, PairVerdict
from bench.judge.llm import LLMJudge, render_context
from bench.judge.rubric import prompts
from bench.judge.structured import JudgeSchema, Task
from bench.metrics.base import ERROR, INVALID

#: the prompt templates live in the rubric (conf/judge/rubrics/pairwise.yaml)
SYSTEM, USER = prompts("pairwise", "system", "user")


class Preference(JudgeSchema):
    reason: str = Field(description="one sentence")
    winner: Literal["A", "B", "tie"]


Orders = Literal["both", "ab"]
Aggregate = Literal["flip_is_tie", "mean"]


def _pref(winner: str, config_a: str) -> float:
    return 1.0 if winner == config_a else 0.5 if winner == "tie" else 0.0


class PairwisePreferenceJudge(LLMJudge):
    """Extra options: ``orders``, ``aggregate``, ``cross_generator``, ``family``,
    ``cross_family`` (module docstring)."""

    name = "pairwise"
    metrics = ("pairwise_preference",)
    prompts = (SYSTEM, USER)

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True,
                 orders: Orders = "both", aggregate: Aggregate = "flip_is_tie",
                 cross_generator: Generator | None = None, family: str | None = None,
                 cross_family: str | None = None) -> None:
        super().__init__(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                         temperature=temperature, seed=seed, feedback=feedback)
        if orders not in ("both", "ab"):
            raise OptionError("orders", f"must be 'both' or 'ab', got {orders!r}")
        if aggregate not in ("flip_is_tie", "mean"):
            raise OptionError("aggregate", f"must be 'flip_is_tie' or 'mean', got {aggregate!r}")
        self.orders: Orders = orders
        self.aggregate: Aggregate = aggregate
        self.cross_generator = cross_generator
        for key, value in (("family", family), ("cross_family", cross_family)):
            if value is not None and not value.strip():
                raise OptionError(key, "must be a non-empty string or null")
        if cross_family is not None and cross_generator is None:
            raise OptionError("cross_family", "names the family of judge.cross_generator, "
                              "which is not set")
        self.family = None if family is None else family.strip().lower()
        self.cross_family = None if cross_family is None else cross_family.strip().lower()

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (Preference,)

    def cache_params(self) -> dict[str, object]:
        params = super().cache_params()
        if (self.orders, self.aggregate) != ("both", "flip_is_tie"):  # defaults keep old keys
            params.update(orders=self.orders, aggregate=self.aggregate)
        if self.cross_generator is not None:
            params["cross_generator"] = self.cross_generator.cache_params()
        return params

    def cross(self) -> PairwisePreferenceJudge | None:
        """The same judge asking ``cross_generator`` (None without one)."""
        if self.cross_generator is None:
            return None
        return PairwisePreferenceJudge(
            generator=self.cross_generator, max_retries=self.max_retries,
            max_tokens=self.sampling.max_tokens, temperature=self.sampling.temperature,
            seed=self.sampling.seed, feedback=self.feedback, orders=self.orders,
            aggregate=self.aggregate)

    def compare(self, items: Sequence[PairItem]) -> list[PairVerdict]:
        tasks: list[Task[Preference]] = []
        orders = ("ab", "ba") if self.orders == "both" else ("ab",)
        for it in items:
            ctx = render_context(it.context)
            a, b = strip_citations(it.answer_a), strip_citations(it.answer_b)
            shown = {"ab": (a, b), "ba": (b, a)}
            for order in orders:
                first, second = shown[order]
                tasks.append(Task(f"{it.query_id}/{order}", (
                    ChatMessage("system", SYSTEM),
                    ChatMessage("user", USER.format(context=ctx, query=it.query, a=first,
                                                    b=second)))))
        results = self.caller(Preference).run(tasks, "prefer")
        from bench.generation.base import generator_name

        judge = generator_name(self.generator)
        out = []
        n = len(orders)
        for k, it in enumerate(items):
            got = results[n * k: n * (k + 1)]
            calls: tuple[JudgeCall, ...] = tuple(c for _, c in got)
            if any(p is None for p, _ in got):
                failed = [c for c in calls if c.status != OK]
                status = ERROR if all(c.status == ERROR for c in failed) else INVALID
                out.append(PairVerdict(it.query_id, it.config_a, it.config_b, status, "", False,
                                       calls, judge=judge))
                continue
            # the config each order named: in "ba" the answer shown as A is config_b's
            names = ({"A": it.config_a, "B": it.config_b, "tie": "tie"},
                     {"A": it.config_b, "B": it.config_a, "tie": "tie"})
            winners = [names[i][p.winner] for i, (p, _) in enumerate(got) if p is not None]
            prefs = tuple(_pref(w, it.config_a) for w in winners)
            consistent = len(set(winners)) == 1
            winner = winners[0] if consistent else "tie"
            mean = sum(prefs) / len(prefs)
            out.append(PairVerdict(it.query_id, it.config_a, it.config_b, OK, winner,
                                   consistent, calls, prefs,
                                   mean if self.aggregate == "mean" else None, judge))
        return out
