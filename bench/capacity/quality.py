"""What makes a served answer correct, for quality-goodput and quality under load.

``answer_scorer(queries, metric)`` scores one reply of query q on a per-query metric:

- ``hit@k`` (retrieval replies: the answer is the ranked doc ids, space-separated): 1 when
  one of the first k is relevant (a qrels grade >= 1), else 0; a must-abstain query is
  correct when nothing is returned;
- ``ndcg@k`` / ``recall@k`` (ranking replies): trec_eval's nDCG (linear gain = the qrels
  grade, log2 discount, the ideal from the query's own grades) and recall of the relevant
  documents within the first k; a must-abstain query scores as for hit@k;
- ``token_f1`` / ``exact_match`` (generated answers): SQuAD-normalised, the best over the
  query's references (``bench.metrics.answer``).

A request without an answer (timeout, failure) scores 0: quality under load is the quality
DELIVERED, so a timed-out answer is a wrong one. ``correct = score >= threshold``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from bench.data.base import Query
from bench.errors import ConfigError
from bench.metrics.answer import exact_match, token_f1

Scorer = Callable[[int, str | None], float]
METRICS = ("hit@k", "ndcg@k", "recall@k", "token_f1", "exact_match")
RANKING = ("hit@", "ndcg@", "recall@")


def reads_ranking(metric: str) -> bool:
    """Whether the metric reads a ranking (the reply's doc ids) rather than an answer."""
    return metric.startswith(RANKING)


def answer_scorer(queries: Sequence[Query], metric: str, *, key: str = "capacity.quality"
                  ) -> Scorer:
    if reads_ranking(metric):
        family, _, kk = metric.partition("@")
        try:
            k = int(kk)
        except ValueError:
            raise ConfigError(f"{key}.metric", f"{metric!r}: {family}@<k> needs an integer k"
                              ) from None
        if k < 1:
            raise ConfigError(f"{key}.metric", f"{family}@k needs k >= 1")
        grades = [{d: g for d, g in q.qrels if g >= 1} for q in queries]
        ideal = [sum(g / math.log2(i + 2) for i, g in enumerate(sorted(gr.values(),
                                                                        reverse=True)[:k]))
                 for gr in grades]

        def score(q: int, answer: str | None) -> float:
            if answer is None:
                return 0.0
            got = answer.split()[:k]
            rel = grades[q]
            if not rel:
                return float(not got)
            if family == "hit":
                return float(any(d in rel for d in got))
            if family == "recall":
                return len(set(got) & rel.keys()) / len(rel)
            return sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(got)) / ideal[q]

        return score
    if metric in ("token_f1", "exact_match"):
        fn = token_f1 if metric == "token_f1" else exact_match
        refs = [q.references for q in queries]
        return lambda q, answer: 0.0 if answer is None or not refs[q] else fn(answer, refs[q])
    raise ConfigError(f"{key}.metric", f"unknown answer metric {metric!r}: hit@<k>, "
                                       "ndcg@<k>, recall@<k>, token_f1 or exact_match")
