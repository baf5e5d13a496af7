"""Explicit pyarrow schemas of every result table.

Bump ``SCHEMA_VERSION`` on any change to a column's name, type or meaning; readers check it.
All tables are long format: one row per (config, query, metric) or per timing sample, so new
metrics and stages add rows, not columns.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

#: 5: summary ``n_budget_exhausted``, configs ``budget_exhausted_share``, config kinds
#: ``routed`` and ``system``, iterations.parquet, routes.parquet, system.parquet (a black-box
#: system's requests, bench.system.report) and run.json ``stages`` / ``rewrite``; nothing
#: renamed, files of version 4 read the new columns as None.
#: 4: configs.parquet gained the bootstrap CIs of ``e2e_p50/p95/p99_ms`` over requests,
#: ``n_latency_warmup`` and ``latency_source`` (interleaved | sum of stage samples);
#: latency.parquet holds every request of the interleaved latency pass and judgements.parquet
#: one row per judge verdict (status, failure mode, rationale); configs.parquet
#: ``false_exclusion_rate`` / ``doc_false_exclusion_rate`` are the seed's (over the eligible
#: corpus, before retrieval; version 3 counted gold removed from the pool), the pool figures
#: moved to ``pool_false_exclusion_rate`` / ``pool_doc_false_exclusion_rate``, and
#: filters.parquet is new; a generated config's ``e2e_*`` include context assembly and
#: generation, ``cost_per_query`` is the sum of priced components (bench.cost.prices), and
#: configs.parquet gained p99 TTFT / TPOT, abstention, completion and cost-component
#: columns; files of version 3 lack the new columns and read as None.
#: 3: comparisons.parquet gained ``mde`` (nullable; files of version 2 lack it and read as
#: None). 2: per_query.parquet gained ``status``.
SCHEMA_VERSION = 5

#: per_query.parquet: one row per (config_id, query_id, metric).
PER_QUERY = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        # null where the status carries no value (pruned, failed, timeout, invalid, no_claims)
        pa.field("value", pa.float64(), nullable=True),
        # scored | missing_run (scored as an empty ranking, trec_eval -c) | timeout | invalid |
        # no_claims | pruned | failed — per (query, metric): one metric can be absent for a
        # query without dropping the query from the others
        pa.field("status", pa.string(), nullable=False),
    ]
)

#: timings.parquet: one row per timing sample of a stage.
TIMINGS = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        # batch: one sample per batch of n_items; query: one per single query; total: whole stage
        pa.field("sample_kind", pa.string(), nullable=False),
        pa.field("n_items", pa.int64(), nullable=False),
        pa.field("wall_ms", pa.float64(), nullable=False),
        pa.field("device", pa.string(), nullable=False),
        # true when the sample was measured by the run that filled the cache, not this one
        pa.field("from_cache", pa.bool_(), nullable=False),
        # the query of a single-query sample (sample_kind "query"); null otherwise
        pa.field("query_id", pa.string(), nullable=True),
    ]
)

#: summary.parquet: one row per (config_id, scope, metric); then the completion accounting
#: of the config (repeated on each of its rows): ``n_expected``, ``n_scored`` and one count per
#: declared status (``summary_schema``: missing, timeout, invalid, no_claims, pruned, failed,
#: and the stages' own, e.g. an iterative loop's ``n_budget_exhausted``)
_SUMMARY_HEAD = [
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("config_id", pa.string(), nullable=False),
    # "all" | "category:<name>" | "macro" (categories equal) | "weighted" (traffic weights)
    pa.field("scope", pa.string(), nullable=False),
    pa.field("metric", pa.string(), nullable=False),
    pa.field("higher_is_better", pa.bool_(), nullable=False),
    pa.field("n", pa.int64(), nullable=False),
    pa.field("mean", pa.float64(), nullable=True),
    pa.field("ci_low", pa.float64(), nullable=True),
    pa.field("ci_high", pa.float64(), nullable=True),
    pa.field("n_expected", pa.int64(), nullable=False),
]


def summary_schema() -> pa.Schema:
    """summary.parquet's schema: the head, then each declared status's count (``n_scored``
    counts every valued status)."""
    from bench.pipeline.stages import query_statuses

    return pa.schema([*_SUMMARY_HEAD,
                      *(pa.field(s.count, pa.int64(), nullable=False)
                        for s in query_statuses())])


#: configs.parquet as published in schema 5: one row per config (lane) of the run, what it
#: is and what it costs. The written schema is assembled from the stages' declarations
#: (``configs_schema``); this layout fixes the ORDER of the columns it names (a file of
#: schema 5 is byte-identical), and tests/results/test_declared_schema.py checks that the
#: assembled schema reproduces it. A stage's new columns come after these, in stage order.
_CONFIGS_V5 = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("label", pa.string(), nullable=False),
        # dense | lexical | fused | reranked | generated
        pa.field("kind", pa.string(), nullable=False),
        # JSON of the config's own parameters (query knobs, fusion variant, rerank depth)
        pa.field("params_json", pa.string(), nullable=False),
        # the config this one extends (a reranked config's candidate pool); null otherwise
        pa.field("parent_config_id", pa.string(), nullable=True),
        # ok | pruned
        pa.field("status", pa.string(), nullable=False),
        pa.field("pruned_reason", pa.string(), nullable=True),
        # first-stage search: QPS in batch mode, p50/p95/p99 in single-query mode
        pa.field("qps", pa.float64(), nullable=True),
        pa.field("p50_ms", pa.float64(), nullable=True),
        pa.field("p95_ms", pa.float64(), nullable=True),
        pa.field("p99_ms", pa.float64(), nullable=True),
        pa.field("n_latency_samples", pa.int64(), nullable=False),
        # end to end per query: the sum of the query-time stages along the config's chain
        pa.field("e2e_p50_ms", pa.float64(), nullable=True),
        pa.field("e2e_p95_ms", pa.float64(), nullable=True),
        pa.field("e2e_p99_ms", pa.float64(), nullable=True),
        pa.field("n_e2e_samples", pa.int64(), nullable=False),
        # the reranker's own per-query latency at this depth, and its throughput in pairs/s
        pa.field("rerank_p50_ms", pa.float64(), nullable=True),
        pa.field("rerank_p95_ms", pa.float64(), nullable=True),
        pa.field("rerank_p99_ms", pa.float64(), nullable=True),
        pa.field("rerank_pairs_per_s", pa.float64(), nullable=True),
        pa.field("build_s", pa.float64(), nullable=True),
        pa.field("index_bytes", pa.int64(), nullable=True),
        # retrieved documents the caller may not see (must be 0 when entitlement is enforced)
        pa.field("unauthorized_hits", pa.int64(), nullable=False),
        pa.field("filter_removed", pa.int64(), nullable=True),
        pa.field("false_exclusion_rate", pa.float64(), nullable=True),
        pa.field("doc_false_exclusion_rate", pa.float64(), nullable=True),
        # generated configs (null otherwise): time to first token and time per output token
        # after the first, p50/p95 over the config's answers
        pa.field("ttft_p50_ms", pa.float64(), nullable=True),
        pa.field("ttft_p95_ms", pa.float64(), nullable=True),
        pa.field("tpot_p50_ms", pa.float64(), nullable=True),
        pa.field("tpot_p95_ms", pa.float64(), nullable=True),
        # the budget ceiling that pruned the config (kept: the check closest to binding), its
        # limit, the probe's point estimate and the bootstrap lower bound compared with it
        pa.field("budget_name", pa.string(), nullable=True),
        pa.field("budget_limit", pa.float64(), nullable=True),
        pa.field("budget_measured", pa.float64(), nullable=True),
        pa.field("budget_bound", pa.float64(), nullable=True),
        # mean over the config's queries of the priced components' sum (bench.cost.prices);
        # what it rests on: the prices and what was not priced
        pa.field("cost_per_query", pa.float64(), nullable=True),
        pa.field("cost_basis", pa.string(), nullable=True),
        # peak VRAM of the chain: torch_peak_allocated (needed) or nvml_used (card-wide)
        pa.field("peak_vram_bytes", pa.int64(), nullable=True),
        pa.field("peak_vram_measure", pa.string(), nullable=True),
        # schema >= 4: bootstrap CIs of the e2e percentiles over the requests they rest on
        # (n_e2e_samples), the warm-up requests excluded, and where the e2e figures come from:
        # "interleaved" (bench.pipeline.latency) or "sum of stage samples"
        pa.field("e2e_p50_ci_low", pa.float64(), nullable=True),
        pa.field("e2e_p50_ci_high", pa.float64(), nullable=True),
        pa.field("e2e_p95_ci_low", pa.float64(), nullable=True),
        pa.field("e2e_p95_ci_high", pa.float64(), nullable=True),
        pa.field("e2e_p99_ci_low", pa.float64(), nullable=True),
        pa.field("e2e_p99_ci_high", pa.float64(), nullable=True),
        pa.field("n_latency_warmup", pa.int64(), nullable=True),
        pa.field("latency_source", pa.string(), nullable=True),
        # pool-relative false exclusions (schema >= 4): eligible gold that reached the pool
        # and was removed, over the same denominators (the doc rate is at most the corpus one)
        pa.field("pool_false_exclusion_rate", pa.float64(), nullable=True),
        pa.field("pool_doc_false_exclusion_rate", pa.float64(), nullable=True),
        # schema >= 4. generated configs: p99 TTFT / TPOT; abstention precision, recall,
        # coverage, answered accuracy, hallucination rate (must-abstain answered / must-abstain)
        pa.field("ttft_p99_ms", pa.float64(), nullable=True),
        pa.field("tpot_p99_ms", pa.float64(), nullable=True),
        pa.field("abstention_precision", pa.float64(), nullable=True),
        pa.field("abstention_recall", pa.float64(), nullable=True),
        pa.field("abstention_coverage", pa.float64(), nullable=True),
        pa.field("answered_accuracy", pa.float64(), nullable=True),
        pa.field("abstention_hallucination_rate", pa.float64(), nullable=True),
        # completion: per status the largest share, over the config's metrics, of expected
        # queries ending in it (incomplete: failed | timeout | invalid) and that metric
        pa.field("failed_share", pa.float64(), nullable=True),
        pa.field("timeout_share", pa.float64(), nullable=True),
        pa.field("invalid_share", pa.float64(), nullable=True),
        pa.field("incomplete_share", pa.float64(), nullable=True),
        pa.field("incomplete_metric", pa.string(), nullable=True),
        # expected queries an iterative loop's budget stopped (scored, so not incomplete)
        pa.field("budget_exhausted_share", pa.float64(), nullable=True),
        # cost per query: the total's p50 / p99, each priced component's mean, what is unpriced
        pa.field("cost_p50_per_query", pa.float64(), nullable=True),
        pa.field("cost_p99_per_query", pa.float64(), nullable=True),
        pa.field("cost_embedding", pa.float64(), nullable=True),
        pa.field("cost_retrieval", pa.float64(), nullable=True),
        pa.field("cost_rerank", pa.float64(), nullable=True),
        pa.field("cost_generation", pa.float64(), nullable=True),
        pa.field("cost_storage", pa.float64(), nullable=True),
        pa.field("cost_unpriced", pa.string(), nullable=True),
    ]
)

_ARROW = {"float64": pa.float64(), "int64": pa.int64(), "int32": pa.int32(),
          "string": pa.string(), "bool": pa.bool_()}


def configs_schema() -> pa.Schema:
    """configs.parquet's schema from the core's and every stage's declared columns
    (``bench.pipeline.stages.config_columns``), in schema 5's order, new columns after."""
    from bench.pipeline.stages import config_columns

    declared = {c.name: c for _, c in config_columns()}
    missing = [n for n in _CONFIGS_V5.names if n not in declared]
    if missing:
        raise ValueError(f"configs.parquet columns of schema {SCHEMA_VERSION} no stage "
                         f"declares: {', '.join(missing)}")
    order = [*_CONFIGS_V5.names, *(n for n in declared if n not in _CONFIGS_V5.names)]
    return pa.schema([pa.field(n, _ARROW[declared[n].type], nullable=declared[n].nullable)
                      for n in order])


