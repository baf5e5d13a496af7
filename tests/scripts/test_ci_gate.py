"""scripts/ci_gate.sh and .github/workflows/bench-gate.yml: every mode's bench command line
composes and validates (no stale key), and the workflow runs the modes it documents."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from bench.pipeline.validate import validate_top_level
from bench.results import schema
from bench.results.records import PerQueryRow
from bench.results.write import write_records

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "bench-gate.yml"


def argv(tmp_path: Path, *args: str) -> list[str]:
    """The arguments ci_gate.sh hands to ``$PY -m bench`` (PY replaced by a recorder)."""
    record = tmp_path / "argv.json"
    fake = tmp_path / "python"
    fake.write_text(f"#!/usr/bin/env python3\nimport json, sys\n"
                    f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    fake.chmod(0o755)
    subprocess.run([str(ROOT / "scripts" / "ci_gate.sh"), *args], check=True,
                   env=dict(os.environ, PY=str(fake)), timeout=60)
    got = json.loads(record.read_text())
    assert got[:2] == ["-m", "bench"]
    return got[2:]


@pytest.mark.parametrize("mode", ["baseline", "pr", "nightly", "nightly-first"])
def test_every_mode_composes_and_validates(mode: str, tmp_path: Path, compose_cfg) -> None:  # type: ignore[no-untyped-def]
    # a baseline holding the gated metrics (the real one is a quickstart run)
    base = tmp_path / "base"
    base.mkdir()
    write_records([PerQueryRow("c1", f"q{i}", "exact_lookup", m, 0.5, "scored")
                   for i in range(4) for m in ("ndcg@10", "recall@100", "mrr")],
                  schema.PER_QUERY, base / "per_query.parquet", "run")
    args = {"baseline": ["baseline", "OUT"], "pr": ["pr", str(base), "OUT"],
            "nightly": ["nightly", str(base), "OUT"],
            "nightly-first": ["nightly", "none", "OUT"]}[mode]
    got = argv(tmp_path, *args)
    assert "hydra.run.dir=OUT" in got
    overrides = [a for a in got if not a.startswith("hydra.")]
    cfg = compose_cfg(overrides)
    validate_top_level(cfg)
    gated = mode in ("pr", "nightly")
    assert (cfg.gates_against is not None) is gated
    assert (cfg.subset.max_queries is not None) is (mode in ("baseline", "pr"))
    # every mode keeps the critical queries, so baseline and gated subsets are the same
    assert list(cfg.regression.critical.query_ids) == ["foldoc2:q0001", "foldoc2:q0003",
                                                       "foldoc2:q0005"]


def test_an_unknown_mode_is_exit_2(tmp_path: Path) -> None:
    out = subprocess.run([str(ROOT / "scripts" / "ci_gate.sh"), "weekly", "x"],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PY="false"))
    assert out.returncode == 2 and "unknown mode 'weekly'" in out.stderr


def test_the_workflow_runs_each_mode_and_publishes_the_junit_file() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    steps = wf["jobs"]["bench"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any("scripts/ci_gate.sh baseline runs/subset" in r for r in runs)
    assert any("scripts/ci_gate.sh pr baseline runs/pr" in r for r in runs)
    assert any('scripts/ci_gate.sh nightly "$base" runs/nightly' in r for r in runs)
    junit = next(s for s in steps if s.get("uses", "").startswith("mikepenz/action-junit"))
    assert junit["with"]["report_paths"] == "runs/*/gates.junit.xml"
    assert junit["if"] == "always()"
    # the PR job downloads exactly what the push job uploads
    up = next(s for s in steps if s.get("with", {}).get("name") == "bench-baseline-subset"
              and s["uses"].startswith("actions/upload-artifact"))
    down = next(s for s in steps if s.get("with", {}).get("name") == "bench-baseline-subset"
                and "download" in s["uses"])
    assert up["with"]["path"] == "runs/subset" and down["with"]["path"] == "baseline"
    triggers = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads `on` as a boolean
    assert set(triggers) >= {"pull_request", "push", "schedule"}
