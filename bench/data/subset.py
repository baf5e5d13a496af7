"""Which queries a run evaluates: one split of the dataset, then a seeded stratified subset.

Applied to every dataset source after it is loaded (top-level ``subset.*``, docs/data.md
"Splits and subsets"), so golden JSONL, BEIR, CSV, FOLDOC and synthetic data all take it:

- ``subset.split``: the split evaluated when the queries carry splits (``bench.data.splits``).
  Left null, a dataset with splits is evaluated on its ``release`` split — the held-out set
  release gates are meant for — and the run says so; ``all`` takes every query; a dataset
  without splits ignores null and refuses any other value.
- ``subset.max_queries``: a seeded sample of that many queries, stratified by category.
  ``allocation=proportional`` (default) gives each category its share of the sample (largest
  remainder, at least one query per category while the sample can hold one of each), so the
  ``all`` mean of a subset estimates the full set's; ``equal`` gives every category the same
  number (round robin, FOLDOC's ``dataset.max_queries``), which suits per-category gates.
  Within a category the queries are taken in the order of a hash of (seed, query id), so the
  choice does not depend on file order, machine or process: a baseline run and a pull
  request's run over the same data and seed evaluate the same queries, and a query added to
  the data enters or leaves the sample by its own hash, moving at most the category's quota.
- ``always``: query ids of the evaluated split kept in any case (the regression gates'
  critical queries), on top of the sample.

The corpus is left whole: a subset changes which questions are asked, not what can be
retrieved.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.data.base import Dataset, Query
from bench.data.foldoc.text import stable_hash
from bench.errors import ConfigError

log = logging.getLogger("bench")

#: the split a dataset with splits is evaluated on unless ``subset.split`` says otherwise
DEFAULT_SPLIT = "release"
ALL_SPLITS = "all"
ALLOCATIONS = ("proportional", "equal")


@dataclass(frozen=True)
class QuerySelection:
    """What ``select_queries`` kept, for run.json (``queries_selected``) and the report."""

    #: the split evaluated; None when the dataset carries no splits or ``split=all``
    split: str | None
    #: why that split: ``subset.split=...``, ``default (the dataset has splits)``, ``no splits``
    split_source: str
    #: queries per split in the loaded dataset ("" = in no split)
    by_split: dict[str, int]
    max_queries: int | None
    seed: int
    allocation: str
    n_loaded: int
    n_selected: int
    #: query ids kept on top of the sample (critical queries)
    n_forced: int = 0

    def line(self) -> str:
        """One sentence for the log and the report header."""
        text = f"{self.n_selected} of {self.n_loaded} queries"
        if self.split is not None:
            text += f" of split {self.split!r} ({self.split_source})"
        if self.max_queries is not None:
            text += (f", a seeded {self.allocation} category-stratified sample of "
                     f"{self.max_queries} (seed {self.seed})")
        if self.n_forced:
            text += f" plus {self.n_forced} critical queries"
        return text

    def to_json(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "summary": self.line()}


def check_subset(sub: Any) -> None:
    """``subset.*`` before any work (the split file itself is read with the dataset)."""
    from bench.data.splits import SPLITS

    if sub.split is not None and sub.split != ALL_SPLITS and sub.split not in SPLITS:
        raise ConfigError("subset.split", f"unknown split {sub.split!r}; use all or one of "
                                          f"{', '.join(SPLITS)}")
    if sub.max_queries is not None and (isinstance(sub.max_queries, bool)
                                        or sub.max_queries < 1):
        raise ConfigError("subset.max_queries", f"must be >= 1 or null, got {sub.max_queries}")
    if sub.allocation not in ALLOCATIONS:
        raise ConfigError("subset.allocation", f"must be one of {', '.join(ALLOCATIONS)}, got "
                                               f"{sub.allocation!r}")
    if sub.seed < 0:
        raise ConfigError("subset.seed", f"must be >= 0, got {sub.seed}")
    if sub.splits is not None and not Path(sub.splits).expanduser().is_file():
        raise ConfigError("subset.splits", f"{sub.splits} is not a file (expected a JSONL "
                                           "split file: {query_id, split} rows)")


def stratified_ids(queries: Sequence[Query], max_queries: int, seed: int, *,
                   allocation: str = "proportional") -> set[str]:
    """``max_queries`` query ids drawn per category (see the module docstring)."""
    if allocation not in ALLOCATIONS:
        raise ValueError(f"allocation must be one of {ALLOCATIONS}, got {allocation!r}")
    by_cat: dict[str, list[Query]] = {}
    for q in sorted(queries, key=lambda q: stable_hash(seed, "q", q.query_id)):
        by_cat.setdefault(q.category, []).append(q)
    sizes = {c: len(v) for c, v in by_cat.items()}
    quota = (_equal(sizes, max_queries) if allocation == "equal"
             else _proportional(sizes, max_queries))
    return {q.query_id for c, qs in by_cat.items() for q in qs[:quota[c]]}


def _equal(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Round robin over categories in name order until ``n`` are taken (FOLDOC's rule)."""
    quota = dict.fromkeys(sizes, 0)
    taken = 0
    while taken < min(n, sum(sizes.values())):
        for c in sorted(sizes):
            if quota[c] < sizes[c] and taken < n:
                quota[c] += 1
                taken += 1
    return quota


