"""The retrieval loop under budgets: search, look, reformulate, search again.

``IterativeLoop`` is the option (``conf/iterative/*.yaml``): its reformulations (``decompose``:
the parts of a conjunctive question, ``bench.iterative.decompose``; ``supplied``: a JSONL file
of rewrites, ``bench.iterative.supplied``), its look, its merge and its budgets.

The loop for one query (:func:`run_loop`), turn 1 being the one-shot config's search:

- **look**: the evidence is *sufficient* when the question has at most one part and the best
  evidence score is >= ``stop_score`` (a confident single-hop answer); a question of several
  parts needs a search per part, so it is never sufficient before its parts are searched.
  Otherwise the next unsearched reformulation is searched; none left: ``nothing_left``;
- **budgets**, checked before every further search: ``max_calls`` searches in all (the first
  included), ``max_tokens`` query tokens encoded in all (the embedder's tokenizer, the first
  query included), ``max_wall_ms`` of loop time after the first search (query encoding, search
  and fold of the further turns; the first search is the one-shot config's own and is timed
  there). A search the budget forbids ends the loop ``budget_exhausted`` (the stop names the
  limit); the query keeps the evidence it had. Each limit must be > 0 (exit 2 naming it).
  ``max_wall_ms`` makes a result depend on the machine's speed: the report gives the count of
  queries it stopped, and the per-query test runs with a limit no query reaches;
- **merge**: the final ranking holds every document seen, scored ``max`` (CombMAX: its best
  similarity to any query issued; comparable across turns, one embedder) or ``rrf``
  (reciprocal rank fusion of the turns' rankings, k = 60), in the trec_eval order, cut at the
  retriever's ``k``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from bench.config.build import OptionError
from bench.data.base import Query
from bench.iterative.base import (
    STOP_CALLS,
    STOP_NOTHING_LEFT,
    STOP_SUFFICIENT,
    STOP_TOKENS,
    STOP_WALL,
    LoopRecord,
    Reformulator,
    Turn,
)
from bench.retrieval.base import trec_order

REFORMULATIONS = ("decompose", "supplied")
MERGES = ("max", "rrf")
RRF_K = 60

#: one ranking: (doc_idx int32, scores float32, chunk_idx int32), best first
Ranking = tuple[np.ndarray, np.ndarray, np.ndarray]
#: one search: query text -> its ranking
Search = Callable[[str], Ranking]


class IterativeLoop:
    def __init__(self, *, reformulations: str = "decompose", path: str | None = None,
                 max_parts: int = 4, max_calls: int = 4, max_wall_ms: float = 2000.0,
                 max_tokens: int = 256, stop_score: float = 0.75, merge: str = "max") -> None:
        for key, value in (("max_calls", max_calls), ("max_wall_ms", max_wall_ms),
                           ("max_tokens", max_tokens)):
            if not value > 0 or not math.isfinite(value):
                raise OptionError(key, f"must be > 0, got {value}")
        if merge not in MERGES:
            raise OptionError("merge", f"unknown merge {merge!r}; use one of "
                                       f"{', '.join(MERGES)}")
        self.reformulator: Reformulator
        if reformulations == "decompose":
            if path is not None:
                raise OptionError("path", "only reformulations=supplied reads a file")
            from bench.iterative.decompose import DecomposeReformulator

            self.reformulator = DecomposeReformulator(max_parts=max_parts)
        elif reformulations == "supplied":
            if path is None:
                raise OptionError("path", "reformulations=supplied needs the JSONL file "
                                          "({query_id, reformulations: [...]} rows)")
            from bench.iterative.supplied import SuppliedReformulations

            self.reformulator = SuppliedReformulations(path=path)
        else:
            raise OptionError("reformulations", f"unknown reformulations {reformulations!r}; "
                                                f"use one of {', '.join(REFORMULATIONS)}")
        self.max_calls = int(max_calls)
        self.max_wall_ms = float(max_wall_ms)
        self.max_tokens = int(max_tokens)
        self.stop_score = float(stop_score)
        self.merge = merge

    @property
    def name(self) -> str:
        return f"iterative[{self.reformulator.name}]"

    def cache_params(self) -> dict[str, object]:
        return {"reformulations": self.reformulator.name, **self.reformulator.cache_params(),
                "max_calls": self.max_calls, "max_wall_ms": self.max_wall_ms,
                "max_tokens": self.max_tokens, "stop_score": self.stop_score,
                "merge": self.merge}


def run_loop(loop: IterativeLoop, query: Query, first: Ranking, search: Search,
             count_tokens: Callable[[str], int], id_key: np.ndarray, k: int
             ) -> tuple[Ranking, LoopRecord]:
    """One query's loop (see the module docstring): the merged ranking, cut at ``k``, and
    what the loop did. ``first`` is turn 1's ranking (the one-shot search)."""
    t0 = time.perf_counter()
    pending = list(loop.reformulator.reformulate(query))
    n_parts = max(1, len(pending))
    issued = {query.text.strip().casefold()}
    rankings = [first]
    seen: dict[int, None] = dict.fromkeys(int(d) for d in first[0])
    tokens = count_tokens(query.text)
    turns = [Turn(1, query.text, tokens, _top(first[1]), len(seen))]
    stop = STOP_NOTHING_LEFT
    while True:
        best = max((s for r in rankings if math.isfinite(s := _top(r[1]))), default=None)
        if n_parts <= 1 and best is not None and best >= loop.stop_score:
            stop = STOP_SUFFICIENT
            break
        pending = [p for p in pending if p.strip().casefold() not in issued]
        if not pending:
            stop = STOP_NOTHING_LEFT
            break
        text = pending.pop(0)
        n_tok = count_tokens(text)
        if len(rankings) + 1 > loop.max_calls:
            stop = STOP_CALLS
            break
        if tokens + n_tok > loop.max_tokens:
            stop = STOP_TOKENS
            break
        if (time.perf_counter() - t0) * 1000.0 >= loop.max_wall_ms:
            stop = STOP_WALL
            break
        ranking = search(text)
        docs, scores = ranking[0], ranking[1]
        issued.add(text.strip().casefold())
        tokens += n_tok
        rankings.append(ranking)
        new = [int(d) for d in docs if int(d) not in seen]
        seen.update(dict.fromkeys(new))
        turns.append(Turn(len(rankings), text, n_tok, _top(scores), len(new)))
    merged = merge(rankings, loop.merge, id_key, k)
    wall_ms = (time.perf_counter() - t0) * 1000.0
    record = LoopRecord(query.query_id, tuple(turns), len(rankings), tokens, wall_ms, stop,
                        tuple(seen))
    return merged, record