def __getattr__(name: str) -> Any:
    """``CONFIGS`` and ``SUMMARY``: assembled from the stage list when first read."""
    if name == "CONFIGS":
        return configs_schema()
    if name == "SUMMARY":
        return summary_schema()
    if name == "TABLES":
        return tables()
    raise AttributeError(name)


#: filters.parquet (schema >= 4): one row per (config_id, query_id) of a config with a filter.
FILTER_QUERIES = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("query_id", pa.string(), nullable=False),
        # the tags the relevance filter applied, sorted; empty: the query passed unfiltered
        pa.field("predicate", pa.list_(pa.string()), nullable=False),
        # eligible gold docs in the corpus (tenant and roles applied), of those the ones the
        # predicate rules out (before retrieval), and the ones removed from the pool
        pa.field("n_eligible_gold", pa.int64(), nullable=False),
        pa.field("n_excluded", pa.int64(), nullable=False),
        pa.field("n_pool_excluded", pa.int64(), nullable=False),
        # every eligible gold doc ruled out (a false-exclusion query); null: no eligible gold
        pa.field("excluded", pa.bool_(), nullable=True),
        # docs in the filter's output this query's caller may not see (another tenant's,
        # outside its roles)
        pa.field("n_unauthorized", pa.int64(), nullable=False),
    ]
)

