"""The plan composed from per-component knees: workers per component, the ratios as an
output beside NVIDIA's, cost, and a component without a knee."""

from __future__ import annotations

import math

import pytest

from bench.capacity.components import ComponentCapacity, compose_plan, plan_lines
from bench.capacity.knee import Knee


def cap(name: str, rate: float | None, stopped: str = "width") -> ComponentCapacity:
    knee = Knee(rate, None if rate is None else rate * 0.9, None if rate is None else rate * 1.1,
                0.9, (), stopped, 4, 10.0)  # type: ignore[arg-type]
    return ComponentCapacity(name, f"one {name} call", {"e2el": 100.0}, knee)


def test_plan_against_the_llm() -> None:
    caps = [cap("embedder", 500.0), cap("vector_db", 160.0), cap("reranker", 80.0),
            cap("llm", 10.0), cap("chain", 9.0)]
    plan = compose_plan(caps, target_rps=100.0, worker_kind="GPU", price_per_hour=2.0,
                        correct_share=0.8)
    rows = {r.component: r for r in plan.rows}
    assert plan.reference == "llm"
    assert [rows[n].workers for n in ("embedder", "vector_db", "reranker", "llm", "chain")] == [
        1, 1, 2, 10, math.ceil(100 / 9)]
    # one embedder keeps up with 500 / 10 = 50 LLM workers: NVIDIA's 1:50
    assert rows["embedder"].per_worker == pytest.approx(50.0)
    assert rows["reranker"].per_worker == pytest.approx(8.0) and rows["reranker"].nvidia == "1:8"
    assert rows["vector_db"].nvidia == "1:16" and rows["chain"].nvidia is None
    assert plan.split_workers == 1 + 1 + 2 + 10
    # 14 workers x 2 / h for 100 q/s: 28 / 360000 per query
    assert plan.cost_per_1m_queries == pytest.approx(28 / 360000 * 1e6)
    assert plan.cost_per_1m_correct == pytest.approx(28 / 360000 * 1e6 / 0.8)
    assert "14 GPUs as separate services" in plan.text
    # GPU workers with an LLM: only NVIDIA's setup is named, no CPU caveat
    assert "no LLM" not in plan.comparability and "CPU box" not in plan.comparability
    md = "\n".join(plan_lines(caps, plan))
    assert "| embedder | one embedder call | e2el 100 ms | 500.00 (450.00 - 550.00) | 1 | 1:50 " \
           "| 1:50 |" in md


def test_plan_without_llm_is_per_chain_worker_and_says_so() -> None:
    caps = [cap("embedder", 40.0, stopped="ceiling"), cap("vector_db", None),
            cap("chain", 20.0)]
    plan = compose_plan(caps, target_rps=50.0, worker_kind="CPU worker", price_per_hour=0.1,
                        correct_share=None)
    rows = {r.component: r for r in plan.rows}
    assert plan.reference == "chain"
    assert rows["embedder"].per_worker == pytest.approx(2.0) and rows["embedder"].at_least
    assert rows["vector_db"].workers is None and plan.split_workers is None
    assert plan.cost_per_1m_queries is None  # no split plan: nothing to price
    assert plan.chain_workers == 3
    assert "no knee for vector_db" in plan.text and "3 whole-chain replicas" in plan.text
    assert "no LLM" in plan.comparability and "CPU worker" in plan.comparability
    md = "\n".join(plan_lines(caps, plan))
    assert ">= 40.00" in md and "| vector_db |" in md and "none (-)" in md
