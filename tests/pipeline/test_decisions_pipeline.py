"""Pre-registered decisions in the run: validated before any work, evaluated after scoring,
written to run.json and report.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.errors import ConfigError
from bench.pipeline.run import run

RULE = ("decisions=[{name: bm25_over_dense, baseline: dense, candidate: bm25, "
        "metric: ndcg@10, min_gain: 0.0, guardrails: {recall@100: -1.0}}]")


def test_a_rule_is_evaluated_and_reported(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg = compose_cfg(["dataset=synthetic", "lexical=bm25", f"cache_dir={tmp_path / 'c'}",
                       "metrics.bootstrap_resamples=200", RULE])
    assert run(cfg, tmp_path / "run").exit_code == 0
    (rec,) = json.loads((tmp_path / "run/run.json").read_text())["preregistered_decisions"]
    assert rec["name"] == "bm25_over_dense" and rec["verdict"] in ("adopt", "reject",
                                                                   "inconclusive")
    assert len(rec["rule_hash"]) == 64 and rec["reasons"]
    report = (tmp_path / "run/report.md").read_text()
    assert "## Pre-registered decisions" in report and rec["rule_hash"][:12] in report


def test_a_rule_naming_no_config_of_the_run_stops_before_any_work(compose_cfg,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path / 'c'}",
                       RULE.replace("candidate: bm25", "candidate: nope")])
    with pytest.raises(ConfigError, match=r"decisions\[0\]\.candidate"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").rglob("_meta.json"))
