"""bench.gates.release: which configs a gate reads, the config error before any work, the
failure lines (value, bound, margin), "when scored", completion shares; and the end-to-end
latency of a generated config (its context and generation included) next to a retrieval
config's (unchanged)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

import pytest

from bench.config.schema import GateConfig
from bench.errors import ConfigError
from bench.gates.release import (
    check_gate_metrics,
    completion_shares,
    config_has,
    evaluate_gates,
)
from bench.pipeline.e2e import e2e_timings, end_to_end_ms, stage_ms_by_query
from bench.pipeline.lanes import ConfigKind, ConfigSpec, lane
from bench.pipeline.node import Node, OpTraits, Phase
from bench.pipeline.plan import Plan
from bench.pipeline.stages import config_gate_metrics
from bench.results.records import Accounting, ConfigRow, SummaryRow
from bench.telemetry.base import StageTiming


@dataclass(frozen=True)
class UpInputs:
    up: Any = None


@dataclass(frozen=True)
class FakeOp(OpTraits):
    """An op declaring only its stage, phase and the stages it times."""

    stage: str
    phase: Phase = Phase.QUERY
    latency: tuple[str, ...] = ()
    request: tuple[str, ...] = ()
    version: str = "1"
    Inputs: ClassVar[type] = UpInputs

    def params(self) -> Mapping[str, Any]:
        return {"stage": self.stage}

    @property
    def latency_stages(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.latency

    @property
    def request_stages(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.request


def _chain(*ops: FakeOp) -> Node:
    node = None
    for op in ops:
        node = Node.of(op, op.stage, up=node)
    assert node is not None
    return node


EMBED = FakeOp("embed_queries", latency=("embed_query",))
INDEX = FakeOp("index", phase=Phase.INDEX)
SEARCH = FakeOp("retrieve", latency=("retrieve",))
FILTER = FakeOp("filters", latency=("filters",))
RERANK = FakeOp("rerank", latency=("rerank",))
CONTEXT = FakeOp("context", phase=Phase.OFFLINE, request=("context",))
GENERATE = FakeOp("generate", phase=Phase.OFFLINE, request=("generate",))
JUDGE = FakeOp("judge", phase=Phase.OFFLINE)

DENSE = lane("dense", ConfigKind.DENSE, _chain(EMBED, INDEX, SEARCH), {})
RERANKED = lane("dense>r", ConfigKind.RERANKED, _chain(EMBED, INDEX, SEARCH, RERANK), {})
GENERATED = lane("dense>r>gen", ConfigKind.GENERATED,
                 _chain(EMBED, INDEX, SEARCH, RERANK, CONTEXT, GENERATE, JUDGE), {})
FILTERED = lane("dense|hard", ConfigKind.DENSE, _chain(EMBED, INDEX, SEARCH, FILTER), {})
RAG = (DENSE, RERANKED, GENERATED)
ON = {"index": True, "retrieval": True, "rerank": True, "generation": True, "filters": False,
      "cost": False}


def _gate(metric: str, **kw: Any) -> GateConfig:
    return GateConfig(metric=metric, scope=kw.get("scope", "all"), min=kw.get("min"),
                      max=kw.get("max"), use_ci_bound=kw.get("ci", False))


def _check(metric: str, specs: tuple[ConfigSpec, ...] = RAG, *, enabled: Mapping[str, bool] = ON,
           judged: tuple[str, ...] = ("faithfulness", "answer_relevancy"),
           answers: bool = True) -> None:
    check_gate_metrics([_gate(metric, min=0.0)], specs, enabled, judged, answers)


@pytest.mark.parametrize("metric", [
    "faithfulness", "answer_relevancy", "exact_match", "token_f1", "answer_correct",
    "claims_coverage", "e2e_p95_ms", "ttft_p95_ms", "tpot_p99_ms", "abstention_precision",
    "abstention_recall", "abstention_coverage", "abstention_hallucination_rate",
    "incomplete_share", "failed_share", "timeout_share", "invalid_share", "rerank_p95_ms",
    "index_bytes", "unauthorized_hits", "ndcg@10"])
def test_a_metric_some_config_of_the_run_computes_is_accepted(metric: str) -> None:
    _check(metric)


@pytest.mark.parametrize(("metric", "specs", "kw", "says"), [
    # a judge metric on a retrieval-only run, or one the configured judge does not score
    ("faithfulness", (DENSE, RERANKED), {}, "kinds generated"),
    ("citation_precision", RAG, {}, "judge that scores it"),
    ("refusal_correct", RAG, {"judged": ("faithfulness",)}, "judge that scores it"),
    # an answer check without a generator, or with answer checks switched off
    ("exact_match", (DENSE,), {}, "generator=..."),
    ("token_f1", RAG, {"answers": False}, "answers=default"),
    # whole-request figures of generated configs on a retrieval-only run
    ("ttft_p95_ms", (DENSE, RERANKED), {}, "kinds generated"),
    ("abstention_recall", (DENSE,), {}, "kinds generated"),
    # a filter figure without a filter, a rerank latency without a reranker, an unpriced cost
    ("false_exclusion_rate", RAG, {}, "filters=..."),
    ("rerank_p95_ms", (DENSE,), {}, "rerank stage"),
    ("cost_per_query", RAG, {}, "cost=..."),
])
def test_a_gate_no_config_computes_is_a_config_error_naming_the_kinds(
        metric: str, specs: tuple[ConfigSpec, ...], kw: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as exc:
        _check(metric, specs, **kw)
    assert exc.value.key == "gates[0].metric"
    text = str(exc.value)
    assert f"no config of this run computes {metric}" in text and says in text
    kinds = ", ".join(dict.fromkeys(s.kind.value for s in specs))
    assert text.endswith(f"this run's config kinds: {kinds}")


def test_filter_and_cost_gates_need_their_stage() -> None:
    _check("false_exclusion_rate", (*RAG, FILTERED), enabled={**ON, "filters": True})
    assert config_has("false_exclusion_rate", FILTERED, {**ON, "filters": True})
    assert not config_has("false_exclusion_rate", DENSE, {**ON, "filters": True})
    _check("cost_per_query", RAG, enabled={**ON, "cost": True})
    _check("cost_per_query", RAG, enabled={**ON, "budget_price": True})  # the budget's price
    with pytest.raises(ConfigError):
        _check("cost_rerank", RAG, enabled={**ON, "budget_price": True})  # no components


def test_only_configs_that_have_a_metric_are_gated_by_it() -> None:
    assert config_has("ttft_p95_ms", GENERATED, ON)
    assert not config_has("ttft_p95_ms", DENSE, ON) and not config_has("ttft_p95_ms", RERANKED, ON)
    assert config_has("rerank_p95_ms", RERANKED, ON) and config_has("rerank_p95_ms", GENERATED, ON)
    assert not config_has("rerank_p95_ms", DENSE, ON)
    assert all(config_has("e2e_p95_ms", s, ON) for s in RAG)
    assert all(config_has("incomplete_share", s, ON) for s in RAG)


def test_every_config_gate_metric_is_a_configs_parquet_column() -> None:
    columns = {f.name for f in fields(ConfigRow)}
    assert set(config_gate_metrics()) <= columns


def _row(config_id: str, **kw: Any) -> ConfigRow:
    base = ConfigRow(config_id, config_id, "generated", "{}", None, "ok", None, None, None, None,
                     None, 0, None, None, None, 0, None, None, None, None, None, None, 0, None,
                     None, None)
    return replace(base, **kw)


def _summary(config_id: str, metric: str, mean: float | None,
             ci: tuple[float, float] | None = None) -> SummaryRow:
    lo, hi = ci if ci is not None else (mean, mean)
    return SummaryRow(config_id, "all", metric, True, 3, mean, lo, hi)


def _acc(expected: int, scored: int, invalid: int = 0, no_claims: int = 0, failed: int = 0,
         timeout: int = 0) -> Accounting:
    return Accounting(expected, scored, 0, timeout, invalid, no_claims, 0, failed)


def _lines(gates: list[GateConfig], rows: list[SummaryRow], configs: list[ConfigRow],
           **kw: Any) -> list[tuple[bool, str]]:
    has = kw.pop("has", {m: frozenset(c.config_id for c in configs)
                         for m in config_gate_metrics()})
    return [(g.passed, g.line) for g in evaluate_gates(
        gates, rows, configs, has=has, accounting=kw.get("accounting", {}),
        notes=kw.get("notes", {}))]


def test_the_seeds_release_requirement_fails_with_value_bound_and_margin() -> None:
    gates = [_gate("faithfulness", min=0.85), _gate("e2e_p95_ms", max=1500.0),
             _gate("false_exclusion_rate", max=0.02)]
    rows = [_summary("g", "faithfulness", 0.5)]
    configs = [_row("g", e2e_p95_ms=2400.0, false_exclusion_rate=0.05)]
    out = _lines(gates, rows, configs, accounting={("g", "faithfulness"): _acc(4, 2, 1, 1)})
    assert out == [
        (False, "g faithfulness[all] 0.5000 < min 0.85 (short by 0.35; 2 scored of 4 expected "
                "(1 invalid, 1 no_claims))"),
        (False, "g e2e_p95_ms[all] 2400.0 > max 1500 (over by 900)"),
        (False, "g false_exclusion_rate[all] 0.0500 > max 0.02 (over by 0.03)")]


def test_passing_gates_say_their_margin() -> None:
    gates = [_gate("faithfulness", min=0.85), _gate("e2e_p95_ms", max=1500.0)]
    out = _lines(gates, [_summary("g", "faithfulness", 0.9)], [_row("g", e2e_p95_ms=1200.0)],
                 accounting={("g", "faithfulness"): _acc(4, 4)})
    assert out == [
        (True, "g faithfulness[all] 0.9000 >= min 0.85 (margin 0.05); 4 scored of 4 expected"),
        (True, "g e2e_p95_ms[all] 1200.0 <= max 1500 (margin 300)")]


def test_a_judge_gate_with_nothing_scored_fails_and_says_why() -> None:
    # "when scored": the mean is over scored verdicts; with none, the requirement is unmet
    out = _lines([_gate("faithfulness", min=0.85)], [_summary("g", "faithfulness", None)],
                 [_row("g")], accounting={("g", "faithfulness"): _acc(4, 0, invalid=3,
                                                                         no_claims=1)})
    assert out == [(False, "g faithfulness[all]: no scored queries (0 scored of 4 expected "
                           "(3 invalid, 1 no_claims))")]


def test_ci_bound_gates_read_the_ci() -> None:
    out = _lines([_gate("token_f1", min=0.5, ci=True)], [_summary("g", "token_f1", 0.6,
                                                                 (0.45, 0.7))], [_row("g")])
    assert out == [(False, "g token_f1[all] 0.4500 < min 0.5 (short by 0.05; the CI bound of "
                           "mean 0.6000, CI [0.4500, 0.7000])")]


def test_config_gates_skip_configs_without_the_metric_and_pruned_ones() -> None:
    configs = [_row("d", kind="dense"), _row("g", ttft_p95_ms=90.0),
               _row("p", status="pruned")]
    out = _lines([_gate("ttft_p95_ms", max=50.0)], [], configs,
                 has={"ttft_p95_ms": frozenset({"g", "p"})})
    assert out == [(False, "g ttft_p95_ms[all] 90.0000 > max 50 (over by 40)")]
    # a config that should have it but did not measure it cannot pass
    out = _lines([_gate("ttft_p95_ms", max=50.0)], [], [_row("g")],
                 has={"ttft_p95_ms": frozenset({"g"})})
    assert out == [(False, "g ttft_p95_ms[all]: not measured by this run, so the gate cannot "
                           "pass")]


def test_a_cost_gate_fails_while_a_part_of_the_config_is_unpriced() -> None:
    notes = {("g", "cost_per_query"): "not priced: generation (no token prices or "
                                      "generation_price_per_hour)"}
    out = _lines([_gate("cost_per_query", max=1.0)], [], [_row("g", cost_per_query=1e-6)],
                 notes=notes)
    assert not out[0][0] and "covers only the priced parts" in out[0][1]
    assert _lines([_gate("cost_per_query", max=1.0)], [], [_row("g", cost_per_query=1e-6)])[0][0]


def test_completion_shares_take_the_worst_metric() -> None:
    shares = completion_shares({"ndcg@10": _acc(18, 18), "faithfulness": _acc(8, 4, invalid=2,
                                                                                no_claims=2),
                                "token_f1": _acc(8, 7, failed=1)})
    assert shares["invalid_share"] == (2 / 8, "faithfulness")
    assert shares["failed_share"] == (1 / 8, "token_f1")
    assert shares["timeout_share"] == (0.0, "ndcg@10")
    assert shares["incomplete_share"] == (2 / 8, "faithfulness")  # no_claims is not incomplete
    out = _lines([_gate("incomplete_share", max=0.01)], [],
                 [_row("g", incomplete_share=0.25)],
                 notes={("g", "incomplete_share"): "worst metric faithfulness"})
    assert out == [(False, "g incomplete_share[all] 0.2500 > max 0.01 (over by 0.24; worst "
                           "metric faithfulness)")]


def _plan(*specs: ConfigSpec) -> Plan:
    n = specs[0].leaf
    return Plan(n, n, n, n, n, n, None, tuple(specs))


def test_e2e_of_a_generated_config_adds_context_and_generation() -> None:
    plan = _plan(*RAG)
    assert plan.query_time_stages() == ("embed_query", "retrieve", "rerank")
    assert plan.e2e_stages(DENSE) == plan.query_time_stages()  # retrieval configs unchanged
    assert plan.e2e_stages(RERANKED) == plan.query_time_stages()
    assert plan.e2e_stages(GENERATED) == ("embed_query", "retrieve", "rerank", "context",
                                          "generate")
    timings = (
        StageTiming("embed_query", "query", 1, 2.0, query_id="q1"),
        StageTiming("embed_query", "query", 1, 3.0, query_id="q2"),
        StageTiming("embed_query", "query", 1, 4.0, query_id="q3"),
        StageTiming("retrieve", "query", 1, 1.0, query_id="q1"),
        StageTiming("retrieve", "query", 1, 1.0, query_id="q2"),
        StageTiming("retrieve", "query", 1, 1.0, query_id="q3"),
        StageTiming("rerank", "query", 1, 10.0, query_id="q1"),
        StageTiming("rerank", "query", 1, 20.0, query_id="q2"),
        StageTiming("rerank", "query", 1, 30.0, query_id="q3"),
        # context built for the two answered queries in one batch: 8 ms, 4 ms each
        StageTiming("context", "total", 2, 8.0),
        # each answer's request latency (TTFT + generation), n_items = output tokens
        StageTiming("generate", "query", 40, 900.0, query_id="q1"),
        StageTiming("generate", "query", 12, 300.0, query_id="q3"),
        StageTiming("judge", "query", 1, 5000.0, query_id="q1"),  # evaluation: never counts
        StageTiming("metrics", "total", 3, 50.0),
    )
    assert end_to_end_ms(timings, plan.e2e_stages(DENSE)) == [13.0, 24.0, 35.0]
    # the answered queries only, each: retrieval chain + its context share + its generation
    assert end_to_end_ms(timings, plan.e2e_stages(GENERATED)) == [
        2.0 + 1.0 + 10.0 + 900.0 + 4.0, 4.0 + 1.0 + 30.0 + 300.0 + 4.0]
    qids, per_stage = stage_ms_by_query(timings, plan.e2e_stages(GENERATED))
    assert qids == ["q1", "q3"]
    assert per_stage["generate"].tolist() == [900.0, 300.0]
    assert per_stage["context"].tolist() == [4.0, 4.0]
    sums = [sum(float(v[i]) for v in per_stage.values()) for i in range(2)]
    assert sums == end_to_end_ms(timings, plan.e2e_stages(GENERATED))


def test_a_generated_config_adds_up_its_own_whole_requests() -> None:
    # the pool's rerank latency was sampled on q2 only; the answered query q1 has its chain
    # timed alone ("request" samples): those, not the pool's samples, add up with its answer
    plan = _plan(*RAG)
    timings = (
        StageTiming("embed_query", "query", 1, 2.0, query_id="q1"),
        StageTiming("embed_query", "query", 1, 3.0, query_id="q2"),
        StageTiming("retrieve", "query", 1, 1.0, query_id="q1"),
        StageTiming("retrieve", "query", 1, 1.0, query_id="q2"),
        StageTiming("rerank", "query", 1, 20.0, query_id="q2"),
        StageTiming("embed_query", "request", 1, 2.5, query_id="q1"),
        StageTiming("retrieve", "request", 1, 1.5, query_id="q1"),
        StageTiming("rerank", "request", 1, 30.0, query_id="q1"),
        StageTiming("context", "total", 1, 4.0),
        StageTiming("generate", "query", 40, 900.0, query_id="q1"),
    )
    stages = plan.e2e_stages(GENERATED)
    assert end_to_end_ms(timings, stages) == []  # no query has every stage sampled
    whole = e2e_timings(timings, plan.query_time_stages())
    assert end_to_end_ms(whole, stages) == [2.5 + 1.5 + 30.0 + 4.0 + 900.0]
    # a config without request samples keeps its own samples untouched
    plain = timings[:5]
    assert e2e_timings(plain, plan.query_time_stages()) == plain


def test_the_real_generation_ops_declare_their_request_stages() -> None:
    from bench.generation.stage import ContextOp, GenerateOp

    assert ContextOp.request_stages == ("context",) and ContextOp.phase is Phase.OFFLINE
    assert GenerateOp.request_stages == ("generate",) and GenerateOp.phase is Phase.OFFLINE
    from bench.judge.stage import JudgeOp

    assert JudgeOp.request_stages == ()  # judging is evaluation, no request pays it
