"""Regression gates on hand-built per_query tables: paired deltas judged on their CI against a
budget, critical queries per query, pairing, bad input, and ``bench.compare --gate``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.compare import main as compare_main
from bench.errors import ConfigError
from bench.gates.regression import evaluate, regression_settings
from bench.results import schema
from bench.results.records import PerQueryRow
from bench.results.write import write_records

#: 12 queries, 3 categories; ndcg@10 values a baseline could have
QIDS = [f"q{i:02d}" for i in range(12)]
CATS = ["exact"] * 4 + ["semantic"] * 4 + ["multi"] * 4
BASE = [1.0, 0.8, 0.6, 0.9, 0.7, 0.5, 0.4, 0.6, 0.3, 0.5, 0.8, 0.2]


def write_run(d: Path, values: dict[str, list[float]], *, labels: dict[str, str] | None = None,
              metric: str = "ndcg@10", corpus: str | None = "f" * 64) -> Path:
    """A run dir with per_query.parquet (one config per key of ``values``), configs.parquet's
    id/label columns and a run.json holding the corpus fingerprint (None: a run made before
    run.json had one)."""
    d.mkdir(parents=True, exist_ok=True)
    rows = [PerQueryRow(cid, q, c, metric, v, "scored")
            for cid, vals in values.items() for q, c, v in zip(QIDS, CATS, vals, strict=True)]
    write_records(rows, schema.PER_QUERY, d / "per_query.parquet", "run")
    labels = labels or {c: "dense" for c in values}
    pq.write_table(pa.table({"config_id": list(labels), "label": list(labels.values())}),
                   d / "configs.parquet")
    dataset = {"fingerprint": "d" * 64} | ({} if corpus is None else
                                            {"corpus_fingerprint": corpus})
    (d / "run.json").write_text(json.dumps({"dataset": dataset}))
    return d


def settings(baseline: Path, **block: object):  # type: ignore[no-untyped-def]
    return regression_settings(block, str(baseline), confidence=0.95, resamples=1000, seed=0,
                               default_metric="ndcg@10")


def test_an_unchanged_run_passes_every_gate(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {"c1": BASE})
    cur = write_run(tmp_path / "cur", {"c1": BASE})
    s = settings(base, gates=[{"metric": "ndcg@10", "max_drop": 0.0}],
                 critical={"query_ids": ["q00", "q01", "q02"]})
    out = evaluate(s, cur)
    (check,) = out.checks
    assert (check.delta, check.ci_low, check.ci_high, check.n) == (0.0, 0.0, 0.0, 12)
    assert not out.failed and out.failure_lines() == []
    assert [q.query_id for q in out.critical] == ["q00", "q01", "q02"]


def test_a_uniform_drop_beyond_the_budget_fails_with_its_margin(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {"c1": BASE})
    cur = write_run(tmp_path / "cur", {"c1": [v - 0.1 for v in BASE]})
    out = evaluate(settings(base, gates=[{"metric": "ndcg@10", "max_drop": 0.02}]), cur)
    (c,) = out.checks
    # every paired delta is -0.1: the bootstrap CI is the single point -0.1
    assert c.delta == pytest.approx(-0.1) and c.ci_high == pytest.approx(-0.1)
    assert c.regressed and c.budget == 0.02 and c.margin == pytest.approx(-0.08)
    assert "over by 0.08" in out.failure_lines()[0]


def test_the_judged_bound_is_configurable(tmp_path: Path) -> None:
    # half the queries lose 0.2, half gain 0.1: mean delta -0.05, a CI wide on both sides
    drop = [v - 0.2 if i % 2 else v + 0.1 for i, v in enumerate(BASE)]
    base = write_run(tmp_path / "base", {"c1": BASE})
    cur = write_run(tmp_path / "cur", {"c1": drop})
    gate = [{"metric": "ndcg@10", "max_drop": 0.04}]
    by_bound = {b: evaluate(settings(base, gates=gate, bound=b), cur).checks[0]
                for b in ("ci_upper", "ci_lower", "mean")}
    c = by_bound["mean"]
    assert c.delta == pytest.approx(-0.05) and c.ci_low < -0.05 < c.ci_high
    assert by_bound["ci_upper"].judged == c.ci_high and not by_bound["ci_upper"].regressed
    assert by_bound["ci_lower"].judged == c.ci_low and by_bound["ci_lower"].regressed
    assert by_bound["mean"].judged == pytest.approx(-0.05) and by_bound["mean"].regressed


def test_a_relative_budget_is_a_share_of_the_baseline_mean(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {"c1": BASE})
    mean = sum(BASE) / len(BASE)  # 0.6083...
    for drop, fails in ((0.05, False), (0.07, True)):  # budget 10 % = 0.0608
        cur = write_run(tmp_path / f"cur{drop}", {"c1": [v - drop for v in BASE]})
        (c,) = evaluate(settings(base, gates=[{"metric": "ndcg@10",
                                               "max_drop_relative": 0.1}]), cur).checks
        assert c.budget == pytest.approx(0.1 * mean) and c.regressed is fails


def test_a_category_scope_pairs_only_that_categorys_queries(tmp_path: Path) -> None:
    hit = [v - 0.3 if c == "multi" else v for v, c in zip(BASE, CATS, strict=True)]
    base = write_run(tmp_path / "base", {"c1": BASE})
    cur = write_run(tmp_path / "cur", {"c1": hit})
    out = evaluate(settings(base, gates=[{"metric": "ndcg@10", "scope": "category:exact",
                                          "max_drop": 0.0},
                                         {"metric": "ndcg@10", "scope": "category:multi",
                                          "max_drop": 0.1}]), cur)
    exact, multi = out.checks
    assert (exact.n, exact.regressed) == (4, False)
    assert (multi.n, multi.regressed) == (4, True) and multi.delta == pytest.approx(-0.3)


def test_three_critical_queries_regress_though_the_mean_gate_passes(tmp_path: Path) -> None:
    injected = list(BASE)
    for i in (1, 5, 9):  # q01, q05, q09 lose 0.3 each
        injected[i] -= 0.3
    base = write_run(tmp_path / "base", {"c1": BASE})
    cur = write_run(tmp_path / "cur", {"c1": injected})
    s = settings(base, gates=[{"metric": "ndcg@10", "max_drop": 0.1}],
                 critical={"query_ids": ["q01", "q05", "q09", "q00"]})
    out = evaluate(s, cur)
    assert not out.checks[0].regressed  # mean drop 0.075 < 0.1
    assert [q.query_id for q in out.critical_regressions] == ["q01", "q05", "q09"]
    assert out.failed
    lines = out.failure_lines()
    assert len(lines) == 3 and "critical query q01 ndcg@10 (c1): 0.8000 -> 0.5000" in lines[0]
    table = out.table()
    assert "3 regressed: q01, q05, q09" in table


def test_a_critical_category_makes_each_of_its_queries_critical(tmp_path: Path) -> None:
    injected = [v - 0.01 if c == "multi" else v for v, c in zip(BASE, CATS, strict=True)]
    base = write_run(tmp_path / "base", {"c1": BASE})
    cur = write_run(tmp_path / "cur", {"c1": injected})
    out = evaluate(settings(base, critical={"categories": ["multi"]}), cur)
    assert [q.query_id for q in out.critical_regressions] == ["q08", "q09", "q10", "q11"]
    ok = evaluate(settings(base, critical={"categories": ["multi"], "tolerance": 0.02}), cur)
    assert not ok.failed


def test_unpaired_configs_are_reported_and_no_pair_at_all_fails(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {"c1": BASE, "c2": BASE},
                     labels={"c1": "dense", "c2": "bm25"})
    cur = write_run(tmp_path / "cur", {"c1": BASE, "c3": BASE},
                    labels={"c1": "dense", "c3": "hybrid"})
    out = evaluate(settings(base, gates=[{"metric": "ndcg@10", "max_drop": 0.0}]), cur)
    assert out.paired == (("c1", "c1"),)
    assert out.unpaired_baseline == ("c2 (bm25)",) and out.unpaired_current == ("c3 (hybrid)",)
    assert "baseline only: c2 (bm25); this run only: c3 (hybrid)" in out.table()
    other = write_run(tmp_path / "other", {"c9": BASE}, labels={"c9": "dense"},
                      corpus="e" * 64)
    none = evaluate(settings(base, gates=[{"metric": "ndcg@10", "max_drop": 0.0}]), other)
    assert none.failed and none.nothing_paired
    assert "the corpus fingerprints differ (baseline ffffffffffff, this run eeeeeeeeeeee)" in (
        none.failure_lines()[0])
    # a baseline from before config ids were rooted in the corpus: its ids differ once
    old = write_run(tmp_path / "old", {"c0": BASE}, labels={"c0": "dense"}, corpus=None)
    stale = evaluate(settings(old, gates=[{"metric": "ndcg@10", "max_drop": 0.0}]), base)
    assert stale.nothing_paired and "made before config ids were rooted in the corpus" in (
        stale.failure_lines()[0])
    by_label = evaluate(settings(base, gates=[{"metric": "ndcg@10", "max_drop": 0.0}],
                                 pair_by="label"), other)
    assert by_label.paired == (("c1", "c9"),) and not by_label.failed


def test_a_gate_no_paired_config_can_answer_fails(tmp_path: Path) -> None:
    # the baseline's generated config has exact_match; the config both runs share does not
    base = write_run(tmp_path / "base", {"c1": BASE})
    write_records([PerQueryRow("gen", q, c, "exact_match", 1.0, "scored")
                   for q, c in zip(QIDS, CATS, strict=True)]
                  + [PerQueryRow("c1", q, c, "ndcg@10", v, "scored")
                     for q, c, v in zip(QIDS, CATS, BASE, strict=True)],
                  schema.PER_QUERY, base / "per_query.parquet", "run")
    cur = write_run(tmp_path / "cur", {"c1": BASE})
    out = evaluate(settings(base, gates=[{"metric": "exact_match", "max_drop": 0.0}]), cur)
    assert out.unpaired_baseline == ("gen",)
    (check,) = out.checks
    assert check.regressed and check.note == "no paired config has this metric in either run"
    assert out.failure_lines() == ["regression: - exact_match[all]: no paired config has this "
                                   "metric in either run"]


@pytest.mark.parametrize(("block", "match"), [
    ({"gates": [{"metric": "ndcg@10", "max_drop": -0.02}]},
     r"regression\.gates\[0\]\.max_drop: is the allowed worsening, >= 0; got -0.02"),
    ({"gates": [{"metric": "ndcg@10", "max_drop": 0.1, "max_drop_relative": 0.1}]},
     r"regression\.gates\[0\]: give exactly one of"),
    ({"gates": [{"metric": "ndcg@10"}]}, r"regression\.gates\[0\]: give exactly one of"),
    ({"gates": [{"metric": "nope@3", "max_drop": 0.1}]}, r"regression\.gates\[0\]\.metric"),
    ({"gates": [{"metric": "recall@10", "max_drop": 0.1}]},
     r"the baseline has no values of 'recall@10'"),
    ({"gates": [{"metric": "ndcg@010", "max_drop": 0.1}]}, r"write the metric as .ndcg@10."),
    ({"gates": [{"metric": "ndcg@10", "scope": "macro", "max_drop": 0.1}]},
     r"regression\.gates\[0\]\.scope: macro has no paired per-query delta"),
    ({"gates": [{"metric": "ndcg@10", "max_drop": 0.1}], "bound": "upper"},
     r"regression\.bound: must be one of ci_upper, ci_lower, mean"),
    ({"critical": {"query_ids": ["q1"], "tolerance": -1}},
     r"regression\.critical\.tolerance: must be >= 0"),
    ({}, r"regression: gates_against is set but no regression gate"),
])
def test_bad_rules_are_one_line_config_errors(tmp_path: Path, block: dict, match: str) -> None:
    base = write_run(tmp_path / "base", {"c1": BASE})
    with pytest.raises(ConfigError, match=match):
        settings(base, **block)


def test_a_baseline_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"gates_against: .* does not exist"):
        settings(tmp_path / "missing", gates=[{"metric": "ndcg@10", "max_drop": 0.1}])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"gates_against: .* is not a run dir"):
        settings(tmp_path / "empty", gates=[{"metric": "ndcg@10", "max_drop": 0.1}])


# --- python -m bench.compare --gate ----------------------------------------------------------

RULES = """regression:
  gates:
    - {metric: ndcg@10, max_drop: 0.1}
  critical:
    query_ids: [q01, q05, q09]
