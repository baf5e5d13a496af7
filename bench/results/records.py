"""Typed rows of the result tables and of the report's inputs.

Every table row crosses from the pipeline to the writers and reporters as one of these frozen
records (never a dict), and ``bench.results.schema`` gives each table's Parquet schema; the
writer fills a table from the records' fields by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a record type of the context stage, only named here
    from bench.context.metrics import ContextDiagnosis
    from bench.judge.pairing import PairwiseSummary

#: per-(query, metric) statuses (docs/metrics.md completion accounting) are declared by the
#: core and the stages that give them (``bench.pipeline.outputs.QueryStatus``): the list and
#: which of them carry a value come from ``bench.pipeline.stages.query_statuses`` /
#: ``valued_statuses``.


@dataclass(frozen=True)
class SummaryRow:
    config_id: str
    scope: str
    metric: str
    higher_is_better: bool
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Accounting:
    """Where every expected query went, for one (config, metric). The core statuses by field;
    a stage's own (an iterative loop's ``budget_exhausted``) in ``others``, by status name."""

    n_expected: int
    n_scored: int
    n_missing: int
    n_timeout: int
    n_invalid: int
    n_no_claims: int
    n_pruned: int
    n_failed: int
    #: (status, count) of each status a stage declares, in declaration order
    others: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, statuses: list[str] | tuple[str, ...]) -> Accounting:
        from bench.pipeline.stages import query_statuses

        def count(s: str) -> int:
            return sum(1 for x in statuses if x == s)

        declared = query_statuses()
        # a missing run is scored (as an empty ranking) AND counted as missing; so is every
        # valued status
        return cls(len(statuses), sum(count(s.name) for s in declared if s.valued),
                   count("missing_run"), count("timeout"), count("invalid"), count("no_claims"),
                   count("pruned"), count("failed"),
                   tuple((s.name, count(s.name)) for s in declared
                         if s.name not in _CORE and s.name != "scored"))

    def count(self, status: str) -> int:
        """Expected queries that ended in ``status``."""
        if status in _CORE:
            return int(getattr(self, _CORE[status]))
        return dict(self.others).get(status, 0)

    def columns(self) -> dict[str, int]:
        """summary.parquet's accounting columns (``n_expected``, ``n_scored``, one per
        declared status)."""
        from bench.pipeline.stages import query_statuses

        return {"n_expected": self.n_expected, "n_scored": self.n_scored,
                **{s.count: self.count(s.name) for s in query_statuses() if s.name != "scored"}}


#: the core statuses' Accounting fields
_CORE = {"missing_run": "n_missing", "timeout": "n_timeout", "invalid": "n_invalid",
         "no_claims": "n_no_claims", "pruned": "n_pruned", "failed": "n_failed"}


@dataclass(frozen=True)
class PerQueryRow:
    config_id: str
    query_id: str
    category: str
    metric: str
    value: float | None
    status: str


@dataclass(frozen=True)
class Comparison:
    """A config paired per query against the baseline on one metric and scope."""

    baseline_config_id: str
    config_id: str
    scope: str
    metric: str
    n: int
    mean_baseline: float
    mean_config: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    #: minimum detectable effect: the true |delta| this comparison sees with 80 % power at
    #: the Bonferroni level over its Holm family (bench.metrics.power); None when the deltas
    #: have no spread (or n < 2), and in rows written before schema 3
    mde: float | None = None


@dataclass(frozen=True)
class ConfigRow:
    """What a config is and what it costs (one row of configs.parquet).

    The typed fields are the columns of schema 5, for readers; the row is FILLED from the
    declarations (``bench.pipeline.outputs``): :meth:`of` takes every declared column by
    name, and a column a stage added after schema 5 lands in ``extra`` (read it with
    :meth:`value`; :meth:`columns` gives the whole row)."""

    config_id: str
    label: str
    kind: str  # dense | lexical | fused | reranked | generated
    params_json: str
    parent_config_id: str | None
    status: str  # ok | pruned
    pruned_reason: str | None
    qps: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    n_latency_samples: int
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    n_e2e_samples: int
    rerank_p50_ms: float | None
    rerank_p95_ms: float | None
    rerank_p99_ms: float | None
    rerank_pairs_per_s: float | None
    build_s: float | None
    index_bytes: int | None
    unauthorized_hits: int
    filter_removed: int | None
    false_exclusion_rate: float | None
    doc_false_exclusion_rate: float | None
    #: generated configs: per-answer time to first token and per output token (ms)
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p95_ms: float | None = None
    #: the budget ceiling that pruned the config (or, when kept, the one closest to binding)
    budget_name: str | None = None
    budget_limit: float | None = None
    budget_measured: float | None = None
    budget_bound: float | None = None
    #: price of one query: mean over its queries of the priced components' sum
    #: (bench.cost.prices), and what it rests on (prices, what was not priced)
    cost_per_query: float | None = None
    cost_basis: str | None = None
    #: peak VRAM of the config's chain and which figure it is (torch_peak_allocated |
    #: nvml_used); null without a GPU reading
    peak_vram_bytes: int | None = None
    peak_vram_measure: str | None = None
    #: bootstrap CIs of the e2e percentiles over the n_e2e_samples requests (schema >= 4)
    e2e_p50_ci_low: float | None = None
    e2e_p50_ci_high: float | None = None
    e2e_p95_ci_low: float | None = None
    e2e_p95_ci_high: float | None = None
    e2e_p99_ci_low: float | None = None
    e2e_p99_ci_high: float | None = None
    #: warm-up requests excluded from the e2e figures
    n_latency_warmup: int | None = None
    #: interleaved (bench.pipeline.latency) | sum of stage samples
    latency_source: str | None = None
    #: the relevance filter's pool-relative false exclusions (gold that reached the pool and
    #: was removed); ``false_exclusion_rate`` is the seed's, over the eligible corpus
    pool_false_exclusion_rate: float | None = None
    pool_doc_false_exclusion_rate: float | None = None
    #: generated configs: p99 of TTFT / TPOT; abstention figures (docs/metrics.md; the
    #: hallucination rate is must-abstain queries answered / must-abstain queries)
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    abstention_precision: float | None = None
    abstention_recall: float | None = None
    abstention_coverage: float | None = None
    answered_accuracy: float | None = None
    abstention_hallucination_rate: float | None = None
    #: completion: per status, the largest share over the config's metrics of expected
    #: queries ending in it (incomplete: failed, timeout or invalid), and that metric
    failed_share: float | None = None
    timeout_share: float | None = None
    invalid_share: float | None = None
    incomplete_share: float | None = None
    incomplete_metric: str | None = None
    #: expected queries an iterative loop's budget stopped (scored on their evidence)
    budget_exhausted_share: float | None = None
    #: cost per query: the total's p50 / p99 and each priced component's mean (None: the
    #: config has no such part, or it carries no price — see cost_unpriced)
    cost_p50_per_query: float | None = None
    cost_p99_per_query: float | None = None
    cost_embedding: float | None = None
    cost_retrieval: float | None = None
    cost_rerank: float | None = None
    cost_generation: float | None = None
    cost_storage: float | None = None
    cost_unpriced: str | None = None
    #: declared columns that are not fields above (a stage's own), by name
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, columns: Mapping[str, Any]) -> ConfigRow:
        """The row from its columns by name (fields by name, the rest into ``extra``)."""
        names = _ROW_FIELDS
        return cls(**{k: v for k, v in columns.items() if k in names},
                   extra={k: v for k, v in columns.items() if k not in names})

    def columns(self) -> dict[str, Any]:
        """Every column of the row by name (``extra`` flattened)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**out, **self.extra}

    def value(self, name: str) -> Any:
        """One column's value (a field, or a stage's column in ``extra``; None if absent)."""
        if name in _ROW_FIELDS:
            return getattr(self, name)
        return self.extra.get(name)


