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

import functools

from bench.pipeline.lanes import Stage
from bench.pipeline.outputs import CORE, Column, Outputs, QueryStatus

#: configs.parquet columns every config's chain fills (end-to-end latency along the chain;
#: for a generated config the whole request: retrieval chain, context and generation)
CHAIN_METRICS = ("e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms")
#: configs.parquet columns of every config whatever its stages that gates may bound: the
#: retrieved documents its caller may not see and peak VRAM (a GPU reading); completion
#: figures come from the declared statuses (``completion_figures``)
EVERY_CONFIG_COLUMNS = ("unauthorized_hits", "peak_vram_bytes")
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
    # embedding: where the corpus pass runs (local | ray), bench.embedding.engine
    Stage("embedding", ("embedder", "embedding"), "bench.embedding.stage:expand",
          takes_device=True, required=True, outputs="bench.embedding.outputs:OUTPUTS",
          builder="bench.embedding.stage:build"),
    Stage("index", ("index",), "bench.index.stage:expand", ("index_bytes", "build_s"),
          takes_device=True, required=True, config_kinds=("dense", "reranked"),
          outputs="bench.index.outputs:OUTPUTS"),
    Stage("retrieval", ("retriever",), "bench.retrieval.stage:expand",
          ("p50_ms", "p95_ms", "p99_ms", "qps"), required=True,
          config_kinds=("dense", "lexical"), outputs="bench.retrieval.outputs:OUTPUTS"),
    Stage("rewrite", ("rewriter",), "bench.rewrite.stage:expand",
          builder="bench.rewrite.stage:build", outputs="bench.rewrite.outputs:OUTPUTS"),
    Stage("iterative", ("iterative",), "bench.iterative.stage:expand",
          writer="bench.iterative.report:write", outputs="bench.iterative.outputs:OUTPUTS"),
    Stage("lexical", ("lexical",), "bench.lexical.stage:expand"),
    # the lexical rewrites (RM3) read the BM25 config, so they expand after it
    Stage("rewrite_lexical", (), "bench.rewrite.stage:expand_lexical"),
    Stage("fusion", ("fusion",), "bench.fusion.stage:expand",
          builder="bench.fusion.stage:build"),
    Stage("filters", ("filters",), "bench.filters.stage:expand",
          ("false_exclusion_rate", "doc_false_exclusion_rate", "filter_removed",
           "pool_false_exclusion_rate", "pool_doc_false_exclusion_rate"),
          config_nodes=("filters",), outputs="bench.filters.outputs:OUTPUTS"),
    Stage("rerank", ("reranker",), "bench.rerank.stage:expand",
          ("rerank_p50_ms", "rerank_p95_ms", "rerank_p99_ms", "rerank_pairs_per_s"),
          takes_device=True, config_nodes=("rerank",), outputs="bench.rerank.outputs:OUTPUTS"),
    Stage("route", ("router",), "bench.route.stage:expand", writer="bench.route.report:write",
          builder="bench.route.stage:build", outputs=Outputs(kinds=("routed",))),
    Stage("generation", ("context", "generator", "answers", "judge"),
          "bench.generation.stage:expand",
          ("ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms",
           "tpot_p99_ms", "abstention_precision", "abstention_recall", "abstention_coverage",
           "answered_accuracy", "abstention_hallucination_rate"),
          builder="bench.pipeline.components:build_answers", config_kinds=("generated",),
          outputs="bench.generation.outputs:OUTPUTS"),
    # the judge's own results: the labelling file of the calibration loop, the verifiers'
    # rates, gates let through on uncalibrated judges (bench.judge.report)
    Stage("judge_files", (), writer="bench.judge.report:write"),
    # generator=sweep: generators compared on the same contexts (bench.generation.compare)
    Stage("generator_compare", (), writer="bench.generation.compare:write"),
    # a black-box RAG service as configs of the run (bench.system): after bench's own
    Stage("system", ("system",), "bench.system.stage:expand",
          builder="bench.system.stage:build", outputs=Outputs(kinds=("system",)),
          writer="bench.system.report:write"),
    # services: no plan nodes; telemetry is built by the run itself (before the dataset loads)
    Stage("telemetry", ("telemetry",), builder="bench.pipeline.components:build_nothing"),
    Stage("budget", ("budget",), outputs="bench.budget.outputs:OUTPUTS"),
    # prices per query component (bench.cost.prices); cost_per_query also from a budget's
    # price_per_hour (bench.budget.chain)
    Stage("cost", ("cost",), config_metrics=COST_METRICS, outputs="bench.cost.outputs:OUTPUTS"),
    Stage("report", ("report",)),
)