#: latency.parquet (schema >= 4): every request of the interleaved latency pass
#: (bench.pipeline.latency), warm-up requests included and flagged.
LATENCY = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("query_id", pa.string(), nullable=False),
        # the request's round (warm-up rounds first) and its position within the round
        pa.field("round", pa.int64(), nullable=False),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("warmup", pa.bool_(), nullable=False),
        pa.field("e2e_ms", pa.float64(), nullable=False),
        # the chain's latency stages as the ops timed them, as JSON {stage: ms}
        pa.field("stage_ms_json", pa.string(), nullable=False),
    ]
)

#: comparisons.parquet: paired per-query comparison of each config against the baseline.
COMPARISONS = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("baseline_config_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),
        pa.field("mean_baseline", pa.float64(), nullable=False),
        pa.field("mean_config", pa.float64(), nullable=False),
        # config minus baseline, with its bootstrap CI
        pa.field("delta", pa.float64(), nullable=False),
        pa.field("ci_low", pa.float64(), nullable=False),
        pa.field("ci_high", pa.float64(), nullable=False),
        pa.field("p_value", pa.float64(), nullable=False),
        # Holm-adjusted over all configs compared with the baseline, per metric and scope
        pa.field("p_holm", pa.float64(), nullable=False),
        # minimum detectable effect at 80 % power, Bonferroni level over the Holm family
        # (schema >= 3; null when the deltas have no spread)
        pa.field("mde", pa.float64(), nullable=True),
    ]
)