_ROW_FIELDS = frozenset(f.name for f in fields(ConfigRow)) - {"extra"}


@dataclass(frozen=True)
class FilterQueryRow:
    """What a filter did to one query of one config (one row of filters.parquet)."""

    config_id: str
    query_id: str
    predicate: tuple[str, ...]  # tags applied, sorted (empty: the query passed unfiltered)
    n_eligible_gold: int  # eligible gold docs in the corpus (tenant and roles applied)
    n_excluded: int  # of those, ruled out by the predicate (the seed's, before retrieval)
    n_pool_excluded: int  # eligible gold that reached the pool and was removed
    excluded: bool | None  # every eligible gold doc ruled out; None: no eligible gold
    n_unauthorized: int  # docs in the filter's output this query's caller may not see


@dataclass(frozen=True)
class FilterDecisionRecord:
    """The hard-vs-soft decision for one lane (``error`` set when it could not be made)."""

    lane: str
    choice: str | None
    precision_gain: float | None = None
    gain_ci_low: float | None = None
    gain_ci_high: float | None = None
    p_value: float | None = None
    n: int = 0
    exclusion_rate: float | None = None
    recall_hard: float | None = None
    recall_soft: float | None = None
    recall_loss: float | None = None
    min_precision_gain: float | None = None
    max_exclusion_rate: float | None = None
    max_recall_loss: float | None = None
    reasons: tuple[str, ...] = ()
    predicate_precision: float | None = None
    predicate_recall: float | None = None
    predicates_extracted: int | None = None
    predicates_labelled: int | None = None
    error: str | None = None
    #: the hard filter's pool-relative rate (``exclusion_rate`` is the seed's, over the
    #: eligible corpus), the one k of precision@k / recall@k, what predicates were scored on
    pool_exclusion_rate: float | None = None
    k: int | None = None
    predicate_labels: str | None = None


