"""The results side assembled from the stages' declarations reproduces what schema 5
published, and per-query statuses join by one rule (issue 30, parts 1 and 2)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from bench.pipeline.stages import (
    completion_figures,
    config_columns,
    cost_components,
    query_statuses,
    valued_statuses,
)
from bench.pipeline.statuses import merge_statuses, unvalued
from bench.results import schema
from bench.results.records import Accounting, ConfigRow
from bench.retrieval.base import Hits, Pool

#: summary.parquet of schema 5, as published
SUMMARY_V5 = ["schema_version", "run_id", "config_id", "scope", "metric", "higher_is_better",
              "n", "mean", "ci_low", "ci_high", "n_expected", "n_scored", "n_missing",
              "n_timeout", "n_invalid", "n_no_claims", "n_pruned", "n_failed",
              "n_budget_exhausted"]


def test_configs_schema_is_schema_5_byte_for_byte() -> None:
    assembled = schema.configs_schema()
    assert assembled.equals(schema._CONFIGS_V5, check_metadata=True)
    assert assembled.serialize().to_pybytes() == schema._CONFIGS_V5.serialize().to_pybytes()


def test_summary_schema_is_schema_5() -> None:
    s = schema.summary_schema()
    assert s.names == SUMMARY_V5
    assert all(f.type == pa.int64() and not f.nullable for f in s if f.name.startswith("n_"))


def test_every_column_is_declared_once_and_every_row_field_is_a_column() -> None:
    names = [c.name for _, c in config_columns()]
    assert len(names) == len(set(names))
    fields = set(ConfigRow.__dataclass_fields__) - {"extra"}
    assert fields == set(names) - {"schema_version", "run_id"}


def test_statuses_and_their_kinds() -> None:
    assert [s.name for s in query_statuses()] == [
        "scored", "missing_run", "timeout", "invalid", "no_claims", "pruned", "failed",
        "budget_exhausted"]
    assert valued_statuses() == ("scored", "missing_run", "budget_exhausted")
    assert completion_figures()["incomplete_share"] == ("timeout", "invalid", "failed")
    assert completion_figures()["budget_exhausted_share"] == ("budget_exhausted",)


def test_accounting_counts_every_declared_status() -> None:
    a = Accounting.of(["scored", "missing_run", "budget_exhausted", "failed", "timeout",
                       "invalid", "no_claims", "pruned", "scored"])
    # valued: scored x2 + missing_run + budget_exhausted
    assert (a.n_expected, a.n_scored) == (9, 2 + 1 + 1)
    assert (a.n_missing, a.n_timeout, a.n_invalid, a.n_no_claims, a.n_pruned, a.n_failed) \
        == (1, 1, 1, 1, 1, 1)
    assert a.count("budget_exhausted") == 1
    assert list(a.columns()) == SUMMARY_V5[10:]


def test_cost_components_are_the_stages_latency_stages() -> None:
    from bench.cost.prices import GENERATE_STAGE, component_of
    from bench.embedding.stage import EMBED_QUERY_STAGE
    from bench.rerank.stage import RERANK_CUT_STAGE, RERANK_STAGE
    from bench.rewrite.stage import GENERATE_STAGE as REWRITE_GENERATE

    assert cost_components() == {EMBED_QUERY_STAGE: "embedding", REWRITE_GENERATE: "generation",
                                 RERANK_STAGE: "rerank", RERANK_CUT_STAGE: "rerank",
                                 GENERATE_STAGE: "generation"}
    assert component_of("retrieve") == component_of("fusion") == "retrieval"


def test_one_merge_rule_for_per_query_statuses() -> None:
    # a status without a value beats a valued one, whichever comes first; else the first wins
    assert merge_statuses({"q1": "budget_exhausted", "q2": "failed"},
                          {"q1": "timeout", "q2": "invalid", "q3": "budget_exhausted"}) \
        == {"q1": "timeout", "q2": "failed", "q3": "budget_exhausted"}
    assert merge_statuses(None, {}, None) == {}
    assert unvalued({"q1": "budget_exhausted", "q2": "failed"}) == {"q2": "failed"}


def test_a_pool_carries_one_map_through_every_join() -> None:
    hits = Hits(np.asarray([0, 1, 2]), np.asarray([0, 1], np.int32),
                np.asarray([1.0, 1.0], np.float32))
    dense = Pool(hits, status={"a": "budget_exhausted"})
    sparse = Pool(hits, status={"b": "failed"})
    joined = Pool(hits, **dense.statuses(sparse, lost={"a": "timeout"}))
    assert joined.status == {"a": "timeout", "b": "failed"}
    assert joined.incomplete == {"a": "timeout", "b": "failed"}
    assert Pool(hits, **dense.statuses()).incomplete is None
    assert Pool(hits, **Pool(hits).statuses()).status is None
