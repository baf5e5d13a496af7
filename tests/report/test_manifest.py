"""run.json read back as typed records (bench/report/manifest.py): what the run wrote with
``asdict`` / ``to_json`` comes back as the same record, a malformed record is one InputError
naming run.json and the key."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from bench.cost.prices import CostSummary
from bench.errors import InputError
from bench.gates.regression import CriticalCheck, RegressionCheck, RegressionOutcome
from bench.report.manifest import manifest_of, read_manifest, records
from bench.results.records import FilterDecisionRecord, GoldProbeSummary
from bench.telemetry.base import ResourceSample


def _json(obj: object) -> object:
    """What run.json holds: the record through json (tuples become lists)."""
    return json.loads(json.dumps(obj, default=str))


def test_records_round_trip_through_run_json() -> None:
    probe = GoldProbeSummary("c1", "dense>ctx", "middle", 2, 4, 30, 20, 12, 12, 11,
                             excluded=(("no gold", 8), ("too short", 10)))
    cost = CostSummary("c1", "dense", 30, (("search", 1e-6, 9e-7, 2.5e-6),), ("index",))
    res = (ResourceSample("embed", 2**30, None, None), ResourceSample("rerank", 5, 7, 12.5))
    dec = FilterDecisionRecord("dense", "hard", precision_gain=0.1, reasons=("a", "b"), k=10)
    assert records(tuple[GoldProbeSummary, ...], _json([asdict(probe)]), "lost_in_middle") \
        == (probe,)
    assert records(tuple[CostSummary, ...], _json([asdict(cost)]), "cost.configs") == (cost,)
    assert records(tuple[ResourceSample, ...], _json([r.__dict__ for r in res]),
                   "resources") == res
    assert records(FilterDecisionRecord, _json(asdict(dec)), "filter_decisions") == dec


def test_a_regression_outcome_comes_back_whole() -> None:
    check = RegressionCheck("ndcg@10", "all", "c1", "dense", 30, 0.5, 0.45, -0.05, -0.09,
                            -0.01, 0.02, -0.01, True, "min_delta")
    crit = CriticalCheck("c1", "dense", "ndcg@10", "q7", "a", 1.0, 0.0, True)
    out = RegressionOutcome("base", "cur", "ci_upper", 0.95, "config_id", 0.0, (check,), (crit,),
                            (("c1", "c1"),), ("c9",), (), None, "dev", notes=("n1",))
    back = records(RegressionOutcome, _json(out.to_json()), "regression_gates")
    assert back == out
    assert back.markdown() == out.markdown()  # the report section renders the same


def test_a_malformed_record_names_run_json_and_the_key(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        records(tuple[GoldProbeSummary, ...], [{"config_id": "c1"}], "lost_in_middle",
                tmp_path / "run.json")
    line = err.value.one_line()
    assert "run.json" in line and "lost_in_middle.0" in line and "\n" not in line


def test_header_notes_and_missing_keys(tmp_path: Path) -> None:
    raw = {"run_id": "r", "dataset": {"name": "d", "fingerprint": "f", "documents": 3,
                                      "queries": 2, "chunks": 4},
           "configs": {"c1": {"label": "dense", "params": {"k": 10, "ef": 64},
                              "completion": {"expected": 2}}},
           "queries_selected": {"split": "dev", "max_queries": None,
                                "summary": "2 of 9 queries of split 'dev' (splits.jsonl)"},
           "contamination": {"warnings": ["1 query pair(s) in two splits are near-duplicates"]},
           "filters": None}
    m = manifest_of(raw, tmp_path / "run.json")
    assert m.data_notes == ("Queries evaluated: 2 of 9 queries of split 'dev' (splits.jsonl).",
                            "⚠ Contamination: 1 query pair(s) in two splits are near-duplicates")
    assert list(m.configs["c1"].params) == ["k", "ef"]  # the plan's order, not sorted
    assert m.failed_gates == () and m.stages == {} and m.typed("rewrite", object) is None
    assert not m.filters_enabled
    (tmp_path / "run.json").write_text("[1]")
    with pytest.raises(InputError, match="not a JSON object"):
        read_manifest(tmp_path)
