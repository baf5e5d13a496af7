"""Regression gates, splits and the JUnit file in a whole run (synthetic data as golden JSONL):
a saved baseline, the same run gated against it (exit 0), an injected regression on 3 critical
queries (exit 3), a split run with a planted duplicate (the contamination warning)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench.data.golden import write_golden
from bench.data.splits import make_splits
from bench.data.synthetic import SyntheticDataset
from bench.errors import ConfigError
from bench.pipeline.run import run

CRITICAL = ["syn:q000", "syn:q001", "syn:q002"]  # exact lookups, nDCG@10 1.0 at baseline
GATES = ("regression.gates=[{metric: ndcg@10, max_drop: 0.05}, "
         "{metric: mrr, scope: 'category:exact_lookup', max_drop_relative: 0.5}]")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("golden")
    ds = SyntheticDataset(n_docs=40, n_queries=16).load()
    write_golden(ds.documents, ds.queries, corpus=d / "corpus.jsonl",
                 queries_path=d / "queries.jsonl")
    # the injected regression: the 3 critical queries' text garbled, as a broken query
    # normaliser would leave it
    bad = [dataclasses.replace(q, text="zzq vvx") if q.query_id in CRITICAL else q
           for q in ds.queries]
    write_golden(ds.documents, bad, corpus=d / "corpus.jsonl", queries_path=d / "broken.jsonl")
    # splits, grouped and seeded, and a planted duplicate: a development copy of a release
    # query, differing only in case and punctuation
    split = make_splits(ds.queries, {"development": 0.5, "release": 0.5}, seed=0)
    with_split = [dataclasses.replace(q, split=split[q.query_id]) for q in ds.queries]
    victim = next(q for q in with_split if q.split == "release" and not q.must_abstain)
    planted = dataclasses.replace(victim, query_id="planted", split="development",
                                  text=victim.text.upper() + "!")
    write_golden(ds.documents, [*with_split, planted], corpus=d / "corpus.jsonl",
                 queries_path=d / "split.jsonl")
    (d / "victim").write_text(victim.query_id)
    return d


def overrides(data: Path, cache: Path, queries: str = "queries.jsonl") -> list[str]:
    return ["dataset=golden", f"dataset.corpus={data / 'corpus.jsonl'}",
            f"dataset.queries={data / queries}", f"cache_dir={cache}",
            "metrics.bootstrap_resamples=200"]


@pytest.fixture(scope="module")
def baseline(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    root = tmp_path_factory.mktemp("runs")
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides(data, root / "cache"),
                      return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    assert run(cfg, root / "baseline").exit_code == 0
    return root


def test_the_same_run_passes_against_its_baseline(compose_cfg, baseline: Path,  # type: ignore[no-untyped-def]
                                                  data: Path) -> None:
    cfg = compose_cfg([*overrides(data, baseline / "cache"),
                       f"gates_against={baseline / 'baseline'}", GATES,
                       f"regression.critical.query_ids=[{','.join(CRITICAL)}]",
                       "gates=[{metric: ndcg@10, min: 0.1}]",
                       f"gates_junit={baseline / 'ci' / 'junit.xml'}"])
    result = run(cfg, baseline / "same")
    assert result.exit_code == 0, result.failed_gates
    reg = json.loads((baseline / "same/run.json").read_text())["regression_gates"]
    assert reg["failed"] is False and reg["unpaired_current"] == []
    assert [c["delta"] for c in reg["checks"]] == [0.0, 0.0]
    root = ET.parse(baseline / "same" / "gates.junit.xml").getroot()
    assert root.get("failures") == "0" and root.get("tests") == str(1 + 2 + 3 * 2)
    assert [s.get("name") for s in root] == ["bench.gates.threshold", "bench.gates.regression",
                                             "bench.gates.critical"]
    assert (baseline / "ci" / "junit.xml").read_bytes() == (
        baseline / "same" / "gates.junit.xml").read_bytes()
    assert "## Regression gates vs the baseline: passed" in (
        baseline / "same/report.md").read_text()


def test_an_injected_regression_on_3_critical_queries_exits_3(compose_cfg, baseline: Path,  # type: ignore[no-untyped-def]
                                                              data: Path) -> None:
    cfg = compose_cfg([*overrides(data, baseline / "cache", "broken.jsonl"),
                       f"gates_against={baseline / 'baseline'}", GATES,
                       f"regression.critical.query_ids=[{','.join(CRITICAL)}]"])
    result = run(cfg, baseline / "broken")
    assert result.exit_code == 3
    # the garbled query file is over the same corpus: the configs pair by id, and every
    # document-side artifact of the baseline is reused (the queries are encoded again)
    assert result.cache_hits["chunk"] and result.cache_hits["embed_docs"]
    assert result.cache_hits["index"] and not result.cache_hits["embed_queries"]
    critical = [f for f in result.failed_gates if "critical query" in f]
    assert sorted({f.split()[3] for f in critical}) == CRITICAL
    reg = json.loads((baseline / "broken/run.json").read_text())["regression_gates"]
    assert sorted({c["query_id"] for c in reg["critical"] if c["regressed"]}) == CRITICAL
    report = (baseline / "broken/report.md").read_text()
    assert "## Regression gates vs the baseline: FAILED" in report
    assert all(f"`{q}`" in report for q in CRITICAL)
    root = ET.parse(baseline / "broken" / "gates.junit.xml").getroot()
    failed = [tc.get("name") for tc in root.iter("testcase") if tc.find("failure") is not None]
    assert {n.split()[0] for n in failed if "must not regress" in n} == set(CRITICAL)


def test_a_split_run_warns_of_a_planted_duplicate(compose_cfg, baseline: Path,  # type: ignore[no-untyped-def]
                                                  data: Path) -> None:
    cfg = compose_cfg([*overrides(data, baseline / "cache", "split.jsonl"),
                       "gates=[{metric: ndcg@10, min: 0.1}]"])
    assert run(cfg, baseline / "split").exit_code == 0
    manifest = json.loads((baseline / "split/run.json").read_text())
    sel = manifest["queries_selected"]
    assert sel["split"] == "release" and sel["n_selected"] == sel["by_split"]["release"]
    victim = (data / "victim").read_text()
    dup, doc = manifest["contamination"]["warnings"]
    assert f"planted (development) ~ {victim} (release): identical after normalisation" in dup
    # the copy keeps its gold document, so that document has questions in both splits too
    assert doc.startswith("1 relevant document(s) have questions in two splits")
    report = (baseline / "split/report.md").read_text()
    assert "⚠ Contamination: 1 query pair(s) in two splits are near-duplicates" in report
    assert "split 'release' (default: the dataset has splits)" in report
    suite = ET.parse(baseline / "split" / "gates.junit.xml").getroot()[0]
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["split"] == "release"


def test_a_missing_baseline_stops_before_any_work(compose_cfg, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                  data: Path) -> None:
    cfg = compose_cfg([*overrides(data, tmp_path / "c"), f"gates_against={tmp_path / 'nope'}",
                       GATES])
    with pytest.raises(ConfigError, match=r"gates_against: .* does not exist"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "c").exists()