def stage_groups() -> tuple[str, ...]:
    """Every stage's config groups, in data-flow order."""
    return tuple(g for s in STAGES for g in s.groups)


def declared() -> tuple[tuple[str, Outputs], ...]:
    """(owner, outputs) of the core and of every stage entry, in stage-list order."""
    return _declared(STAGES)


@functools.cache
def _declared(stages: tuple[Stage, ...]) -> tuple[tuple[str, Outputs], ...]:
    return (("core", CORE), *((s.name, s.declared()) for s in stages))


def query_statuses() -> tuple[QueryStatus, ...]:
    """Every per-(query, metric) status a run can write: the core's, then the stages'."""
    out: dict[str, QueryStatus] = {}
    for owner, o in declared():
        for st in o.statuses:
            if st.name in out:
                raise ValueError(f"status {st.name!r} of {owner} is declared twice")
            out[st.name] = st
    return tuple(out.values())


def valued_statuses() -> tuple[str, ...]:
    """Statuses whose query keeps its value (scored, missing_run, budget_exhausted, ...)."""
    return tuple(s.name for s in query_statuses() if s.valued)


def incomplete_statuses() -> tuple[str, ...]:
    """Statuses counted into ``incomplete_share`` (the work did not complete)."""
    return tuple(s.name for s in query_statuses() if s.incomplete)


def completion_figures() -> dict[str, tuple[str, ...]]:
    """configs.parquet completion columns and the statuses each counts: one per status that
    names a share column, and ``incomplete_share`` (every incomplete status)."""
    out: dict[str, tuple[str, ...]] = {
        s.share_column: (s.name,) for s in query_statuses() if s.incomplete and s.share_column}
    out["incomplete_share"] = incomplete_statuses()
    out |= {s.share_column: (s.name,) for s in query_statuses()
            if not s.incomplete and s.share_column}
    return out


def config_columns() -> tuple[tuple[str, Column], ...]:
    """(owner, column) of every configs.parquet column: the core's, the completion shares of
    the declared statuses, then each stage's, in stage-list order."""
    out: dict[str, tuple[str, Column]] = {}

    def add(owner: str, c: Column) -> None:
        if c.name in out:
            raise ValueError(f"configs.parquet column {c.name!r} of {owner} is already "
                             f"declared by {out[c.name][0]}")
        out[c.name] = (owner, c)

    for owner, o in declared():
        for c in o.columns:
            add(owner, c)
        for st in o.statuses:
            if st.share_column is not None:
                add(owner, Column(st.share_column, "float64",
                                  doc=f"largest share over the config's metrics of expected "
                                      f"queries ending {st.name}"))
    return tuple(out.values())


def config_kinds() -> tuple[str, ...]:
    """Every config kind a plan may hold (configs.parquet ``kind``)."""
    return tuple(dict.fromkeys(k for _, o in declared() for k in o.kinds))


def cost_components() -> dict[str, str]:
    """Latency stage -> cost component, for the stages whose time is not retrieval work."""
    return {stage: comp for _, o in declared() for stage, comp in o.cost}


def every_config_metrics() -> tuple[str, ...]:
    """Gateable columns every config's row holds whatever its stages: entitlement, VRAM and
    the completion shares."""
    return (*EVERY_CONFIG_COLUMNS, *completion_figures())


def config_gate_metrics() -> tuple[str, ...]:
    """configs.parquet columns a release gate may bound (one value per config)."""
    return (*CHAIN_METRICS, *every_config_metrics(),
            *(m for s in STAGES for m in s.config_metrics))
