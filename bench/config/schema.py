"""Top-level structured-config schema, registered in Hydra's ConfigStore as `base_config`.

The top level is typed here (OmegaConf rejects an unknown top-level key or a wrong type at
compose time). Stage groups are typed ``Any`` because each option's schema is the signature of
its ``_target_`` class: ``bench.config.build`` checks option names and types against that
signature, so a component is declared in exactly one place (its constructor). The stage
groups themselves come from the stage list (``bench.pipeline.stages``): ``BenchConfig`` has
one field per group of every stage entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from bench.pipeline.stages import stage_groups

#: Every stage group, in data-flow order. conf/config.yaml's defaults list names each one.
STAGE_GROUPS = stage_groups()

DEFAULT_METRICS = [
    "ndcg@10",
    "recall@10",
    "recall@100",
    "precision@10",
    "hit_rate@10",
    "mrr",
    "map",
]


@dataclass
class MetricsConfig:
    #: metric names understood by bench.metrics.registry (ndcg@K, recall@K, mrr, map, ...)
    names: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    #: a doc is relevant when its grade >= relevance_level
    relevance_level: int = 1
    bootstrap_resamples: int = 1000
    confidence: float = 0.95
    #: traffic weights per category for the weighted average (empty: category frequency)
    category_weights: dict[str, float] = field(default_factory=dict)


@dataclass
class GateConfig:
    """A release gate: the run exits 3 when `metric` (mean over `scope`) breaks the bound."""

    metric: str = MISSING
    scope: str = "all"
    min: float | None = None
    max: float | None = None
    #: gate on the CI bound (ci_low for min, ci_high for max) rather than the mean
    use_ci_bound: bool = False


@dataclass
class GenerationConfig:
    """How answers are generated (the generator itself is the `generator` group).

    ``max_queries``: answer a seeded subset of the queries (null: all); the subset is drawn
    round-robin over categories so small subsets still hold every category (must-abstain
    queries included). ``kinds``: config kinds that get answers (empty: every config; e.g.
    ``[reranked]`` to answer only from reranked pools). ``max_tokens`` / ``temperature`` /
    ``top_p``: answer sampling; ``seed`` draws the subset and seeds sampling.
    ``answerable_only``: draw the subset from the queries that are not must-abstain.
    ``exact_reference``: when the index is approximate, add the EXACT pool (a flat index
    over the same document embeddings) as the run's first config and answer from it, so every
    ANN setting's answers are paired against exact answers on the same queries.
    ``memo``: answer identical prompts once (generator identity, sampling, seed, messages,
    schema), across the configs of a run and across runs, in the artifact store; greedy
    decoding (temperature 0) only. Judge requests go through the same memo.
    """

    max_queries: int | None = None
    seed: int = 0
    kinds: list[str] = field(default_factory=list)
    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    answerable_only: bool = False
    exact_reference: bool = False
    memo: bool = False


@dataclass
class LoadSettings:
    """The load settings a capacity config (``capacity.*``) shares with the capacity study
    it runs (``bench.capacity.study.StudySettings``), declared once: the config and the
    study's settings are both this class, so a setting has one name, one type and one
    default in both."""

    attainment: float = 0.9
    #: the sizing question: workers for ``target_rps`` queries/s at p95 <= ``p95_budget_ms``
    target_rps: float = 100.0
    #: what one measured replica is ("CPU worker" here; "GPU" on a GPU box)
    worker_kind: str = "CPU worker"
    level_seconds: float = 6.0
    level_min_requests: int = 30
    level_max_requests: int = 400
    #: gamma arrivals' shape (vLLM's --burstiness): 1 = Poisson
    burstiness: float = 1.0
    #: cap on requests in flight (null: none), open loop too
    max_concurrency: int | None = None
    timeout_s: float = 10.0
    retries: int = 6
    knee_start_rps: float = 4.0
    knee_repeats: int = 2
    knee_max_repeats: int = 3
    #: stop the knee search once its CI bracket is narrower than this share of its low end
    knee_ci_width: float = 0.25
    knee_max_levels: int = 12
    knee_max_seconds: float = 180.0
    #: the generator refuses rates where it adds >= this p99 against a null target
    ceiling_limit_ms: float = 1.0
    #: the ceiling search stops here (every rate up to it passed: the ceiling is at least it)
    ceiling_max_rps: float = 20000.0
    #: requests of each ceiling level (its low-rate warm-up and base levels run at 20 req/s,
    #: so 200 of them are 20 s of the study's clock)
    ceiling_min_requests: int = 200
    closed_users: int = 4
    sweep_shares: list[float] = field(default_factory=lambda: [0.5, 1.0, 1.5])
    #: replicas of the scale-out check (<= 1: skip it)
    replicas: int = 2
    scale_knee_max_levels: int = 6
    fault_share: float = 0.5
    #: price of one replica per hour: cost per 1M queries / correct answers (null: none)
    price_per_hour: float | None = None
    quality_threshold: float = 0.5
    component_max_levels: int = 8
    component_max_seconds: float = 90.0
    #: queries of the unloaded pass (the per-query baseline quality under load is paired
    #: against); ``unloaded_last``: run it after the load levels, so that a server cache is
    #: not warmed with every query before the levels are measured (target=http does)
    unloaded_queries: int = 50
    unloaded_last: bool = False


@dataclass
class CapacityConfig(LoadSettings):
    """``+experiment=capacity``: drive one config's whole chain per request at increasing
    closed-loop concurrency (bench.capacity.run). ``config``: a config_id of the run,
    ``best_under_budget`` (the best kept config on the first metric), or null (off)."""

    config: str | None = None
    concurrency: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    #: per level: stop after this many requests or seconds, whichever comes first
    max_requests: int = 200
    max_seconds: float = 10.0
    #: stop once this many levels broke the SLO (0: run every level)
    stop_after_breaking: int = 1
    #: SLO: ``attainment`` of requests with latency (TTFT when the chain streams, else e2e)
    #: <= ``slo_budget_ms``
    slo_budget_ms: float = 100.0
    p95_budget_ms: float = 100.0
    #: ``closed``: the closed-loop concurrency levels above; ``open``: the capacity study
    #: (bench.capacity.study: ceiling, open-loop knee search, sweep, scale-out, faults)
    load: str = "closed"
    #: open load drives ``in_process`` (the chain in a worker pool) or ``serve`` (bench.serve
    #: processes of the config, over HTTP)
    target: str = "in_process"
    #: goodput SLOs in ms (vLLM's --goodput ttft: tpot: e2el:); null: not part of goodput
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_e2el_ms: float | None = 100.0
    #: during a level at ``fault_share`` x the knee: restart, status_429, status_503, slow,
    #: close (target=serve only)
    faults: list[str] = field(default_factory=list)
    #: what makes an answer correct (quality-goodput): hit@<k>, token_f1, exact_match
    quality_metric: str = "hit@10"
    #: worker threads per in-process replica
    workers: int = 1
    #: reuse the levels an earlier run of the same plan measured (cache_dir/capacity-levels)
    resume: bool = True
    #: per-component capacity (open load): embedder, vector_db, reranker, llm — each one the
    #: config has is measured alone at its own SLO and the plan for ``target_rps`` composed
    #: from their knees and the chain's ([]: none, the chain only)
    components: list[str] = field(default_factory=list)
    #: a component's E2EL SLO in ms (by name); a component not named gets the chain's SLOs
    component_slo_ms: dict[str, float] = field(default_factory=dict)
    #: passages a reranker / LLM component request carries (the chain's top ones)
    component_passages: int = 10
    #: ``target: http``: the services to load (docs/experiments/capacity_http.md): each a
    #: mapping with ``name``, ``api`` (rag, chat, completions, embeddings, rerank), ``url``
    #: (or a list: replicas), ``request`` / ``response`` / ``stream`` as system=http, and
    #: optionally ``start`` (the argv that starts it), ``quality_metric``, ``slo_*_ms``
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    #: a service bench does not own is never faulted unless this is true (target=http)
    allow_faults: bool = False
    #: load-generator processes on one schedule (target=http; 1: one event loop): the
    #: ceiling and every open-loop level go out from that many processes
    generator_processes: int = 1
    #: freshness under ingest (bench.capacity.freshness): a ``_target_`` node from
    #: conf/capacity/freshness/<option>.yaml; {} = off. Runs after the capacity study (or
    #: alone), its tables appended to the capacity report and written to <run>/freshness/
    freshness: dict[str, Any] = field(default_factory=dict)


@dataclass
class LatencyConfig:
    """End-to-end latency (bench.pipeline.latency): after the run, every kept config's whole
    query-time chain is re-timed on one seeded sample of ``queries`` queries, the configs
    interleaved (a fresh seeded order per query), the first ``warmup`` requests of each
    excluded and counted; p50/p95/p99 get bootstrap CIs over the requests.
    ``interleave: false`` keeps the per-op samples summed along the chain instead."""

    interleave: bool = True
    queries: int = 50
    warmup: int = 5


@dataclass
class ServeConfig:
    """``python -m bench.serve +experiment=X config=<config_id>`` (bench.serve, docs/serve.md):
    which config's chain to serve (a config id or unique label of the run; null: the run's
    only config), where, and how much work at once: ``max_concurrency`` chains run in
    parallel, ``max_queue`` more requests wait, beyond that a request is answered 503 with
    Retry-After; ``shutdown_timeout_s``: SIGTERM lets requests in flight finish this long."""

    config: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    max_concurrency: int = 1
    max_queue: int = 64
    shutdown_timeout_s: float = 30.0
    #: torch intra-op threads of the served process (null: torch's default, one per core)
    torch_threads: int | None = None
    #: OTLP JSON file the server appends OpenTelemetry GenAI spans of every retrieve / answer
    #: request to (bench.traces.otel; null: no spans); ``traces_content``: put the query,
    #: documents and answer on them (the GenAI conventions' opt-in content attributes)
    traces: str | None = None
    traces_content: bool = True


@dataclass
class DecisionConfig:
    """A pre-registered adopt/reject rule (bench.metrics.decisions), written before results.

    Adopt ``candidate`` over ``baseline`` (config ids or labels) when the paired CI's lower
    bound of the gain on ``metric`` is >= ``min_gain`` at every scope in ``scopes`` and every
    guardrail's gain bound is >= its budget (``{metric: change allowed}``, <= 0); reject when
    an upper bound falls below; otherwise inconclusive, with the n that would tell.
    """

    name: str = MISSING
    baseline: str = MISSING
    candidate: str = MISSING
    metric: str = MISSING
    min_gain: float = 0.0
    scopes: list[str] = field(default_factory=lambda: ["all"])
    guardrails: dict[str, float] = field(default_factory=dict)


@dataclass
class SubsetConfig:
    """Which queries a run evaluates, for any dataset (``bench.data.subset``).

    ``split``: null (the ``release`` split when the queries carry splits, else all), ``all``,
    or a split name; ``splits``: a JSONL ``{query_id, split}`` file giving the splits;
    ``max_queries``: a seeded category-stratified sample (null: every query of the split);
    ``allocation``: ``proportional`` or ``equal`` shares per category."""

    split: str | None = None
    splits: str | None = None
    max_queries: int | None = None
    seed: int = 0
    allocation: str = "proportional"


@dataclass
class RegressionGateConfig:
    """A regression gate against the ``gates_against`` run (``bench.gates.regression``):
    ``metric`` over ``scope`` (``all`` or ``category:<name>``) may get worse by at most
    ``max_drop`` (metric units) or ``max_drop_relative`` (share of the baseline mean), judged
    on the paired per-query delta's CI. Both are >= 0: the allowed worsening."""

    metric: str = MISSING
    scope: str = "all"
    max_drop: float | None = None
    max_drop_relative: float | None = None


