"""The gates' JUnit XML: one test case per gate result (the rule of bench.gates.release, so
the file says what the log and report.md say), pruned configs skipped, counts on every suite,
the file parses as JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from bench.config.schema import GateConfig
from bench.gates.junit import result_cases, write_junit
from bench.gates.release import GateResult
from bench.results.records import ConfigRow


def config(cid: str, status: str = "ok") -> ConfigRow:
    return ConfigRow(
        config_id=cid, label=cid, kind="dense", params_json="{}", parent_config_id=None,
        status=status, pruned_reason="p95 over budget" if status != "ok" else None, qps=None,
        p50_ms=None, p95_ms=None, p99_ms=None, n_latency_samples=0, e2e_p50_ms=None,
        e2e_p95_ms=None, e2e_p99_ms=None, n_e2e_samples=0, rerank_p50_ms=None,
        rerank_p95_ms=None, rerank_p99_ms=None, rerank_pairs_per_s=None, build_s=None,
        index_bytes=None, unauthorized_hits=0, filter_removed=None, false_exclusion_rate=None,
        doc_false_exclusion_rate=None)


RESULTS = [
    GateResult("a", "dense", "ndcg@10", "all", 0.70, True,
               "a ndcg@10[all] 0.7000 >= min 0.6 (margin 0.1)"),
    GateResult("b", "bm25", "ndcg@10", "all", 0.55, False,
               "b ndcg@10[all] 0.5500 < min 0.6 (short by 0.05)"),
    GateResult("g", "gen", "faithfulness", "all", None, False,
               "g faithfulness[all]: no scored queries (0 scored of 8 expected (8 invalid))"),
]


def test_one_case_per_gate_result_and_a_skip_per_pruned_config(tmp_path: Path) -> None:
    gates = [GateConfig(metric="ndcg@10", min=0.6), GateConfig(metric="faithfulness", min=0.85)]
    cases = result_cases(RESULTS, [config("c", status="pruned")], gates)
    by = {(c.classname.rsplit(".", 1)[-1], c.name.split(" ")[0]): c for c in cases}
    assert len(cases) == 3 + 2
    assert by[("a", "ndcg@10[all]")].status == "passed"
    b = by[("b", "ndcg@10[all]")]
    assert b.status == "failed" and b.message.endswith("(short by 0.05)")
    assert dict(b.properties)["value"] == "0.55"
    faith = by[("g", "faithfulness[all]")]
    assert faith.status == "failed" and "no scored queries" in faith.message
    assert dict(faith.properties)["value"] == "-"
    assert by[("c", "ndcg@10[all]")].status == "skipped"
    assert by[("c", "faithfulness[all]")].message == "p95 over budget"

    path = write_junit(tmp_path / "out" / "gates.junit.xml", cases,
                       properties=[("split", "release")])
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("5", "2", "2")
    (suite,) = root
    assert suite.get("name") == "bench.gates.threshold" and suite.get("tests") == "5"
    assert suite.find("properties/property[@name='split']").get("value") == "release"  # type: ignore[union-attr]
    for tc in suite.findall("testcase"):
        assert tc.get("classname", "").startswith("bench.gates.threshold.") and tc.get("name")
        failure = tc.find("failure")
        if failure is not None:
            assert failure.get("type") == "GateFailed" and failure.text == failure.get("message")
