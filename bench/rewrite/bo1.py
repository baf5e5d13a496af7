"""Bo1 (Amati's Bose-Einstein 1) pseudo-relevance feedback on the lexical lane, as Terrier
computes it.

Matched against terrier-core (read for this module): ``matching.models.queryexpansion.Bo1``,
``querying.DFRBagExpansionTerms`` and ``querying.QueryExpansion``, whose defaults are
``expansion.documents = 3``, ``expansion.terms = 10``, ``expansion.mindocuments = 2``,
``parameter.free.expansion = true`` and ``rocchio.beta = 0.4``:

1. the query's terms, each weighted by how often it occurs in the query (Terrier's
   ``keyFrequency``);
2. the first ``fb_docs`` feedback documents as one bag of words: per term ``tfx`` (its
   frequency summed over them) and the number of them that hold it;
3. a term held by fewer than ``min_docs`` of them gets weight 0 unless it is a query term
   (only when there are at least ``min_docs`` feedback documents);
4. every other term ``w(t) = tfx * log2((1 + Pn) / Pn) + log2(1 + Pn)``, ``Pn = F / N``: ``F``
   the term's frequency in the collection, ``N`` the number of documents;
5. the weights divided by a normaliser: with ``parameter_free`` (Terrier's default) the
   Bo1 formula at the heaviest term's ``tfx`` with ``f = tfx_max / N``, i.e.
   ``tfx_max * log2((1 + f) / f) + log2(1 + f)``; otherwise the heaviest weight, and the
   quotients multiplied by ``beta`` (Rocchio's beta);
6. the ``max(fb_terms, number of query terms)`` heaviest terms added to the query: the new
   weight of a term is its query weight plus its normalised expansion weight
   (``MatchingQueryTerms.addTermPropertyWeight``); terms outside them keep their query
   weight.

The expanded query is searched on the same bm25s index as boosted term clauses (score = sum
of weight x the term's BM25 score: ``bench.lexical.bm25.BuiltBM25.search_weighted``), like
RM3. Differences, stated: the documents are the indexed chunks (feedback: the chunks behind
the first search's hits), analysed by the lane's own tokeniser (bm25s) and counted over the
whole index once (``CollectionStats``, an index-time artifact); Terrier's own BM25 saturates
a query term's weight (``k_3``) where a boosted clause scales linearly; where Terrier's
hash-map order breaks ties, here the term that sorts first wins (deterministic).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.config.build import OptionError


@dataclass(frozen=True)
class CollectionStats:
    """Term statistics of a lexical index, from the same tokens it indexed.

    ``cf[t]``: occurrences of ``t`` over every indexed document (chunk); ``df[t]``: documents
    holding it; ``n_docs``: documents indexed; ``n_tokens``: tokens indexed."""

    cf: Mapping[str, int]
    df: Mapping[str, int]
    n_docs: int
    n_tokens: int

    @classmethod
    def of(cls, documents: Sequence[Sequence[str]]) -> CollectionStats:
        cf: Counter[str] = Counter()
        df: Counter[str] = Counter()
        for toks in documents:
            cf.update(toks)
            df.update(set(toks))
        return cls(dict(cf), dict(df), len(documents), sum(cf.values()))


def bo1(tfx: float, cf: float, n_docs: float) -> float:
    """Terrier's ``Bo1.score``: ``tfx log2((1 + Pn) / Pn) + log2(1 + Pn)``, ``Pn = cf / N``."""
    pn = cf / n_docs
    return tfx * math.log2((1.0 + pn) / pn) + math.log2(1.0 + pn)


class Bo1Rewriter:
    """Bo1 on the lexical lane (see the module docstring). ``fb_docs``: feedback documents;
    ``fb_terms``: terms added (at least the query's own count); ``min_docs``: feedback
    documents a new term must occur in; ``parameter_free``: Terrier's parameter-free
    normaliser, else the heaviest weight and ``beta``."""

    name = "bo1"

    def __init__(self, *, fb_docs: int = 3, fb_terms: int = 10, min_docs: int = 2,
                 parameter_free: bool = True, beta: float = 0.4) -> None:
        if fb_docs < 1:
            raise OptionError("fb_docs", f"must be >= 1, got {fb_docs}")
        if fb_terms < 1:
            raise OptionError("fb_terms", f"must be >= 1, got {fb_terms}")
        if min_docs < 1:
            raise OptionError("min_docs", f"must be >= 1, got {min_docs}")
        if not beta > 0:
            raise OptionError("beta", f"must be > 0, got {beta}")
        self.fb_docs = fb_docs
        self.fb_terms = fb_terms
        self.min_docs = min_docs
        self.parameter_free = bool(parameter_free)
        self.beta = float(beta)

    @property
    def feedback_depth(self) -> int:
        return self.fb_docs

    def cache_params(self) -> dict[str, object]:
        p: dict[str, object] = {"fb_docs": self.fb_docs, "fb_terms": self.fb_terms,
                                "min_docs": self.min_docs,
                                "parameter_free": self.parameter_free}
        if not self.parameter_free:  # beta is read only without the parameter-free normaliser
            p["beta"] = self.beta
        return p

    def term_weights(self, query_terms: set[str], feedback: Sequence[Sequence[str]],
                     stats: CollectionStats) -> dict[str, float]:
        """Steps 2-5: every feedback term's normalised expansion weight."""
        docs = feedback[: self.fb_docs]
        tfx: Counter[str] = Counter()
        held: Counter[str] = Counter()
        for toks in docs:
            tfx.update(toks)
            held.update(set(toks))
        min_df = 0 if len(docs) < self.min_docs else self.min_docs
        raw: dict[str, float] = {}
        for t in sorted(tfx):
            cf = stats.cf.get(t, 0)
            if cf <= 0:  # not indexed: no collection statistics (cannot be a chunk's token)
                continue
            keep = held[t] >= min_df or t in query_terms
            raw[t] = bo1(tfx[t], cf, stats.n_docs) if keep else 0.0
        if not raw:
            return {}
        top = min(raw, key=lambda t: (-raw[t], t))
        if self.parameter_free:
            norm = bo1(tfx[top], tfx[top], stats.n_docs)
            scale = 1.0
        else:
            norm, scale = raw[top], self.beta
        if not norm > 0:
            return {}
        return {t: w / norm * scale for t, w in raw.items()}

    def expand(self, query_tokens: Sequence[str], feedback: Sequence[Sequence[str]],
               stats: CollectionStats) -> list[tuple[str, float]]:
        """The expanded query as (term, weight), heaviest first (step 6). ``feedback``: the
        tokens of the first-search documents, best first. With no feedback document the
        query keeps its own term counts."""
        q = {t: float(c) for t, c in Counter(query_tokens).items()}
        w = self.term_weights(set(q), feedback, stats)
        n = max(self.fb_terms, len(q))
        for t, x in sorted(w.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
            if x > 0 or t in q:  # a zero-weight new term would change no score
                q[t] = q.get(t, 0.0) + x
        return sorted(q.items(), key=lambda kv: (-kv[1], kv[0]))
