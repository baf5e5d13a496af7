"""The stage list: every stage of the pipeline, in data-flow order, one entry each.

``plan()`` folds these entries' expanders over the plan state in this order; the top-level
config schema takes its stage groups from their ``groups`` (``conf/config.yaml``'s defaults
name one option per group) and release gates their config metrics from ``config_metrics``.
Adding a stage: its package (ops declaring phase, inputs, latency stages and ``run_one``;
an ``expand(state) -> state``), its ``conf/<group>/`` options, a line in conf/config.yaml's
defaults, and one entry here. This module imports nothing heavy: expanders are named, not
imported, so the config schema can read the list before argument parsing.
"""

from __future__ import annotations

from bench.pipeline.lanes import Stage

#: configs.parquet columns every config's chain fills (end-to-end latency along the chain;
#: for a generated config the whole request: retrieval chain, context and generation)
CHAIN_METRICS = ("e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms")
#: configs.parquet columns of every config whatever its stages: the retrieved documents its
#: caller may not see, peak VRAM (a GPU reading), and completion — per config, the largest
#: share of a metric's expected queries that ended failed / timeout / invalid (``incomplete``:
#: any of the three), over the config's metrics (``bench.pipeline.gates``)
EVERY_CONFIG_METRICS = ("unauthorized_hits", "peak_vram_bytes", "failed_share", "timeout_share",
                        "invalid_share", "incomplete_share", "budget_exhausted_share")
#: the cost stage's per-query prices (``bench.cost``): the total's mean / p50 / p99 and each
#: component's mean
COST_METRICS = ("cost_per_query", "cost_p50_per_query", "cost_p99_per_query",
                "cost_embedding", "cost_retrieval", "cost_rerank", "cost_generation",
                "cost_storage")

STAGES: tuple[Stage, ...] = (
    Stage("dataset", ("dataset",), "bench.pipeline.plan:expand_dataset", required=True),
    # raw files -> the corpus: the parse runs in dataset=raw_docs's load (bench.parsing)
    Stage("parsing", ("parser",), builder="bench.parsing.stage:build_parser",
          writer="bench.parsing.report:write"),
    Stage("chunking", ("chunker",), "bench.chunking.stage:expand", required=True),
    Stage("embedding", ("embedder",), "bench.embedding.stage:expand", takes_device=True,
          required=True),
    Stage("index", ("index",), "bench.index.stage:expand", ("index_bytes", "build_s"),
          takes_device=True, required=True, config_kinds=("dense", "reranked")),
    Stage("retrieval", ("retriever",), "bench.retrieval.stage:expand",
          ("p50_ms", "p95_ms", "p99_ms", "qps"), required=True,
          config_kinds=("dense", "lexical")),
    Stage("rewrite", ("rewriter",), "bench.rewrite.stage:expand",
          builder="bench.rewrite.stage:build"),
    Stage("iterative", ("iterative",), "bench.iterative.stage:expand",
          writer="bench.iterative.report:write"),
    Stage("lexical", ("lexical",), "bench.lexical.stage:expand"),
    # the lexical rewrites (RM3) read the BM25 config, so they expand after it
    Stage("rewrite_lexical", (), "bench.rewrite.stage:expand_lexical"),
    Stage("fusion", ("fusion",), "bench.fusion.stage:expand",
          builder="bench.fusion.stage:build"),
    Stage("filters", ("filters",), "bench.filters.stage:expand",
          ("false_exclusion_rate", "doc_false_exclusion_rate", "filter_removed",
           "pool_false_exclusion_rate", "pool_doc_false_exclusion_rate"),
          config_nodes=("filters",)),
    Stage("rerank", ("reranker",), "bench.rerank.stage:expand",
          ("rerank_p50_ms", "rerank_p95_ms", "rerank_p99_ms", "rerank_pairs_per_s"),
          takes_device=True, config_nodes=("rerank",)),
    Stage("route", ("router",), "bench.route.stage:expand", writer="bench.route.report:write",
          builder="bench.route.stage:build"),
    Stage("generation", ("context", "generator", "answers", "judge"),
          "bench.generation.stage:expand",
          ("ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms",
           "tpot_p99_ms", "abstention_precision", "abstention_recall", "abstention_coverage",
           "answered_accuracy", "abstention_hallucination_rate"),
          builder="bench.pipeline.components:build_answers", config_kinds=("generated",)),
    # a black-box RAG service as configs of the run (bench.system): after bench's own
    Stage("system", ("system",), "bench.system.stage:expand",
          builder="bench.system.stage:build"),
    # services: no plan nodes; telemetry is built by the run itself (before the dataset loads)
    Stage("telemetry", ("telemetry",), builder="bench.pipeline.components:build_nothing"),
    Stage("budget", ("budget",)),
    # prices per query component (bench.cost.prices); cost_per_query also from a budget's
    # price_per_hour (bench.budget.chain)
    Stage("cost", ("cost",), config_metrics=COST_METRICS),
    Stage("report", ("report",)),
)


def stage_groups() -> tuple[str, ...]:
    """Every stage's config groups, in data-flow order."""
    return tuple(g for s in STAGES for g in s.groups)


def config_gate_metrics() -> tuple[str, ...]:
    """configs.parquet columns a release gate may bound (one value per config)."""
    return (*CHAIN_METRICS, *EVERY_CONFIG_METRICS, *(m for s in STAGES for m in s.config_metrics))
