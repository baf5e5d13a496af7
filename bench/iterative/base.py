"""Records and Protocol of the `iterative` stage: a retrieval loop under per-query budgets.

Per query the loop searches the query (turn 1: the one-shot config's own search), LOOKS at
the evidence (is it sufficient?), asks a ``Reformulator`` for the next queries, and searches
again — until the look says the evidence is sufficient, nothing is left to ask, or a budget
(``max_calls`` searches, ``max_wall_ms`` of loop time, ``max_tokens`` query tokens encoded)
would be broken by the next search. A query stopped by a budget while more was to be asked
ends ``budget_exhausted``: it is scored on the evidence it had (like a missing run is scored
as an empty ranking) and counted in every completion table.

Adding a reformulator: a class with keyword-only options implementing ``Reformulator`` in a
module here, named by ``reformulations`` in ``bench.iterative.loop.IterativeLoop``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bench.data.base import Query

#: per-query loop outcomes (``LoopRecord.stop``)
STOP_SUFFICIENT = "sufficient"  # the look found the evidence enough
STOP_NOTHING_LEFT = "nothing_left"  # every reformulation was searched
STOP_CALLS = "max_calls"
STOP_WALL = "max_wall_ms"
STOP_TOKENS = "max_tokens"
#: the stops that are a budget's, not the loop's own decision
BUDGET_STOPS = (STOP_CALLS, STOP_WALL, STOP_TOKENS)
#: the per-query status of a query whose loop a budget stopped (bench.results.records)
BUDGET_EXHAUSTED = "budget_exhausted"


class Reformulator(Protocol):
    """The next queries to search for one query."""

    #: short name for labels (``decompose``, ``data``)
    name: str

    def cache_params(self) -> dict[str, object]:
        """The options that change what it proposes (they key the loop's node)."""
        ...

    def reformulate(self, query: Query) -> tuple[str, ...]:
        """The queries to search after the query itself, in order (may be empty). The loop
        searches them in this order while the look asks for more and the budgets allow."""
        ...


@dataclass(frozen=True)
class Turn:
    """One search of the loop."""

    turn: int  # 1 = the query itself (the one-shot search)
    text: str
    tokens: int
    #: the turn's top hit score (NaN: no hit) and the documents it found first
    top_score: float
    new_docs: int


@dataclass(frozen=True)
class LoopRecord:
    """What the loop did for one query (a group of rows of iterations.parquet)."""

    query_id: str
    turns: tuple[Turn, ...]
    #: searches issued (the first included), query tokens encoded, loop time after turn 1
    calls: int
    tokens: int
    wall_ms: float
    stop: str
    #: documents seen over every turn (doc_idx, first seen first)
    evidence: tuple[int, ...]

    @property
    def status(self) -> str:
        """``budget_exhausted`` when a budget stopped the loop, else ``ok``."""
        return BUDGET_EXHAUSTED if self.stop in BUDGET_STOPS else "ok"
