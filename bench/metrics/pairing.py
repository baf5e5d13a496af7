"""Pair two configs' per-query values on the queries where both carry one.

The same pairing as ``bench.pipeline.scoring.compare`` (query ids matched, a query counted
only where both configs' statuses carry a value for the metric), for the evaluations that run
on finished results (equivalence, pre-registered decisions). ``PerQueryScores`` is the part
of ``bench.pipeline.scoring.ConfigScores`` they read, so this module does not depend on the
pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np


class PerQueryScores(Protocol):
    """One config's per-query values (``ConfigScores`` satisfies it)."""

    @property
    def config_id(self) -> str: ...

    @property
    def query_ids(self) -> tuple[str, ...]: ...

    @property
    def categories(self) -> tuple[str, ...]: ...

    @property
    def values(self) -> Mapping[str, np.ndarray]: ...

    def valued(self, metric: str) -> np.ndarray:
        """bool mask over ``query_ids``: the queries whose value of ``metric`` counts."""
        ...


def paired(a: PerQueryScores, b: PerQueryScores, metric: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values of A, values of B, categories from A) on the queries both scored, in A's order.
    Empty arrays when either config lacks the metric."""
    if metric not in a.values or metric not in b.values:
        empty = np.zeros(0)
        return empty, empty, np.zeros(0, dtype=object)
    ok_a, ok_b = a.valued(metric), b.valued(metric)
    pos_b = {q: j for j, q in enumerate(b.query_ids) if ok_b[j]}
    ia = np.asarray([i for i, q in enumerate(a.query_ids) if ok_a[i] and q in pos_b],
                    dtype=np.int64)
    ib = np.asarray([pos_b[a.query_ids[i]] for i in ia], dtype=np.int64)
    cats = np.asarray(a.categories, dtype=object)[ia]
    return (np.asarray(a.values[metric], np.float64)[ia],
            np.asarray(b.values[metric], np.float64)[ib], cats)


def scope_mask(categories: np.ndarray, scope: str) -> np.ndarray:
    """bool mask of ``scope`` (``all`` or ``category:<name>``) over paired categories."""
    if scope == "all":
        return np.ones(len(categories), dtype=bool)
    if not scope.startswith("category:"):
        raise ValueError(f"scope must be 'all' or 'category:<name>', got {scope!r}")
    return np.asarray(categories == scope.removeprefix("category:"), dtype=bool)
