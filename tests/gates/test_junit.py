"""The gates' JUnit XML: one test case per threshold gate x config with value, bound and
margin; pruned configs skipped; counts on every suite; the file parses as JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench.config.schema import GateConfig
from bench.gates.junit import threshold_cases, write_junit
from bench.results.records import ConfigRow, SummaryRow


def config(cid: str, status: str = "ok", e2e_p95_ms: float | None = 12.0) -> ConfigRow:
    return ConfigRow(
        config_id=cid, label=cid, kind="dense", params_json="{}", parent_config_id=None,
        status=status, pruned_reason="p95 over budget" if status != "ok" else None, qps=None,
        p50_ms=None, p95_ms=None, p99_ms=None, n_latency_samples=0, e2e_p50_ms=None,
        e2e_p95_ms=e2e_p95_ms, e2e_p99_ms=None, n_e2e_samples=0, rerank_p50_ms=None,
        rerank_p95_ms=None, rerank_p99_ms=None, rerank_pairs_per_s=None, build_s=None,
        index_bytes=None, unauthorized_hits=0, filter_removed=None, false_exclusion_rate=None,
        doc_false_exclusion_rate=None)


ROWS = [SummaryRow("a", "all", "ndcg@10", True, 30, 0.70, 0.62, 0.78),
        SummaryRow("b", "all", "ndcg@10", True, 30, 0.55, 0.47, 0.63),
        SummaryRow("c", "all", "ndcg@10", True, 0, None, None, None)]


def test_one_case_per_gate_and_config_with_value_bound_and_margin(tmp_path: Path) -> None:
    gates = [GateConfig(metric="ndcg@10", min=0.6), GateConfig(metric="ndcg@10", min=0.6,
                                                               use_ci_bound=True),
             GateConfig(metric="e2e_p95_ms", max=10.0)]
    cases = threshold_cases(gates, ROWS, {"c"}, [config("a"), config("b", e2e_p95_ms=8.0),
                                                 config("c", status="pruned")])
    by = {(c.classname.rsplit(".", 1)[-1], c.name): c for c in cases}
    assert len(cases) == 3 + 3 + 3
    mean_a = by[("a", "ndcg@10[all] >= 0.6")]
    assert mean_a.status == "passed" and dict(mean_a.properties)["margin"] == "0.1"
    ci_a = by[("a", "ndcg@10[all] >= 0.6 (CI bound)")]
    assert ci_a.status == "passed" and dict(ci_a.properties)["value"] == "0.62"
    b = by[("b", "ndcg@10[all] >= 0.6")]
    assert b.status == "failed" and b.message == "value 0.5500 < min 0.6 (short by 0.05)"
    assert by[("c", "ndcg@10[all] >= 0.6")].status == "skipped"
    latency = by[("a", "e2e_p95_ms[all] <= 10")]
    assert latency.status == "failed" and "over by 2" in latency.message
    assert by[("b", "e2e_p95_ms[all] <= 10")].status == "passed"
    assert by[("c", "e2e_p95_ms[all] <= 10")].status == "skipped"

    path = write_junit(tmp_path / "out" / "gates.junit.xml", cases,
                       properties=[("split", "release")])
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("9", "3", "3")
    (suite,) = root
    assert suite.get("name") == "bench.gates.threshold" and suite.get("tests") == "9"
    assert suite.find("properties/property[@name='split']").get("value") == "release"  # type: ignore[union-attr]
    for tc in suite.findall("testcase"):
        assert tc.get("classname", "").startswith("bench.gates.threshold.") and tc.get("name")
        failure = tc.find("failure")
        if failure is not None:
            assert failure.get("type") == "GateFailed" and failure.text == failure.get("message")


def test_a_gate_with_no_scored_queries_fails() -> None:
    (case,) = threshold_cases([GateConfig(metric="ndcg@10", min=0.1)], ROWS[2:], set(), [])
    assert case.status == "failed" and case.message == "no scored queries"


@pytest.mark.parametrize(("lo", "hi", "status"), [(0.5, 0.5, "passed"), (0.3, 0.3, "failed"),
                                                  (0.9, 0.9, "failed")])
def test_both_bounds_report_the_tighter_side(lo: float, hi: float, status: str) -> None:
    row = SummaryRow("a", "all", "mrr", True, 5, lo, lo, hi)
    (case,) = threshold_cases([GateConfig(metric="mrr", min=0.4, max=0.8)], [row], set(), [])
    assert case.status == status