@dataclass(frozen=True)
class GenerationSummary:
    """One generated config's answers in figures (run.json ``generation``, the report).

    Latencies are over the answers whose generation succeeded (ms); ``tpot`` is each answer's
    mean time per output token after the first, ``itl`` pools every inter-token gap. Abstention
    figures follow docs/metrics.md (precision / recall over must-abstain queries, coverage = share
    answered, answered accuracy over answered queries whose correctness is known); None where
    the denominator is empty. ``judge_schema_valid`` / ``judge_calls``: judge calls whose FIRST
    raw output passed the schema and validator, before any retry.
    """

    config_id: str
    label: str
    generator: str
    n_queries: int
    n_ok: int
    n_failed: int
    n_timeout: int
    prompt_tokens_mean: float | None
    output_tokens_mean: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    abstention_precision: float | None
    abstention_recall: float | None
    coverage: float | None
    answered_accuracy: float | None
    n_must_abstain: int
    n_abstained: int
    judge: str | None
    judge_calls: int
    judge_schema_valid: int
    judge_schema_validity: float | None
    judge_invalid: int
    #: (metric, n scored, n no_claims, n invalid, n failed) per judge metric
    judge_counts: tuple[tuple[str, int, int, int, int], ...] = ()
    #: the judge's model (short name), None without a judge
    judge_model: str | None = None
    #: ``generation.memo``: (answers from the memo, answers generated, judge calls from the
    #: memo, judge calls generated) while this config ran; (0, 0, 0, 0) when its answers and
    #: verdicts were loaded from the cache; None without the memo
    memo: tuple[int, int, int, int] | None = None
    #: ``judge.repeats``: times each answer was judged; with >= 2, the variance split per
    #: judge metric (bench.judge.repeats)
    judge_repeats: int = 1
    judge_noise: tuple[JudgeNoise, ...] = ()
    #: passages and distinct documents of the contexts the generator saw, mean per answer
    context_passages_mean: float | None = None
    context_docs_mean: float | None = None
    #: context good/bad x answer good/bad per query, with the layer to fix
    #: (``bench.context.metrics.diagnose``); None where the run has no answer checks
    diagnosis: ContextDiagnosis | None = None
    #: judge=pairwise: this config against the baseline (the first generated config)
    pairwise: PairwiseSummary | None = None
    #: p99 of TTFT / TPOT over the answers whose generation succeeded
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    #: must-abstain queries answered instead of abstained / must-abstain queries (None: none)
    abstention_hallucination_rate: float | None = None


@dataclass(frozen=True)
class JudgeNoise:
    """The variance split of one judge metric judged ``repeats`` times per answer, over the
    ``n_queries`` queries with >= 2 scored repeats (bench.judge.repeats)."""

    metric: str
    repeats: int
    n_queries: int
    mean: float | None
    #: variance of the per-query means across queries ("query variation")
    query_variance: float | None
    #: mean within-query, between-repeat variance ("judge noise")
    judge_variance: float | None
    #: judge_variance / (query_variance + judge_variance)
    judge_share: float | None
    #: mean over queries of sd / mean (queries with mean > 0)
    mean_cv: float | None
    #: the mean's CI resampling queries only, and the two-level one (queries, then repeats)
    ci_queries: tuple[float, float] | None
    ci_two_level: tuple[float, float] | None


@dataclass(frozen=True)
class GoldProbeSummary:
    """One position of the lost-in-the-middle probe (``context=gold_position``): where the
    gold passage sat, on how many queries, and which queries could not be probed.

    ``excluded``: (reason, count) — reasons decided from the judgments over the whole dataset
    (``must_abstain``, ``no_gold``, ``multi_gold``: never drawn into the subset) and then those
    decided on the pool for the drawn queries (``few_distractors``, ``over_budget``).
    ``n_eligible``: dataset queries the subset was drawn from; ``n_drawn``: the subset;
    ``n_probed``: contexts built; ``n_injected``: of those, gold passages placed from the chunk
    table because the pool held none.
    """

    config_id: str
    label: str
    position: str
    gold_index: int
    n_distractors: int
    n_dataset_queries: int
    n_eligible: int
    n_drawn: int
    n_probed: int
    n_injected: int
    excluded: tuple[tuple[str, int], ...] = ()