def _proportional(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Largest-remainder (Hamilton) shares of ``n``, capped by each category's size, with one
    query per category first while ``n`` allows (a small sample still has every category)."""
    total = sum(sizes.values())
    n = min(n, total)
    cats = sorted(sizes)
    ideal = {c: n * sizes[c] / total for c in cats}
    quota = {c: 1 if n >= len(cats) else 0 for c in cats}
    for c in cats:  # the whole part of each ideal share
        quota[c] = max(quota[c], min(sizes[c], math.floor(ideal[c])))
    while sum(quota.values()) > n:  # the floor of one overshot: the most over-served gives
        c = max((c for c in cats if quota[c] > 1), key=lambda c: (quota[c] - ideal[c], c))
        quota[c] -= 1
    while sum(quota.values()) < n:  # then one each by the largest remainder, ties by name
        c = min((c for c in cats if quota[c] < sizes[c]),
                key=lambda c: (quota[c] - ideal[c], c))
        quota[c] += 1
    return quota


def select_queries(ds: Dataset, *, split: str | None, max_queries: int | None, seed: int = 0,
                   allocation: str = "proportional", always: Collection[str] = ()
                   ) -> tuple[Dataset, QuerySelection]:
    """The queries a run evaluates (module docstring); ``ds`` itself when nothing changes."""
    by_split = dict(sorted(Counter(q.split for q in ds.queries).items()))
    has_splits = any(by_split)
    if split is None:
        chosen, source = (DEFAULT_SPLIT, "default: the dataset has splits") if has_splits \
            else (None, "the dataset has no splits")
    elif split == ALL_SPLITS:
        chosen, source = None, "subset.split=all"
    else:
        if not has_splits:
            raise ConfigError("subset.split", f"the dataset has no splits, so split {split!r} "
                                              "selects nothing (give the queries a split, or "
                                              "subset.splits=FILE)")
        chosen, source = split, f"subset.split={split}"
    queries: Iterable[Query] = ds.queries
    if chosen is not None:
        if not by_split.get(chosen):
            shown = ", ".join(f"{s or '(none)'} {n}" for s, n in by_split.items())
            raise ConfigError("subset.split", f"no query is in split {chosen!r}; the dataset's "
                                              f"splits: {shown}")
        queries = [q for q in queries if q.split == chosen]
    pool = tuple(queries)
    kept, forced = pool, 0
    if max_queries is not None and max_queries < len(pool):
        ids = stratified_ids(pool, max_queries, seed, allocation=allocation)
        # critical queries of the evaluated split stay in, whatever the sample drew
        extra = {q.query_id for q in pool if q.query_id in always} - ids
        forced = len(extra)
        kept = tuple(q for q in pool if q.query_id in ids or q.query_id in extra)
    selection = QuerySelection(chosen, source, by_split, max_queries, seed, allocation,
                               len(ds.queries), len(kept), forced)
    if len(kept) == len(ds.queries):
        return ds, selection
    if not kept:
        raise ConfigError("subset", "no query left to evaluate")
    return dataclasses.replace(ds, queries=kept, fingerprint=""), selection