@dataclass
class CriticalQueriesConfig:
    """Queries that must not get worse at all, each on its own (no CI: one value each)."""

    query_ids: list[str] = field(default_factory=list)
    #: every query of these categories is critical too
    categories: list[str] = field(default_factory=list)
    #: empty: the regression gates' metrics (or metrics.names[0] without any)
    metrics: list[str] = field(default_factory=list)
    #: a critical query fails when it worsens by more than this (metric units)
    tolerance: float = 0.0


@dataclass
class RegressionConfig:
    """Regression gates, judged when ``gates_against`` names a baseline run."""

    gates: list[RegressionGateConfig] = field(default_factory=list)
    critical: CriticalQueriesConfig = field(default_factory=CriticalQueriesConfig)
    #: the end of the gain's CI that is judged (gain = current - baseline, sign flipped for a
    #: lower-is-better metric): ci_upper fails only an established regression, ci_lower
    #: fails unless no-worse-than-the-budget is shown, mean judges the point estimate
    bound: str = "ci_upper"
    #: null: metrics.confidence
    confidence: float | None = None
    #: configs of the two runs pair by config_id (as bench.compare) or by label
    pair_by: str = "config_id"


@dataclass
class ScalePlanConfig:
    """The scale planner in the plan preview (``plan_only=true``; bench.scaling): the wall
    time, peak memory and disk of the configured corpus, predicted from a profile of sizes
    measured by ``scripts/bench_scale.py``."""

    #: bench_scale.py's --out folder (or its scale.json); null = no scale plan
    profile: str | None = None
    #: YAML of throughputs stated for the target machine (a GPU box); null = this machine's
    stated: str | None = None
    #: work (affine in each stage's work count) | power (a power law in chunks)
    method: str = "work"