"""


def test_compare_gate_exits_3_with_the_table_and_writes_junit(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    injected = list(BASE)
    for i in (1, 5, 9):
        injected[i] -= 0.3
    base = write_run(tmp_path / "base", {"c1": BASE})
    cur = write_run(tmp_path / "cur", {"c1": injected})
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    junit = tmp_path / "gates.xml"
    code = compare_main(["--gate", str(rules), str(base), str(cur), "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == 3
    assert "3 regressed: q01, q05, q09" in out
    assert re.search(r"c1 +ndcg@10 +q05 +semantic +0\.5000 +0\.2000 +-0\.3000", out)
    assert err.count("bench: gate failed: regression: critical query") == 3
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "3"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"bench.gates.regression", "bench.gates.critical"}
    failures = suites["bench.gates.critical"].findall("testcase/failure")
    assert [f.get("message") for f in failures] == [
        f"value {cur}, bound {base} (baseline {base}, tolerance 0), margin -0.3"
        for base, cur in (("0.8000", "0.5000"), ("0.5000", "0.2000"), ("0.5000", "0.2000"))]
    case = suites["bench.gates.critical"].find("testcase")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.findall("properties/property")}
    assert props["value"] == "0.5" and props["bound"] == "0.8" and props["margin"] == "-0.3"

    assert compare_main(["--gate", str(rules), str(base), str(base)]) == 0


def test_compare_gate_bad_input_is_one_line_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    base = write_run(tmp_path / "base", {"c1": BASE})
    rules = tmp_path / "rules.yaml"
    rules.write_text("regression:\n  gates:\n    - {metric: ndcg@10, max_drop: -0.1}\n")
    assert compare_main(["--gate", str(rules), str(base), str(base)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "max_drop: is the allowed worsening" in err
    rules.write_text("regression:\n  gatez: []\n")
    assert compare_main(["--gate", str(rules), str(base), str(base)]) == 2
    assert "gatez" in capsys.readouterr().err
    rules.write_text(RULES)
    assert compare_main(["--gate", str(rules), str(tmp_path / "nope"), str(base)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "BASELINE" in err and "does not exist" in err


def test_critical_ids_without_a_baseline_only_shape_the_subset(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.gates.regression import from_config

    cfg = compose_cfg(["dataset=synthetic", "regression.critical.query_ids=[syn:q000]"])
    assert from_config(cfg) is None  # a baseline-producing run keeps them in its subset
    cfg = compose_cfg(["dataset=synthetic", "regression.gates=[{metric: ndcg@10, max_drop: 0}]"])
    with pytest.raises(ConfigError, match=r"gates_against: regression gates are set but no "
                                          r"baseline"):
        from_config(cfg)