#: judgements.parquet: one row per (config_id, query_id, judge) verdict of a generated config.
JUDGEMENTS = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("query_id", pa.string(), nullable=False),
        # the judge (faithfulness, refusal, pairwise, pairwise:cross, ...)
        pa.field("judge", pa.string(), nullable=False),
        # ok | invalid | no_claims | error | not_applicable (bench.judge.base statuses)
        pa.field("status", pa.string(), nullable=False),
        # "" | unsupported_claims | abstained | no_claims | schema | invalid_partition |
        # backend | no_answer | not_applicable | position_flip (bench.judge.base.failure_mode)
        pa.field("failure_mode", pa.string(), nullable=False),
        # why: the unsupported claims, the judge's own reason, or the last rejection
        pa.field("rationale", pa.string(), nullable=False),
        # judge model calls made, retries included
        pa.field("attempts", pa.int64(), nullable=False),
    ]
)


def tables() -> dict[str, pa.Schema]:
    """The run's tables by name (``TABLES``)."""
    return {"per_query": PER_QUERY, "timings": TIMINGS, "summary": summary_schema(),
            "configs": configs_schema(), "comparisons": COMPARISONS, "latency": LATENCY,
            "filters": FILTER_QUERIES, "judgements": JUDGEMENTS}

#: iterations.parquet: one row per (iterative config, query, turn) of an iterative loop
#: (bench.iterative); the per-query columns repeat on each of the query's turns.
ITERATIONS = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        # the one-shot config it extends (its first search is turn 1)
        pa.field("parent_config_id", pa.string(), nullable=False),
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("turn", pa.int32(), nullable=False),
        pa.field("query_text", pa.string(), nullable=False),
        pa.field("turn_tokens", pa.int64(), nullable=False),
        pa.field("top_score", pa.float64(), nullable=True),
        pa.field("new_docs", pa.int64(), nullable=False),
        # per query: searches, query tokens, loop ms after turn 1, why it stopped, its status
        pa.field("calls", pa.int64(), nullable=False),
        pa.field("tokens", pa.int64(), nullable=False),
        pa.field("loop_ms", pa.float64(), nullable=False),
        pa.field("stop", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        # documents seen over every turn, and the share of the query's eligible gold among
        # them (null: no relevant document)
        pa.field("evidence_docs", pa.int64(), nullable=False),
        pa.field("gold_coverage", pa.float64(), nullable=True),
    ]
)

#: routes.parquet: one row per (routed config, query): the route chosen, the label derived
#: from the data (bench.route.labels) and the config that served the query.
ROUTES = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_id", pa.string(), nullable=False),
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("label", pa.string(), nullable=False),
        pa.field("route", pa.string(), nullable=False),
        # the route's config id ("" for the none route: no retrieval)
        pa.field("target_config_id", pa.string(), nullable=False),
        pa.field("correct", pa.bool_(), nullable=False),
    ]
)