@dataclass
class TopLevelConfig:
    """The keys outside the stage groups."""

    experiment_name: str = "default"
    #: auto | cpu | cuda. cuda without a GPU is an error, never a silent fallback.
    device: str = "auto"
    seed: int = 0
    #: content-addressed artifact cache; point several machines at one shared path for sweeps
    cache_dir: str = ".cache/bench"
    #: print the plan (nodes, shared, cached, configs) and exit 0 without running anything
    plan_only: bool = False
    #: with plan_only: the configured corpus' time, memory and disk from a scale profile
    scale_plan: ScalePlanConfig = field(default_factory=ScalePlanConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    gates: list[GateConfig] = field(default_factory=list)
    #: pre-registered decisions, evaluated on the per-query values (bench.metrics.decisions)
    decisions: list[DecisionConfig] = field(default_factory=list)
    capacity: CapacityConfig = field(default_factory=CapacityConfig)
    latency: LatencyConfig = field(default_factory=LatencyConfig)
    #: ``python -m bench.serve``: the served config and the server's limits (bench.serve)
    serve: ServeConfig = field(default_factory=ServeConfig)
    #: which queries are evaluated: a split, a seeded stratified subset (bench.data.subset)
    subset: SubsetConfig = field(default_factory=SubsetConfig)
    #: a baseline run dir (or its per_query.parquet): ``regression`` gates are judged on it
    gates_against: str | None = None
    regression: RegressionConfig = field(default_factory=RegressionConfig)
    #: also write the gates' JUnit XML here (the run dir always gets gates.junit.xml)
    gates_junit: str | None = None
    #: the robustness study after the run (bench.robustness.study, +experiment=robustness):
    #: its options and its own ``generator`` block; {} = off
    robustness: dict[str, Any] = field(default_factory=dict)


#: the top level plus one ``Any`` field per stage group (its option's schema is its class)
BenchConfig = make_dataclass(
    "BenchConfig", [(g, Any, field(default=MISSING)) for g in STAGE_GROUPS],
    bases=(TopLevelConfig,))


def register() -> None:
    ConfigStore.instance().store(name="base_config", node=BenchConfig)
