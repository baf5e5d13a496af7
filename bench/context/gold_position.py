"""The lost-in-the-middle probe (Liu et al. 2023): the gold passage at a chosen position among
N hard distractors, one context per swept position.

Per probed query (``JudgedPassages``: its whole pool, best first, and its judgments):

- gold: the best-ranked pool passage of a relevant document. When the pool holds none, the
  relevant document's first chunk is placed instead (``Placement.injected``), so the gold is
  in every probed prompt and the run counts how often it had to be injected;
- distractors: the N best-ranked pool passages of documents that are NOT relevant (no qrels
  grade >= the relevance level, visible or not) — hard distractors, as in Liu et al. — in
  rank order, the SAME passages in the same order for every position, so only the gold moves
  and per-query paired comparisons isolate its position;
- position: ``first`` (index 0), ``middle`` (index N // 2) or ``last`` (index N).

Queries left out, each counted with its reason (never silently):

- ``must_abstain`` / ``no_gold``: no relevant document the caller may see — nothing to place;
- ``multi_gold`` (``single_gold``, the default): more than one relevant document. One gold
  passage cannot carry a multi-document answer, and the other relevant documents may not be
  distractors, so such a query would measure missing evidence, not position. With
  ``single_gold: false`` the best-graded relevant document's best passage is the gold and the
  other relevant documents stay out of the prompt;
- ``few_distractors``: the pool holds fewer than N passages of non-relevant documents;
- ``over_budget``: the N + 1 passages do not fit ``max_tokens``. They are never cut: cutting
  trims whichever passage sits last, so the gold would be cut at one position only.

The first two depend on the judgments alone (:meth:`GoldPositionContext.exclusion`), so the run
draws its query subset from the probe-able queries; the last two depend on the pool. Every
decision is made on the position-independent passages, so all positions probe the same queries.

The prompt — grounding instruction, ``[doc:ID]`` citation tags, the budget counted in the
generator's tokenizer — is ``BudgetedContext``'s (``assemble``), with the passages in layout
order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bench.config.build import OptionError
from bench.context.base import (
    Context,
    ContextPassage,
    ContextVariant,
    JudgedBuild,
    JudgedPassages,
    Passage,
    Placement,
    TokenCounter,
)
from bench.context.budgeted import DEFAULT_SYSTEM, DEFAULT_USER, BudgetedContext

Position = Literal["first", "middle", "last"]
POSITIONS: tuple[Position, ...] = ("first", "middle", "last")

#: why a query is not probed (the report lists them in this order)
MUST_ABSTAIN = "must_abstain"
NO_GOLD = "no_gold"
MULTI_GOLD = "multi_gold"
FEW_DISTRACTORS = "few_distractors"
OVER_BUDGET = "over_budget"
REASONS = (MUST_ABSTAIN, NO_GOLD, MULTI_GOLD, FEW_DISTRACTORS, OVER_BUDGET)


def gold_index(position: Position, n_distractors: int) -> int:
    """Where the gold passage sits among ``n_distractors + 1`` passages: 0, the middle
    (``n_distractors // 2``: for 4 distractors, two come before it) or the end."""
    return {"first": 0, "middle": n_distractors // 2, "last": n_distractors}[position]


def layout(gold: Passage, distractors: Sequence[Passage], position: Position
           ) -> tuple[Passage, ...]:
    """``distractors`` in their order with ``gold`` inserted at ``position``."""
    i = gold_index(position, len(distractors))
    return (*distractors[:i], gold, *distractors[i:])


def pick_gold(item: JudgedPassages) -> tuple[Passage, bool] | None:
    """(gold passage, injected): the best-ranked pool passage of the first (best-graded)
    relevant document the pool holds, else that document's first chunk; None without one."""
    for doc_id in item.relevant:
        hit = next((p for p in item.ranked.passages if p.doc_id == doc_id), None)
        if hit is not None:
            return hit, False
    if not item.first_chunks:
        return None
    return item.first_chunks[0], True


def hard_distractors(item: JudgedPassages, n: int) -> tuple[Passage, ...]:
    """The ``n`` best-ranked pool passages of non-relevant documents, one per document."""
    out: list[Passage] = []
    seen: set[str] = set()
    for p in item.ranked.passages:
        if p.doc_id in item.judged_relevant or p.doc_id in seen:
            continue
        seen.add(p.doc_id)
        out.append(p)
        if len(out) == n:
            break
    return tuple(out)


class GoldPositionContext:
    """Keyword-only options are the config schema (``conf/context/gold_position.yaml``).

    ``positions``: the swept positions, in report order (the first is the baseline of the
    paired comparisons); ``n_distractors``: N; ``single_gold``: probe only queries with one
    relevant document; ``max_tokens``, ``system_prompt``, ``user_template``,
    ``abstain_phrase``: the prompt and budget, as ``BudgetedContext``.

    As a config option it is a ``ContextSweep`` (one variant per position); each variant is a
    ``JudgedContextBuilder`` for one position.
    """

    def __init__(
        self,
        *,
        positions: Sequence[str] = POSITIONS,
        n_distractors: int = 4,
        single_gold: bool = True,
        max_tokens: int = 2048,
        system_prompt: str = DEFAULT_SYSTEM,
        user_template: str = DEFAULT_USER,
        abstain_phrase: str = "I don't know",
    ) -> None:
        if isinstance(positions, str):
            raise OptionError("positions", f"must be a list of {list(POSITIONS)}, got "
                                           f"{positions!r}")
        bad = [p for p in positions if p not in POSITIONS]
        if bad:
            raise OptionError("positions", f"unknown {bad}; choose from {list(POSITIONS)}")
        if not positions or len(set(positions)) != len(positions):
            raise OptionError("positions", f"must name each position at most once and at "
                                           f"least one, got {list(positions)}")
        if isinstance(n_distractors, bool) or n_distractors < 1:
            raise OptionError("n_distractors", f"must be >= 1, got {n_distractors}")
        self.positions: tuple[Position, ...] = tuple(positions)  # type: ignore[arg-type]
        self.n_distractors = n_distractors
        self.single_gold = single_gold
        # the prompt, tags and budget are BudgetedContext's (it validates those options)
        self.render = BudgetedContext(top_k=n_distractors + 1, max_tokens=max_tokens,
                                      system_prompt=system_prompt, user_template=user_template,
                                      abstain_phrase=abstain_phrase)

    def cache_params(self) -> dict[str, object]:
        return {"policy": "gold_position", "positions": list(self.positions),
                "n_distractors": self.n_distractors, "single_gold": self.single_gold,
                "max_tokens": self.render.max_tokens, "system": self.render.system,
                "user_template": self.render.user_template}

    def exclusion(self, must_abstain: bool, relevant: Sequence[str]) -> str | None:
        if must_abstain:
            return MUST_ABSTAIN
        if not relevant:
            return NO_GOLD
        if self.single_gold and len(relevant) > 1:
            return MULTI_GOLD
        return None

    def variants(self) -> list[ContextVariant]:
        n = self.n_distractors
        return [ContextVariant(f"gold@{p}({n})",
                               {"gold_position": p, "gold_index": gold_index(p, n),
                                "n_distractors": n}, GoldAt(self, p))
                for p in self.positions]


@dataclass(frozen=True)
class GoldAt:
    """One position of a ``GoldPositionContext``: a ``JudgedContextBuilder``."""

    probe: GoldPositionContext
    position: Position

    @property
    def n_distractors(self) -> int:
        return self.probe.n_distractors

    @property
    def index(self) -> int:
        return gold_index(self.position, self.probe.n_distractors)

    def cache_params(self) -> dict[str, object]:
        params = self.probe.cache_params()
        del params["positions"]
        return {**params, "position": self.position}

    def exclusion(self, must_abstain: bool, relevant: Sequence[str]) -> str | None:
        return self.probe.exclusion(must_abstain, relevant)

    def _place(self, query_id: str, query: str, passages: Sequence[Passage],
               tokens: TokenCounter) -> Context:
        placed = [ContextPassage(p.doc_id, p.chunk_idx, p.text, rank)
                  for rank, p in enumerate(passages, start=1)]
        return self.probe.render.assemble(query_id, query, placed, tokens)

    def build_judged(self, items: Sequence[JudgedPassages], tokens: TokenCounter
                     ) -> JudgedBuild:
        contexts: list[Context] = []
        placements: list[Placement] = []
        excluded: list[tuple[str, str]] = []
        n = self.probe.n_distractors
        for item in items:
            r = item.ranked
            reason = self.exclusion(item.must_abstain, item.relevant)
            gold = pick_gold(item) if reason is None else None
            if reason is None and gold is None:
                reason = NO_GOLD
            distractors = hard_distractors(item, n)
            if reason is None and len(distractors) < n:
                reason = FEW_DISTRACTORS
            if reason is None:
                assert gold is not None
                # decided on the gold-first layout, so every position drops the same queries
                canonical = self._place(r.query_id, r.query, layout(gold[0], distractors,
                                                                    "first"), tokens)
                if canonical.over_budget:
                    reason = OVER_BUDGET
            if reason is not None:
                excluded.append((r.query_id, reason))
                continue
            assert gold is not None
            passage, injected = gold
            contexts.append(self._place(r.query_id, r.query,
                                        layout(passage, distractors, self.position), tokens))
            placements.append(Placement(r.query_id, passage.doc_id, passage.chunk_idx,
                                        self.index, injected))
        return JudgedBuild(tuple(contexts), tuple(placements), tuple(excluded))