def _top(scores: np.ndarray) -> float:
    return float(scores[0]) if len(scores) else float("nan")


def merge(rankings: list[Ranking], how: str, id_key: np.ndarray, k: int) -> Ranking:
    """Every document of ``rankings`` once, scored by ``how``, in the trec_eval order, top k.
    A document's passage is the chunk of its best-scored hit (``max``) or of its first
    (``rrf``: the earliest turn that found it)."""
    score: dict[int, float] = {}
    chunk: dict[int, int] = {}
    for docs, scores, chunks in rankings:
        for rank, (d, s, c) in enumerate(zip(docs.tolist(), scores.tolist(), chunks.tolist(),
                                             strict=True), 1):
            if how == "max":
                if s > score.get(d, -math.inf):
                    score[d], chunk[d] = float(s), int(c)
            else:
                score[d] = score.get(d, 0.0) + 1.0 / (RRF_K + rank)
                chunk.setdefault(d, int(c))
    d_arr = np.fromiter(score, dtype=np.int32, count=len(score))
    s_arr = np.asarray([score[int(d)] for d in d_arr], dtype=np.float32)
    c_arr = np.asarray([chunk[int(d)] for d in d_arr], dtype=np.int32)
    perm = trec_order(d_arr, s_arr, id_key)[:k]
    return d_arr[perm], s_arr[perm], c_arr[perm]
