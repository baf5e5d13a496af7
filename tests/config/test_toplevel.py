"""bench.config.toplevel: the dataset-dependent gate check (the rest is in tests/hostile)."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from bench.config.toplevel import check_cache_dir, check_gate_categories
from bench.errors import ConfigError


def _gates(*scopes: str) -> Any:
    return OmegaConf.create([{"metric": "mrr", "scope": s, "min": 0.1} for s in scopes])


def test_gate_category_must_exist_in_the_dataset() -> None:
    check_gate_categories(_gates("all", "category:exact_lookup"), ["exact_lookup", "multi_doc"])
    with pytest.raises(ConfigError) as exc:
        check_gate_categories(_gates("all", "category:exact"), ["exact_lookup", "multi_doc"])
    assert exc.value.key == "gates[1].scope"
    assert "no category 'exact'" in str(exc.value)


def test_cache_dir_may_not_exist_yet(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert check_cache_dir(str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="lies under the file"):
        check_cache_dir(str(tmp_path / "f" / "b"))


def test_ann_recall_gates_pass_validation_and_are_checked_after_the_run() -> None:
    from bench.config.toplevel import check_gates, check_gates_matched

    gates = OmegaConf.create([{"metric": "ann_recall@10", "scope": "all", "min": 0.9,
                             "max": None}])
    check_gates(gates, ["ndcg@10"])  # the pipeline adds ann_recall@K for approximate indexes
    check_gates_matched(gates, [("ndcg@10", "all"), ("ann_recall@10", "all")])
    with pytest.raises(ConfigError) as exc:
        check_gates_matched(gates, [("ndcg@10", "all"), ("ndcg@10", "macro")])
    assert exc.value.key == "gates[0]" and "could never fire" in str(exc.value)


def _gate(metric: str, scope: str = "all", **kw: Any) -> Any:
    return OmegaConf.create([{"metric": metric, "scope": scope, "min": kw.get("min"),
                              "max": kw.get("max"), "use_ci_bound": kw.get("ci", False)}])


def test_budget_gates_are_accepted_and_typos_rejected() -> None:
    from bench.config.toplevel import check_gates, check_gates_matched

    for metric in ("e2e_p95_ms", "unauthorized_hits", "cost_per_query", "peak_vram_bytes"):
        g = _gate(metric, max=1.0)
        check_gates(g, ["ndcg@10"])
        check_gates_matched(g, [("ndcg@10", "all")])  # read from configs rows, not summary
    check_gates(_gate("recall@10", "category:exact_lookup", min=0.5), ["recall@10"])
    with pytest.raises(ConfigError) as exc:
        check_gates(_gate("e2e_p95ms", max=1.0), ["ndcg@10"])
    assert exc.value.key == "gates[0].metric" and "did you mean 'e2e_p95_ms'" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        check_gates(_gate("e2e_p95_ms", "category:exact_lookup", max=1.0), ["ndcg@10"])
    assert exc.value.key == "gates[0].scope"
    with pytest.raises(ConfigError) as exc:
        check_gates(_gate("e2e_p95_ms", max=1.0, ci=True), ["ndcg@10"])
    assert exc.value.key == "gates[0].use_ci_bound"
    with pytest.raises(ConfigError, match="needs min or max"):
        check_gates(_gate("cost_per_query"), ["ndcg@10"])


def test_answer_judge_and_config_gates_pass_validation() -> None:
    from bench.config.toplevel import check_gates

    # which configs of the planned run compute them is checked at plan time
    # (tests/pipeline/test_gates.py); here only that they are gateable at all
    for metric in ("faithfulness", "answer_relevancy", "context_relevance", "citation_precision",
                   "citation_recall", "refusal_correct", "exact_match", "token_f1",
                   "answer_correct", "claims_coverage"):
        check_gates(_gate(metric, min=0.5), ["ndcg@10"])
        check_gates(_gate(metric, "category:exact_lookup", min=0.5, ci=True), ["ndcg@10"])
    for metric in ("ttft_p95_ms", "tpot_p99_ms", "incomplete_share", "failed_share",
                   "abstention_recall", "abstention_hallucination_rate", "cost_generation",
                   "cost_p99_per_query", "false_exclusion_rate"):
        check_gates(_gate(metric, max=1.0), ["ndcg@10"])
    with pytest.raises(ConfigError) as exc:  # a set-level figure with no per-config value
        check_gates(_gate("predicate_precision", min=0.5), ["ndcg@10"])
    assert exc.value.key == "gates[0].metric" and "not gateable" in str(exc.value)
    with pytest.raises(ConfigError) as exc:  # a ranking metric must still be scored
        check_gates(_gate("ndcg@5", min=0.5), ["ndcg@10"])
    assert "add it to metrics.names" in str(exc.value)


@pytest.mark.parametrize("name", ["faithfulness", "token_f1", "ann_recall@10",
                                  "abstention_recall"])
def test_metrics_names_holds_ranking_metrics_only(name: str) -> None:
    from bench.config.toplevel import check_metrics

    m = OmegaConf.create({"names": ["ndcg@10", name], "relevance_level": 1,
                          "bootstrap_resamples": 1000, "confidence": 0.95,
                          "category_weights": {}})
    with pytest.raises(ConfigError) as exc:
        check_metrics(m)
    assert exc.value.key == "metrics.names[1]" and "not a ranking metric" in str(exc.value)
