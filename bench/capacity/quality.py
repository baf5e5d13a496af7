"""What makes a served answer correct, for quality-goodput and quality under load.

``answer_scorer(queries, metric)`` scores one reply of query q on a per-query metric:

- ``hit@k`` (retrieval replies: the answer is the ranked doc ids, space-separated): 1 when
  one of the first k is relevant (a qrels grade >= 1), else 0; a must-abstain query is
  correct when nothing is returned;
- ``token_f1`` / ``exact_match`` (generated answers): SQuAD-normalised, the best over the
  query's references (``bench.metrics.answer``).

A request without an answer (timeout, failure) scores 0: quality under load is the quality
DELIVERED, so a timed-out answer is a wrong one. ``correct = score >= threshold``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.data.base import Query
from bench.errors import ConfigError
from bench.metrics.answer import exact_match, token_f1

Scorer = Callable[[int, str | None], float]
METRICS = ("hit@k", "token_f1", "exact_match")


def answer_scorer(queries: Sequence[Query], metric: str, *, key: str = "capacity.quality"
                  ) -> Scorer:
    if metric.startswith("hit@"):
        try:
            k = int(metric[4:])
        except ValueError:
            raise ConfigError(f"{key}.metric", f"{metric!r}: hit@<k> needs an integer k"
                              ) from None
        if k < 1:
            raise ConfigError(f"{key}.metric", "hit@k needs k >= 1")
        relevant = [frozenset(d for d, g in q.qrels if g >= 1) for q in queries]

        def hit(q: int, answer: str | None) -> float:
            if answer is None:
                return 0.0
            got = answer.split()[:k]
            if not relevant[q]:
                return float(not got)
            return float(any(d in relevant[q] for d in got))

        return hit
    if metric in ("token_f1", "exact_match"):
        fn = token_f1 if metric == "token_f1" else exact_match
        refs = [q.references for q in queries]
        return lambda q, answer: 0.0 if answer is None or not refs[q] else fn(answer, refs[q])
    raise ConfigError(f"{key}.metric", f"unknown answer metric {metric!r}: hit@<k>, token_f1 "
                                       "or exact_match")
