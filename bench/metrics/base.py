"""Records of the `metrics` stage: qrels, runs and evaluations as flat CSR arrays.

A ``Qrels`` or ``Run`` holds one slice per query: ``offsets[i]:offsets[i+1]`` indexes its
``doc_ids`` (and ``rels`` / ``scores``). Doc ids stay external strings (numpy ``U``, ``S`` or
object arrays; ``U``/``S`` avoid a conversion on hot paths). Kernels get them as unit matrices
(``bench_kernels.api.id_units``), so no dict crosses into the engine.

Adding a metric: declare it once in ``registry.py`` (its docstring says how); ranking metrics
also get a branch in the kernels' ``metric_value``. Nothing here changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.errors import BenchError


class DuplicateDocError(BenchError):
    """A doc id repeats within one query's ranking (or qrels): an input error, never extra gain.

    ``position`` is the row of the repeat in the CSR arrays, so file readers can name a line.
    """

    def __init__(self, source: str, query_id: str, doc_id: str, position: int) -> None:
        self.source = source
        self.query_id = query_id
        self.doc_id = doc_id
        self.position = position
        super().__init__(f"doc {doc_id!r} appears twice in the {source} of query {query_id!r}")


def _check_csr(name: str, query_ids: tuple[str, ...], offsets: np.ndarray, n: int) -> None:
    if offsets.ndim != 1 or offsets.shape[0] != len(query_ids) + 1:
        raise ValueError(f"{name}: offsets must hold len(query_ids) + 1 entries")
    if offsets[0] != 0 or offsets[-1] != n or np.any(np.diff(offsets) < 0):
        raise ValueError(f"{name}: offsets must rise from 0 to len(doc_ids)")
    if len(set(query_ids)) != len(query_ids):
        raise ValueError(f"{name}: query ids must be unique")


def _id_array(ids: list[str]) -> np.ndarray:
    return np.array(ids, dtype=str) if ids else np.zeros(0, dtype="U1")


@dataclass(frozen=True)
class Qrels:
    """Graded judgements: query_ids[i] judges doc_ids[offsets[i]:offsets[i+1]] with rels."""

    query_ids: tuple[str, ...]
    offsets: np.ndarray  # int64, len(query_ids) + 1
    doc_ids: np.ndarray  # external doc ids
    rels: np.ndarray  # int32 grades
    # kernel-ready forms of the judgements, built once per id unit type by the engine (like
    # pytrec_eval's RelevanceEvaluator, one Qrels serves many runs without re-preparing)
    prepared: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", np.asarray(self.offsets, dtype=np.int64))
        object.__setattr__(self, "rels", np.asarray(self.rels, dtype=np.int32))
        _check_csr("Qrels", self.query_ids, self.offsets, len(self.doc_ids))
        if len(self.rels) != len(self.doc_ids):
            raise ValueError("Qrels: rels and doc_ids differ in length")

    @classmethod
    def from_mapping(cls, qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
        """From pytrec_eval-style ``{query_id: {doc_id: grade}}`` (mapping order is kept)."""
        sizes = [len(docs) for docs in qrels.values()]
        docs = [d for judged in qrels.values() for d in judged]
        rels = [int(r) for judged in qrels.values() for r in judged.values()]
        return cls(
            query_ids=tuple(qrels),
            offsets=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
            doc_ids=_id_array(docs),
            rels=np.array(rels, dtype=np.int32),
        )


@dataclass(frozen=True)
class Run:
    """Rankings: query_ids[i] retrieved doc_ids[offsets[i]:offsets[i+1]].

    With ``scores`` the ranking order is trec_eval's (float32 score desc, doc id desc in byte
    order on ties) whatever order the slice is stored in; with ``scores=None`` the stored order
    is the ranking.
    """

    query_ids: tuple[str, ...]
    offsets: np.ndarray  # int64, len(query_ids) + 1
    doc_ids: np.ndarray  # external doc ids
    scores: np.ndarray | None = field(default=None)  # float32 / float64

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", np.asarray(self.offsets, dtype=np.int64))
        _check_csr("Run", self.query_ids, self.offsets, len(self.doc_ids))
        if self.scores is not None:
            scores = np.asarray(self.scores)
            if scores.dtype not in (np.float32, np.float64):
                scores = scores.astype(np.float64)
            if len(scores) != len(self.doc_ids):
                raise ValueError("Run: scores and doc_ids differ in length")
            object.__setattr__(self, "scores", scores)

    @classmethod
    def from_mapping(cls, run: Mapping[str, Mapping[str, float]]) -> Run:
        """From pytrec_eval-style ``{query_id: {doc_id: score}}``."""
        sizes = [len(docs) for docs in run.values()]
        docs = [d for ranked in run.values() for d in ranked]
        scores = [float(s) for ranked in run.values() for s in ranked.values()]
        return cls(
            query_ids=tuple(run),
            offsets=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
            doc_ids=_id_array(docs),
            scores=np.array(scores, dtype=np.float64),
        )

    def ranking(self, query_id: str) -> list[str]:
        """The stored doc ids of one query (call ``engine.rank`` first for trec_eval order)."""
        i = self.query_ids.index(query_id)
        return [str(d) for d in self.doc_ids[self.offsets[i] : self.offsets[i + 1]]]


@dataclass(frozen=True)
class Evaluation:
    """Per-query metric values of the averaged queries, in qrels order.

    ``averaging`` names which queries those are (``bench.metrics.engine.Averaging``): with
    ``bench`` the EXPECTED queries (>= 1 relevant doc), a query missing from the run scored as
    an empty ranking and listed in ``missing_runs``, queries without a relevant doc not scored,
    only listed; with ``trec_eval`` / ``trec_eval_c`` trec_eval's default / ``-c`` sets.
    """

    query_ids: tuple[str, ...]
    values: Mapping[str, np.ndarray]  # metric name -> float64 per averaged query
    num_queries: int
    missing_runs: tuple[str, ...]
    queries_without_relevant: tuple[str, ...]
    averaging: str = "bench"

    def aggregate(self) -> dict[str, float]:
        """Mean of each metric over the expected queries (docs/metrics.md); needs >= 1 query."""
        if self.num_queries == 0:
            raise ValueError(f"no query to average over ({self.averaging} averaging)")
        return {name: float(np.mean(v)) for name, v in self.values.items()}

    def per_query(self) -> dict[str, dict[str, float]]:
        """``{query_id: {metric: value}}`` (pytrec_eval's shape)."""
        cols = {name: v.tolist() for name, v in self.values.items()}
        return {
            qid: {name: col[i] for name, col in cols.items()}
            for i, qid in enumerate(self.query_ids)
        }


#: Per-query statuses of answer and judge metrics. Only ``scored`` values enter a mean; every
#: other status is counted in completion accounting (README: n_invalid, n_no_claims, ...).
SCORED = "scored"
NO_CLAIMS = "no_claims"  # nothing to score (no extracted claims / no required claims)
NO_REFERENCE = "no_reference"  # the query has no reference to compare against
NOT_APPLICABLE = "not_applicable"  # the metric does not apply (e.g. refusal on answerable)
INVALID = "invalid"  # the judge's output failed its schema after every retry
ERROR = "error"  # the generation backend failed (timeout, server error)
STATUSES = (SCORED, NO_CLAIMS, NO_REFERENCE, NOT_APPLICABLE, INVALID, ERROR)


@dataclass(frozen=True)
class QueryValue:
    """One per-query metric value, the shape of a ``per_query.parquet`` row (less config/run).

    ``value`` is 0.0 whenever ``status`` is not ``scored``: it is never NaN, and a reader must
    filter on ``status`` before averaging.
    """

    query_id: str
    metric: str
    value: float
    status: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        if self.value != self.value:  # NaN must never reach a table
            raise ValueError(f"{self.metric} of {self.query_id}: NaN value")
