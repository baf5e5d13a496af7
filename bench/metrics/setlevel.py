"""Set-level metrics of docs/metrics.md: filter exclusions, predicates, abstention, ANN recall.

These are ratios of counts over a whole set, not means of per-query values. Each result keeps
its counts so a report can show n. Filter exclusion rates raise ``EmptyDenominatorError`` when
nothing is eligible (a 0 % rate there would be a claim without evidence); rates whose
denominator can legitimately be empty in a report (a system that never abstains) are None.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from bench.errors import BenchError
from bench_kernels import api


class EmptyDenominatorError(BenchError):
    """A rate was asked for over an empty set."""


@dataclass(frozen=True)
class ExclusionRates:
    """Filter false exclusions, over queries and over eligible gold docs."""

    query_rate: float  # queries whose every eligible gold doc was filtered out / eligible queries
    doc_rate: float  # eligible gold docs filtered out / eligible gold docs
    n_queries: int
    n_docs: int


def false_exclusion_rates(
    eligible_gold: Sequence[Collection[str]], passed: Sequence[Collection[str]]
) -> ExclusionRates:
    """Rates of gold docs a relevance filter removed.

    ``eligible_gold[i]``: query i's gold docs AFTER entitlement removal (docs the caller may not
    see are not false exclusions); ``passed[i]``: the docs the filter let through for query i.
    Queries without eligible gold are not counted. Raises EmptyDenominatorError when no query
    has eligible gold.
    """
    if len(eligible_gold) != len(passed):
        raise ValueError("eligible_gold and passed differ in length")
    n_q = n_excluded_q = n_d = n_excluded_d = 0
    for gold, kept in zip(eligible_gold, passed, strict=True):
        gold_set = set(gold)
        if not gold_set:
            continue
        removed = len(gold_set - set(kept))
        n_q += 1
        n_d += len(gold_set)
        n_excluded_d += removed
        n_excluded_q += removed == len(gold_set)
    if n_q == 0:
        raise EmptyDenominatorError(
            "filter false-exclusion rate: no query has an eligible gold doc (rate undefined)"
        )
    return ExclusionRates(n_excluded_q / n_q, n_excluded_d / n_d, n_q, n_d)


@dataclass(frozen=True)
class PrecisionRecall:
    """Micro-averaged precision / recall of extracted items against labels."""

    precision: float | None  # None: nothing extracted
    recall: float | None  # None: nothing labelled
    n_extracted: int
    n_labelled: int
    n_correct: int


def predicate_scores(
    extracted: Sequence[Collection[Hashable]], labelled: Sequence[Collection[Hashable]]
) -> PrecisionRecall:
    """Predicate precision / recall over labelled (query, predicate) pairs.

    ``extracted[i]`` and ``labelled[i]`` are query i's predicates (hashable, e.g. tuples
    ``("year", ">=", 2020)``), compared exactly.
    """
    if len(extracted) != len(labelled):
        raise ValueError("extracted and labelled differ in length")
    n_x = n_l = n_c = 0
    for got, gold in zip(extracted, labelled, strict=True):
        got_set, gold_set = set(got), set(gold)
        n_x += len(got_set)
        n_l += len(gold_set)
        n_c += len(got_set & gold_set)
    return PrecisionRecall(
        precision=n_c / n_x if n_x else None,
        recall=n_c / n_l if n_l else None,
        n_extracted=n_x,
        n_labelled=n_l,
        n_correct=n_c,
    )


@dataclass(frozen=True)
class AbstentionScores:
    """The four abstention numbers, always reported together (None: empty denominator)."""

    precision: float | None  # correct abstentions / abstentions
    recall: float | None  # correct abstentions / must-abstain cases
    coverage: float | None  # answered / all cases
    answered_accuracy: float | None  # correct answers / answered cases
    n: int
    n_abstained: int
    n_must_abstain: int
    n_answered: int


def abstention_scores(
    abstained: Sequence[bool], must_abstain: Sequence[bool], answer_correct: Sequence[bool]
) -> AbstentionScores:
    """Abstention precision / recall / coverage / answered accuracy.

    ``answer_correct[i]`` is read only for answered cases (an answer to a must-abstain case is
    wrong whatever it says, so pass False there).
    """
    ab = np.asarray(abstained, dtype=bool)
    must = np.asarray(must_abstain, dtype=bool)
    ok = np.asarray(answer_correct, dtype=bool)
    if not (ab.shape == must.shape == ok.shape):
        raise ValueError("abstained, must_abstain and answer_correct differ in length")
    answered = ~ab
    n_ab, n_must, n_ans = int(ab.sum()), int(must.sum()), int(answered.sum())
    correct_ab = int((ab & must).sum())
    correct_ans = int((answered & ok & ~must).sum())
    return AbstentionScores(
        precision=correct_ab / n_ab if n_ab else None,
        recall=correct_ab / n_must if n_must else None,
        coverage=n_ans / ab.size if ab.size else None,
        answered_accuracy=correct_ans / n_ans if n_ans else None,
        n=int(ab.size),
        n_abstained=n_ab,
        n_must_abstain=n_must,
        n_answered=n_ans,
    )


def ann_recall(
    ann_ids: np.ndarray,
    ann_distances: np.ndarray,
    exact_ids: np.ndarray,
    exact_distances: np.ndarray,
    k: int,
    *,
    device: str = "cpu",
) -> np.ndarray:
    """Per-query tie-tolerant ANN recall@k (docs/metrics.md; ann-benchmarks' rule at 1e-6).

    2-D inputs, one row per query: the ANN's returned ids with their EXACT distances
    (smaller = closer; recompute quantised distances first) and the flat index's top-k.
    """
    return api.ann_recall(ann_ids, ann_distances, exact_ids, exact_distances, k, device=device)
