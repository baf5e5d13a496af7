"""What "the right route" of a query is, from the labels a dataset already has.

- ``none`` — the query is must-abstain, or has no relevant document at the run's relevance
  level: retrieving cannot help, the answer is an abstention;
- ``iterative`` — two or more relevant documents (FOLDOC's ``multi_doc`` and
  ``semantic_multi_doc``: a question about A and its relation to B and C): one search of the
  whole question tends to find one of them, a search per part finds the rest;
- ``one_shot`` — otherwise (one relevant document: a lookup).

On the default FOLDOC dataset this labels ``unanswerable`` -> none, ``multi_doc`` and
``semantic_multi_doc`` -> iterative, ``exact_lookup``, ``semantic_lookup`` and
``paraphrase_lookup`` -> one_shot. The labels are derived, not human judgements of which
pipeline is best for a query; the report says so.
"""

from __future__ import annotations

from bench.data.base import Query
from bench.route.base import ITERATIVE, NONE, ONE_SHOT

LABELS = (NONE, ONE_SHOT, ITERATIVE)


def route_label(query: Query, relevance_level: int = 1) -> str:
    relevant = sum(1 for _, g in query.qrels if g >= relevance_level)
    if query.must_abstain or relevant == 0:
        return NONE
    return ITERATIVE if relevant >= 2 else ONE_SHOT
