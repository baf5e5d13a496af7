"""Pairwise preference between two configs' answers, asked in both presentation orders.

Each pair is asked as (A = config_a, B = config_b) and as (A = config_b, B = config_a). When
both orders name the same config (or both say tie) that is the verdict and it is
position-consistent; a verdict that flips with the order is a tie, counted as inconsistent
(``bench.judge.base.position_consistency``). If either order fails its schema after retries,
the pair is ``invalid`` (``error`` for a backend failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from bench.context.base import strip_citations
from bench.generation.base import ChatMessage
from bench.judge.base import OK, JudgeCall, PairItem, PairVerdict
from bench.judge.llm import LLMJudge, render_context
from bench.judge.structured import JudgeSchema, Task
from bench.metrics.base import ERROR, INVALID

SYSTEM = (
    "You compare two answers to the same question, using the context passages as the source "
    "of truth. Prefer the answer that is correct, supported by the context and complete; "
    "ignore length and style. Answer \"tie\" when neither is better. Reply with JSON only."
)
USER = (
    'Context:\n{context}\n\nQuestion: {query}\n\nAnswer A: {a}\n\nAnswer B: {b}\n\n'
    'Return {{"reason": "...", "winner": "A" | "B" | "tie"}}.'
)


class Preference(JudgeSchema):
    reason: str = Field(description="one sentence")
    winner: Literal["A", "B", "tie"]


class PairwisePreferenceJudge(LLMJudge):
    name = "pairwise"
    metrics = ("pairwise_preference",)
    prompts = (SYSTEM, USER)

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (Preference,)

    def compare(self, items: Sequence[PairItem]) -> list[PairVerdict]:
        tasks: list[Task[Preference]] = []
        for it in items:
            ctx = render_context(it.context)
            a, b = strip_citations(it.answer_a), strip_citations(it.answer_b)
            for order, (first, second) in (("ab", (a, b)), ("ba", (b, a))):
                tasks.append(Task(f"{it.query_id}/{order}", (
                    ChatMessage("system", SYSTEM),
                    ChatMessage("user", USER.format(context=ctx, query=it.query, a=first,
                                                    b=second)))))
        results = self.caller(Preference).run(tasks, "prefer")
        out = []
        for k, it in enumerate(items):
            (p_ab, c_ab), (p_ba, c_ba) = results[2 * k], results[2 * k + 1]
            calls: tuple[JudgeCall, ...] = (c_ab, c_ba)
            if p_ab is None or p_ba is None:
                failed = [c for c in calls if c.status != OK]
                status = ERROR if all(c.status == ERROR for c in failed) else INVALID
                out.append(PairVerdict(it.query_id, it.config_a, it.config_b, status, "", False,
                                       calls))
                continue
            first = {"A": it.config_a, "B": it.config_b, "tie": "tie"}[p_ab.winner]
            second = {"A": it.config_b, "B": it.config_a, "tie": "tie"}[p_ba.winner]
            consistent = first == second
            out.append(PairVerdict(it.query_id, it.config_a, it.config_b, OK,
                                   first if consistent else "tie", consistent, calls))
        return out
