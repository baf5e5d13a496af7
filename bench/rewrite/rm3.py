"""RM3 pseudo-relevance feedback on the lexical lane, as Anserini computes it.

Matched against Anserini's ``io.anserini.rerank.lib.Rm3Reranker`` and
``io.anserini.util.FeatureVector`` (castorini/anserini, read for this module), whose defaults
Pyserini exposes as ``LuceneSearcher.set_rm3(fb_terms=10, fb_docs=10,
original_query_weight=0.5)``:

1. the query's analysed terms, each counted, scaled to unit L1 norm (``qfv``);
2. for each of the first ``fb_docs`` feedback documents: its term frequencies, keeping only
   terms of 2 to 20 characters matching ``[a-z0-9]+`` that occur in at most
   ``max_df_ratio`` (10 %) of the indexed documents, pruned to its ``fb_terms`` most frequent;
3. the relevance model ``rm(t) = sum_i tf_i(t) / |D_i|_1 * score_i`` over those documents
   (``|D_i|_1``: the pruned vector's L1 norm; ``score_i``: the first search's BM25 score, raw;
   a document with norm <= 0.001 contributes nothing), pruned to its ``fb_terms`` heaviest
   terms and scaled to unit L1 norm;
4. the expanded query ``w(t) = original_query_weight * qfv(t) + (1 - original_query_weight)
   * rm(t)`` over the union of both vocabularies, searched as boosted term clauses: score =
   sum of w(t) x BM25(t, d) (``bench.lexical.bm25.BuiltBM25.search_weighted``).

Differences, stated: the feedback "documents" are the indexed chunks behind the first
search's hits (what the lexical index holds), analysed by the lane's own tokeniser (bm25s:
lower-case ``\\w\\w+`` tokens, its stop words, optional stemmer) rather than Lucene's
analyser; where Anserini's hash-map order breaks ties when pruning, here the term that sorts
first wins (deterministic). Weights are float64 here, float32 in Anserini (differences in
the 7th digit).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from bench.config.build import OptionError

_ALNUM = re.compile(r"[a-z0-9]+")


def _prune(weights: dict[str, float], k: int) -> dict[str, float]:
    """The ``k`` heaviest terms (ties: the term that sorts first)."""
    return dict(sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:k])


def _unit_l1(weights: dict[str, float]) -> dict[str, float]:
    norm = sum(abs(v) for v in weights.values())
    return {t: v / norm for t, v in weights.items()} if norm > 0 else dict(weights)


class RM3Rewriter:
    """RM3 on the lexical lane (see the module docstring). ``fb_docs``: feedback documents;
    ``fb_terms``: terms kept per feedback document and in the relevance model;
    ``original_query_weight``: the query's share of the interpolation; ``max_df_ratio``:
    feedback terms in more than this share of indexed documents are dropped (Anserini: 0.1)."""

    name = "rm3"

    def __init__(self, *, fb_docs: int = 10, fb_terms: int = 10,
                 original_query_weight: float = 0.5, max_df_ratio: float = 0.1) -> None:
        if fb_docs < 1:
            raise OptionError("fb_docs", f"must be >= 1, got {fb_docs}")
        if fb_terms < 1:
            raise OptionError("fb_terms", f"must be >= 1, got {fb_terms}")
        if not 0.0 <= original_query_weight <= 1.0:
            raise OptionError("original_query_weight",
                              f"must be in [0, 1], got {original_query_weight}")
        if not 0.0 < max_df_ratio <= 1.0:
            raise OptionError("max_df_ratio", f"must be in (0, 1], got {max_df_ratio}")
        self.fb_docs = fb_docs
        self.fb_terms = fb_terms
        self.original_query_weight = float(original_query_weight)
        self.max_df_ratio = float(max_df_ratio)

    @property
    def feedback_depth(self) -> int:
        return self.fb_docs

    def cache_params(self) -> dict[str, object]:
        return {"fb_docs": self.fb_docs, "fb_terms": self.fb_terms,
                "original_query_weight": self.original_query_weight,
                "max_df_ratio": self.max_df_ratio}

    def feedback_vector(self, tokens: Sequence[str], df_ratio: Callable[[str], float]
                        ) -> dict[str, float]:
        """One feedback document's filtered, pruned term frequencies (step 2)."""
        tf = Counter(t for t in tokens if 2 <= len(t) <= 20 and _ALNUM.fullmatch(t))
        kept = {t: float(c) for t, c in tf.items() if df_ratio(t) <= self.max_df_ratio}
        return _prune(kept, self.fb_terms)

    def relevance_model(self, feedback: Sequence[tuple[Sequence[str], float]],
                        df_ratio: Callable[[str], float]) -> dict[str, float]:
        """Step 3 over (tokens, first-search score) of the first ``fb_docs`` documents."""
        vectors = [(self.feedback_vector(toks, df_ratio), float(score))
                   for toks, score in feedback[: self.fb_docs]]
        vocab = sorted({t for v, _ in vectors for t in v})
        norms = [sum(v.values()) for v, _ in vectors]
        rm = {t: sum(v.get(t, 0.0) / n * s for (v, s), n in zip(vectors, norms, strict=True)
                     if n > 0.001) for t in vocab}
        return _unit_l1(_prune(rm, self.fb_terms))

    def expand(self, query_tokens: Sequence[str],
               feedback: Sequence[tuple[Sequence[str], float]],
               df_ratio: Callable[[str], float]) -> list[tuple[str, float]]:
        """The expanded query as (term, weight), heaviest first (step 4). With no feedback
        document the query keeps its own (L1-scaled) terms."""
        q = _unit_l1({t: float(c) for t, c in Counter(query_tokens).items()})
        if not feedback:
            return sorted(q.items(), key=lambda kv: (-kv[1], kv[0]))
        rm = self.relevance_model(feedback, df_ratio)
        a = self.original_query_weight
        w = {t: a * q.get(t, 0.0) + (1.0 - a) * rm.get(t, 0.0) for t in set(q) | set(rm)}
        return sorted(w.items(), key=lambda kv: (-kv[1], kv[0]))
