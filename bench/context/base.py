"""Records and Protocol of the `context` stage: ranked passages -> a grounded prompt.

The generator only ever sees what this stage assembles, so the ``Context`` record keeps the
exact passages (with stable document ids and chunk indices), the prompt messages and the token
count in the GENERATOR's tokenizer; judges check faithfulness and citations against it.

Passages are tagged ``[doc:ID]`` with the dataset's stable document id, so a citation in an
answer can be traced to a passage (:func:`citations` reads them back).

Adding a policy: implement ``ContextBuilder`` (keyword-only options, ``OptionError`` for bad
values) in a module here; the token counter is the generator's ``count_tokens``.

Two optional capabilities, separate protocols the plan checks (never ``hasattr`` probes):
``JudgedContextBuilder`` places passages by the relevance judgments (the gold passage of a
lost-in-the-middle probe; the context op hands it each query's whole pool with its relevant
documents), and ``ContextSweep`` expands one option into several prompt layouts swept on the
same pool, like rerank depths: one context node per variant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bench.generation.base import ChatMessage


@dataclass(frozen=True)
class Passage:
    """One ranked candidate: a chunk's text, its document's stable id, the chunk row and the
    ranking score (higher = better)."""

    doc_id: str
    chunk_idx: int
    text: str
    score: float = 0.0


@dataclass(frozen=True)
class RankedPassages:
    """A query and its candidates, best first (the order the retrieval/rerank stage kept)."""

    query_id: str
    query: str
    passages: tuple[Passage, ...]


@dataclass(frozen=True)
class ContextPassage:
    """A passage as placed in the prompt. ``truncated``: its text was cut to fit the budget;
    ``rank``: its 1-based rank among the candidates (position in the prompt may differ)."""

    doc_id: str
    chunk_idx: int
    text: str
    rank: int
    truncated: bool = False


@dataclass(frozen=True)
class Context:
    """The prompt one query's answer is generated from.

    ``n_tokens``: tokens of the message contents in the generator's tokenizer (the chat
    template's own tokens are not counted). ``n_candidates``: passages offered;
    ``n_dropped``: of the top-k, those that did not fit; ``truncated``: the last placed passage
    was cut; ``over_budget``: even the prompt without passages exceeds the budget.
    """

    query_id: str
    query: str
    passages: tuple[ContextPassage, ...]
    messages: tuple[ChatMessage, ...]
    n_tokens: int
    n_candidates: int
    n_dropped: int = 0
    truncated: bool = False
    over_budget: bool = False

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """Distinct document ids in prompt order."""
        return tuple(dict.fromkeys(p.doc_id for p in self.passages))

    def passages_of(self, doc_id: str) -> tuple[ContextPassage, ...]:
        return tuple(p for p in self.passages if p.doc_id == doc_id)


def ranked_passages(query_id: str, query: str, doc_ids: Sequence[str],
                    chunk_idx: Sequence[int], texts: Sequence[str],
                    scores: Sequence[float]) -> RankedPassages:
    """A ``RankedPassages`` from parallel columns, best first (e.g. a query's pool: external
    doc ids, ``Hits.chunk_idx``, ``ChunkTable.text[chunk_idx]``, pool scores)."""
    if not len(doc_ids) == len(chunk_idx) == len(texts) == len(scores):
        raise ValueError("doc_ids, chunk_idx, texts and scores differ in length")
    return RankedPassages(query_id, query, tuple(
        Passage(str(d), int(c), t, float(s))
        for d, c, t, s in zip(doc_ids, chunk_idx, texts, scores, strict=True)))


class TokenCounter(Protocol):
    """Anything that counts tokens like the generator (a ``Generator`` is one)."""

    def count_tokens(self, text: str) -> int: ...


class ContextBuilder(Protocol):
    def cache_params(self) -> dict[str, object]:
        """Every option that changes the prompt (budget, order, template)."""
        ...

    def build(self, items: Sequence[RankedPassages], tokens: TokenCounter) -> list[Context]:
        """One ``Context`` per item, same order."""
        ...


@runtime_checkable
class TopKContextBuilder(ContextBuilder, Protocol):
    """Optional capability: the builder reads only each query's first ``top_k`` candidates
    (the others need not be fetched as text)."""

    @property
    def top_k(self) -> int: ...


@dataclass(frozen=True)
class JudgedPassages:
    """A query's whole pool (best first) with what the judgments say about it.

    ``relevant``: documents the query's caller may see with grade >= the run's relevance
    level, best grade first; ``judged_relevant``: every document with such a grade, visible
    or not (none of them may serve as a distractor); ``first_chunks``: the first chunk
    (chunk-table order) of each ``relevant`` document, same order — what is placed when the
    pool holds no passage of a relevant document.
    """

    ranked: RankedPassages
    relevant: tuple[str, ...]
    judged_relevant: frozenset[str]
    first_chunks: tuple[Passage, ...]
    must_abstain: bool = False


@dataclass(frozen=True)
class Placement:
    """Where a judged builder put one query's gold passage: ``index`` is its 0-based place in
    the prompt; ``injected``: the pool held no passage of a relevant document, so the
    document's first chunk was placed instead."""

    query_id: str
    doc_id: str
    chunk_idx: int
    index: int
    injected: bool


@dataclass(frozen=True)
class JudgedBuild:
    """What a judged builder made of its items: one ``Context`` and one ``Placement`` per
    probed query (same order), and ``(query_id, reason)`` for every item it left out."""

    contexts: tuple[Context, ...]
    placements: tuple[Placement, ...]
    excluded: tuple[tuple[str, str], ...] = ()


@runtime_checkable
class JudgedContextBuilder(Protocol):
    """Optional capability: a builder that reads the relevance judgments."""

    def cache_params(self) -> dict[str, object]: ...

    def exclusion(self, must_abstain: bool, relevant: Sequence[str]) -> str | None:
        """Why a query cannot be built from its judgments alone (``must_abstain``, its
        ``relevant`` documents), or None; the run draws its query subset from the others."""
        ...

    def build_judged(self, items: Sequence[JudgedPassages], tokens: TokenCounter
                     ) -> JudgedBuild:
        """Contexts of the items it can build, in item order; the rest counted as excluded."""
        ...


@dataclass(frozen=True)
class ContextVariant:
    """One prompt layout of a swept context option: ``label`` goes into the config label
    (``dense>LABEL>gen(...)``), ``params`` into the config's parameters."""

    label: str
    params: dict[str, object]
    builder: ContextBuilder | JudgedContextBuilder


@runtime_checkable
class ContextSweep(Protocol):
    """Optional capability: several layouts swept on one pool, in report order (the first
    is the baseline of the paired comparisons)."""

    def variants(self) -> list[ContextVariant]: ...


#: how passages are tagged for citation; ``ID`` is the document id
CITATION_TAG = "[doc:{doc_id}]"
_CITATION = re.compile(r"\[doc:\s*([^\]\s]+)\s*\]")


def tag(doc_id: str) -> str:
    return CITATION_TAG.format(doc_id=doc_id)


def citations(text: str) -> list[str]:
    """Cited document ids of ``text`` in order of appearance (``[doc:ID]`` tags)."""
    return _CITATION.findall(text)


def strip_citations(text: str) -> str:
    """``text`` without its citation tags (answer checks compare the words, not the tags)."""
    text = _CITATION.sub("", text)
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()
