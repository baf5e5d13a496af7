"""The metric registry: parsing, errors, declarations."""

from __future__ import annotations

import pytest

from bench.metrics.registry import (
    MetricSpec,
    UnknownMetricError,
    families,
    find_metric,
    parse_metric,
)
from bench_kernels._core import FAMILY_CODES


def test_parse_metric() -> None:
    spec = parse_metric("ndcg@10")
    assert spec == MetricSpec(name="ndcg@10", family="ndcg", k=10, higher_is_better=True,
                              unit="score", aggregation="mean", kernel_code=FAMILY_CODES["ndcg"])
    assert parse_metric("mrr").k is None and parse_metric("mrr@5").kernel_k == 5
    assert parse_metric("false_exclusion_rate").higher_is_better is False


@pytest.mark.parametrize("name,words", [
    ("bogus", "valid metrics"), ("hit_rate", "needs a cutoff"), ("success", "needs a cutoff"),
    ("Rprec.5", "no cutoff"), ("r_precision@5", "no cutoff"),
    ("recall@0", ">= 1"), ("NDCG@10", "unknown"),
    ("map@2147483648", "<= 2147483647"), ("recall_99999999999999999999", "<= 2147483647"),
    ("ndcg@" + "9" * 5000, "<= 2147483647"), ("map@\u0661", "unknown"),
])
def test_bad_names(name: str, words: str) -> None:
    with pytest.raises(UnknownMetricError, match=words):
        parse_metric(name)
    assert find_metric(name) is None


def test_largest_cutoff_and_leading_zeros() -> None:
    assert parse_metric("map@2147483647").k == 2**31 - 1
    assert parse_metric("map@" + "0" * 30 + "5").name == "map@5"


def test_every_kernel_family_is_registered_once() -> None:
    kernel = {f.family for f in families() if f.kernel_code is not None}
    assert kernel == set(FAMILY_CODES)
    assert len({f.family for f in families()}) == len(families())
