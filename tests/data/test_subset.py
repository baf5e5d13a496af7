"""The seeded category-stratified subset and the split selection (bench.data.subset)."""

from __future__ import annotations

import dataclasses

import pytest

from bench.data.base import Dataset, Document, Query
from bench.data.foldoc.source import subsample
from bench.data.foldoc.text import stable_hash
from bench.data.subset import select_queries, stratified_ids
from bench.errors import ConfigError


def dataset(sizes: dict[str, int], split: dict[str, str] | None = None) -> Dataset:
    docs = (Document("d0", "text"),)
    qs = []
    for cat, n in sizes.items():
        for i in range(n):
            qid = f"{cat}-{i:03d}"
            qs.append(Query(qid, f"question {qid}", cat, (("d0", 1),),
                            split=(split or {}).get(qid, "")))
    return Dataset("t", docs, tuple(qs))


def counts(ds: Dataset, ids: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for q in ds.queries:
        if q.query_id in ids:
            out[q.category] = out.get(q.category, 0) + 1
    return out


def test_proportional_shares_follow_the_category_mix() -> None:
    ds = dataset({"a": 50, "b": 30, "c": 20})
    assert counts(ds, stratified_ids(ds.queries, 10, 0)) == {"a": 5, "b": 3, "c": 2}
    # 7 of 100: one each first, then the 4 left by largest share: a 4 * 50/100 = 2, ...
    got = counts(ds, stratified_ids(ds.queries, 7, 0))
    assert sum(got.values()) == 7 and set(got) == {"a", "b", "c"} and got["a"] >= got["b"]


def test_a_sample_smaller_than_the_categories_takes_the_largest() -> None:
    ds = dataset({"a": 50, "b": 30, "c": 20})
    assert counts(ds, stratified_ids(ds.queries, 2, 0)) == {"a": 1, "b": 1}


def test_equal_allocation_is_a_round_robin() -> None:
    ds = dataset({"a": 50, "b": 2, "c": 20})
    assert counts(ds, stratified_ids(ds.queries, 12, 0, allocation="equal")) == {
        "a": 5, "b": 2, "c": 5}


def test_the_draw_is_seeded_and_independent_of_file_order() -> None:
    ds = dataset({"a": 50, "b": 30, "c": 20})
    ids = stratified_ids(ds.queries, 10, 3)
    assert stratified_ids(ds.queries[::-1], 10, 3) == ids
    assert stratified_ids(ds.queries, 10, 4) != ids
    # a query added to the data does not reshuffle the rest: the sample of the bigger set
    # keeps all but at most the one quota step it moved
    more = dataclasses.replace(ds, queries=(*ds.queries, Query("a-new", "x", "a",
                                                               (("d0", 1),))))
    assert len(ids - stratified_ids(more.queries, 10, 3)) <= 1


def _foldoc_round_robin(ds: Dataset, max_queries: int, seed: int) -> set[str]:
    """FOLDOC's subsample before it drew through bench.data.subset (verbatim), the reference
    that keeps FOLDOC slices (dataset.max_queries) the same queries as before."""
    by_cat: dict[str, list[Query]] = {}
    for q in sorted(ds.queries, key=lambda q: stable_hash(seed, "q", q.query_id)):
        by_cat.setdefault(q.category, []).append(q)
    keep: set[str] = set()
    while len(keep) < max_queries:
        for cat in sorted(by_cat):
            if by_cat[cat] and len(keep) < max_queries:
                keep.add(by_cat[cat].pop(0).query_id)
    return keep


@pytest.mark.parametrize("n", [1, 3, 20, 30, 73])
def test_foldocs_subsample_keeps_the_queries_it_drew_before(n: int) -> None:
    ds = dataset({"exact_lookup": 40, "multi_doc": 9, "semantic_lookup": 25})
    kept = subsample(ds, max_docs=None, max_queries=n)
    assert {q.query_id for q in kept.queries} == _foldoc_round_robin(ds, n, 0)
    assert stratified_ids(ds.queries, n, 5, allocation="equal") == _foldoc_round_robin(ds, n, 5)


def test_a_dataset_with_splits_is_evaluated_on_release_by_default() -> None:
    split = {f"a-{i:03d}": ("release" if i < 4 else "development") for i in range(10)}
    ds = dataset({"a": 10}, split)
    got, sel = select_queries(ds, split=None, max_queries=None)
    assert [q.query_id for q in got.queries] == [f"a-{i:03d}" for i in range(4)]
    assert sel.split == "release" and sel.by_split == {"development": 6, "release": 4}
    assert "split 'release' (default: the dataset has splits)" in sel.line()
    dev, sel = select_queries(ds, split="development", max_queries=2)
    assert len(dev.queries) == 2 and all(q.split == "development" for q in dev.queries)
    everything, sel = select_queries(ds, split="all", max_queries=None)
    assert everything is ds and sel.split is None


def test_critical_queries_of_the_split_stay_in_the_sample() -> None:
    ds = dataset({"a": 50, "b": 50})
    ids = stratified_ids(ds.queries, 4, 0)
    outside = sorted({q.query_id for q in ds.queries} - ids)[:2]
    got, sel = select_queries(ds, split=None, max_queries=4, always=set(outside))
    assert {q.query_id for q in got.queries} == ids | set(outside) and sel.n_forced == 2


def test_a_split_that_selects_nothing_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"subset\.split: the dataset has no splits"):
        select_queries(dataset({"a": 3}), split="release", max_queries=None)
    ds = dataset({"a": 3}, {"a-000": "development"})
    with pytest.raises(ConfigError, match=r"subset\.split: no query is in split 'release'"):
        select_queries(ds, split=None, max_queries=None)
