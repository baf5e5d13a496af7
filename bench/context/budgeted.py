"""Top-k passages fitted to a token budget, in a chosen order, under a grounding prompt.

Selection is always by rank (the budget keeps the best passages); the order policy only
decides where the kept passages sit in the prompt:

- ``score``: rank order, best first;
- ``best_first_last``: the "lost in the middle" mitigation (Liu et al. 2023) — odd ranks from
  the front, even ranks from the back, so ranks 1..5 are placed 1, 3, 5, 4, 2 and the two best
  passages sit at the two ends.

The lost-in-the-middle PROBE (the gold passage moved among fixed distractors) is
``bench.context.gold_position``; it renders its prompts with ``assemble`` below.

Budget: ``max_tokens`` bounds the tokens of the message contents (system + user) in the
generator's tokenizer. Passages are added in rank order while they fit; the first one that
does not fit is cut to the remaining room when that room is at least ``min_passage_tokens``
(``truncate``), and every later one is dropped (counted in ``Context.n_dropped``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from bench.config.build import OptionError
from bench.context.base import (
    Context,
    ContextPassage,
    Passage,
    RankedPassages,
    TokenCounter,
    tag,
)
from bench.generation.base import ChatMessage

DEFAULT_SYSTEM = (
    "You answer questions using only the context passages below. Each passage starts with "
    "its id, like [doc:ID]. After each sentence of your answer, cite the passage that supports "
    "it by its id, e.g. [doc:ID]. If the passages do not contain the answer, reply exactly: "
    "{abstain}"
)
DEFAULT_USER = "Context:\n{context}\n\nQuestion: {query}\nAnswer:"
_SEP = "\n\n"

Order = Literal["score", "best_first_last"]


def best_first_last(n: int) -> list[int]:
    """Placement of ranks 0..n-1: even ranks (0, 2, 4..) from the front, odd ones from the
    back, so the best two are at both ends (``[0, 2, 4, 3, 1]`` for n = 5)."""
    front = list(range(0, n, 2))
    back = list(range(1, n, 2))
    return front + back[::-1]


class BudgetedContext:
    """Keyword-only options are the config schema (``conf/context/*.yaml`` or the caller).

    ``top_k``: candidates considered; ``max_tokens``: prompt budget; ``order``: placement
    policy; ``truncate`` / ``min_passage_tokens``: cut the first passage that overflows;
    ``system_prompt`` (may use ``{abstain}``) and ``user_template`` (must use ``{context}``
    and ``{query}``); ``abstain_phrase``: what the model is told to say without an answer.
    """

    def __init__(
        self,
        *,
        top_k: int = 5,
        max_tokens: int = 2048,
        order: Order = "score",
        truncate: bool = True,
        min_passage_tokens: int = 32,
        system_prompt: str = DEFAULT_SYSTEM,
        user_template: str = DEFAULT_USER,
        abstain_phrase: str = "I don't know",
    ) -> None:
        if top_k < 1:
            raise OptionError("top_k", f"must be >= 1, got {top_k}")
        if max_tokens < 1:
            raise OptionError("max_tokens", f"must be >= 1, got {max_tokens}")
        if order not in ("score", "best_first_last"):
            raise OptionError("order", f"must be 'score' or 'best_first_last', got {order!r}")
        if min_passage_tokens < 1:
            raise OptionError("min_passage_tokens", f"must be >= 1, got {min_passage_tokens}")
        for field in ("{context}", "{query}"):
            if field not in user_template:
                raise OptionError("user_template", f"must contain {field}")
        try:
            self.system = system_prompt.format(abstain=abstain_phrase)
            user_template.format(context="", query="")
        except (KeyError, IndexError, ValueError) as exc:
            raise OptionError("system_prompt", f"bad template field: {exc}") from None
        self.top_k = top_k
        self.max_tokens = max_tokens
        self.order: Order = order
        self.truncate = truncate
        self.min_passage_tokens = min_passage_tokens
        self.user_template = user_template
        self.abstain_phrase = abstain_phrase

    def cache_params(self) -> dict[str, object]:
        return {
            "top_k": self.top_k, "max_tokens": self.max_tokens, "order": self.order,
            "truncate": self.truncate, "min_passage_tokens": self.min_passage_tokens,
            "system": self.system, "user_template": self.user_template,
        }

    # ------------------------------------------------------------------ rendering

    def messages(self, query: str, passages: Sequence[ContextPassage]) -> tuple[ChatMessage, ...]:
        context = _SEP.join(f"{tag(p.doc_id)} {p.text}" for p in passages)
        user = self.user_template.format(context=context, query=query)
        return (ChatMessage("system", self.system), ChatMessage("user", user))

    @staticmethod
    def _count(messages: Sequence[ChatMessage], tokens: TokenCounter) -> int:
        return sum(tokens.count_tokens(m.content) for m in messages)

    def assemble(self, query_id: str, query: str, passages: Sequence[ContextPassage],
                 tokens: TokenCounter, *, n_candidates: int | None = None, n_dropped: int = 0
                 ) -> Context:
        """A ``Context`` of exactly ``passages`` in the given order (no selection, no
        reordering); ``over_budget`` says whether it exceeds ``max_tokens``."""
        msgs = self.messages(query, passages)
        n = self._count(msgs, tokens)
        return Context(
            query_id=query_id, query=query, passages=tuple(passages), messages=msgs,
            n_tokens=n, n_candidates=len(passages) if n_candidates is None else n_candidates,
            n_dropped=n_dropped, truncated=any(p.truncated for p in passages),
            over_budget=n > self.max_tokens,
        )

    # ------------------------------------------------------------------ budget

    def _fit(self, query: str, cands: Sequence[Passage], tokens: TokenCounter
             ) -> list[ContextPassage]:
        kept: list[ContextPassage] = []
        for rank, p in enumerate(cands, start=1):
            whole = ContextPassage(p.doc_id, p.chunk_idx, p.text, rank)
            if self._count(self.messages(query, [*kept, whole]), tokens) <= self.max_tokens:
                kept.append(whole)
                continue
            if self.truncate:
                cut = self._cut(query, kept, whole, tokens)
                if cut is not None:
                    kept.append(cut)
            break
        return kept

    def _cut(self, query: str, kept: list[ContextPassage], p: ContextPassage,
             tokens: TokenCounter) -> ContextPassage | None:
        """The longest word prefix of ``p`` that fits, if it has >= min_passage_tokens."""
        words = p.text.split()
        lo, hi = 0, len(words) - 1  # the whole passage does not fit

        def fits(n: int) -> bool:
            cut = ContextPassage(p.doc_id, p.chunk_idx, " ".join(words[:n]), p.rank, True)
            return self._count(self.messages(query, [*kept, cut]), tokens) <= self.max_tokens

        while lo < hi:  # largest n with fits(n); fits is monotone in n
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        text = " ".join(words[:lo])
        if lo == 0 or tokens.count_tokens(text) < self.min_passage_tokens:
            return None
        return ContextPassage(p.doc_id, p.chunk_idx, text, p.rank, True)

    def build_one(self, item: RankedPassages, tokens: TokenCounter) -> Context:
        cands = item.passages[: self.top_k]
        kept = self._fit(item.query, cands, tokens)
        placed = kept if self.order == "score" else [kept[i] for i in best_first_last(len(kept))]
        return self.assemble(item.query_id, item.query, placed, tokens,
                             n_candidates=len(item.passages), n_dropped=len(cands) - len(kept))

    def build(self, items: Sequence[RankedPassages], tokens: TokenCounter) -> list[Context]:
        return [self.build_one(item, tokens) for item in items]
