"""The judge stage's writer end to end on the synthetic corpus with the scripted generator:
the calibration loop through real runs — a gate on faithfulness refused before any work
without a calibration record, let through with ``uncalibrated: allow`` and reported first,
verdicts written for labelling on the calibration split, labels back through
``bench.calibrate --records``, and the same gate accepted on the release split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.calibrate import main as calibrate_main
from bench.data.synthetic import SyntheticDataset
from bench.errors import ConfigError
from bench.judge.labelling import LABELLING_FILE
from bench.pipeline.run import run

ECHO = "generator._target_=tests.pipeline.test_generation_plan.EchoGenerator"
GATE = "+gates=[{metric: faithfulness, min: 0.0}, {metric: unsupported_numbers, max: 1.0}]"


def _overrides(cache: Path, splits: Path, split: str, records: Path, *extra: str) -> list[str]:
    return ["+experiment=quickstart", "dataset=synthetic", f"cache_dir={cache}",
            "metrics.bootstrap_resamples=100", "report.plot=false", ECHO, "judge=suite",
            "judge.judges=[faithfulness,unsupported_numbers]", "generation.max_queries=8",
            f"subset.splits={splits}", f"subset.split={split}",
            f"judge.calibration.records={records}", *extra]


@pytest.mark.slow
def test_gate_refused_then_allowed_then_accepted_after_calibration(compose_cfg,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path) -> None:
    queries = SyntheticDataset(n_docs=60, n_queries=24, seed=0).load().queries
    splits = tmp_path / "splits.jsonl"
    splits.write_text("".join(json.dumps({"query_id": q.query_id,
                                          "split": "calibration" if i % 2 else "release"}) + "\n"
                              for i, q in enumerate(queries)))
    cache, records = tmp_path / "cache", tmp_path / "records"

    # 1. no record: refused before any work, naming the gate
    with pytest.raises(ConfigError) as exc:
        run(compose_cfg(_overrides(cache, splits, "release", records, GATE)), tmp_path / "r0")
    assert exc.value.key == "gates[0].metric" and "no calibration record" in str(exc.value)
    assert not any(p.is_file() for p in cache.rglob("*"))

    # 2. allowed explicitly: the run completes and the report says so first
    allowed = run(compose_cfg(_overrides(cache, splits, "release", records, GATE,
                                         "judge.calibration.uncalibrated=allow")),
                  tmp_path / "r1")
    assert allowed.exit_code == 0
    report = (tmp_path / "r1" / "report.md").read_text()
    assert "**UNCALIBRATED JUDGE GATES**" in report and "`gates[0].metric` faithfulness" in report
    assert "| unsupported_numbers |" in report
    manifest = json.loads((tmp_path / "r1" / "run.json").read_text())
    assert manifest["stages"]["judge_files"]["uncalibrated_gates"][0]["metric"] == "faithfulness"

    # 3. a run on the calibration split writes the verdicts for labelling
    run(compose_cfg(_overrides(cache, splits, "calibration", records)), tmp_path / "r2")
    rows = [json.loads(x) for x in (tmp_path / "r2" / LABELLING_FILE).read_text().splitlines()]
    assert rows and {r["split"] for r in rows} == {"calibration"}
    assert {r["judge"] for r in rows} == {"faithfulness"}  # verifiers need no labels
    scored = [r for r in rows if r["status"] == "ok"]
    assert scored and all(r["answer"] and r["query"] and "human" in r for r in scored)
    # labels by construction (a test of the loop, not a calibration): the human agrees with
    # every verdict but the first. The scripted judge approves every scored answer, so
    # kappa = (p_o - p_e) / (1 - p_e) with p_o = p_e = (n - 1) / n: 0
    assert {r["approve"] for r in scored} == {True}
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": r["item_id"], "human": i > 0}) + "\n"
                              for i, r in enumerate(scored)))
    assert calibrate_main([str(labels), str(tmp_path / "r2" / LABELLING_FILE), "--records",
                           str(records), "--resamples", "50"]) == 0
    rec = json.loads((records / "faithfulness.json").read_text())
    assert rec["metrics"]["faithfulness"]["kappa"][0] == pytest.approx(0.0)
    assert rec["metrics"]["faithfulness"]["false_approval"][0] == 1.0

    # 4. a record below the floor (0.4 by default) is refused too ...
    with pytest.raises(ConfigError, match=r"kappa 0\.000 < floor 0\.4"):
        run(compose_cfg(_overrides(cache, splits, "release", records, GATE)), tmp_path / "r3")
    # ... and a record that clears the configured floor accepts the same gate, reported clean
    ok = run(compose_cfg(_overrides(cache, splits, "release", records, GATE,
                                    "judge.calibration.floor=0.0")), tmp_path / "r4")
    assert ok.exit_code == 0
    assert "UNCALIBRATED" not in (tmp_path / "r4" / "report.md").read_text()


@pytest.mark.slow
def test_pairwise_verdicts_labelled_and_calibrated(  # type: ignore[no-untyped-def]
        compose_cfg, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = SyntheticDataset(n_docs=60, n_queries=24, seed=0).load().queries
    splits = tmp_path / "splits.jsonl"
    splits.write_text("".join(json.dumps({"query_id": q.query_id, "split": "calibration"})
                              + "\n" for q in queries))
    over = [o for o in _overrides(tmp_path / "cache", splits, "calibration", tmp_path / "rec")
            if not o.startswith("judge")]
    res = run(compose_cfg([*over, "judge=pairwise", "reranker=maxsim", "reranker.depths=[10]"]),
              tmp_path / "r")
    assert res.exit_code == 0
    rows = [json.loads(x) for x in (tmp_path / "r" / LABELLING_FILE).read_text().splitlines()]
    assert rows and {(r["judge"], r["kind"]) for r in rows} == {("pairwise", "preference")}
    ok = [r for r in rows if r["status"] == "ok"]
    # the scripted judge names the first answer shown in both orders: every ok pair a tie
    assert ok and {r["score"] for r in ok} == {0.5}
    assert all(r["answer"] and r["answer_b"] for r in ok)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": r["item_id"],
                                          "human": "a" if i == 0 else "tie"}) + "\n"
                              for i, r in enumerate(ok)))
    assert calibrate_main([str(labels), str(tmp_path / "r" / LABELLING_FILE),
                           "--resamples", "20"]) == 0
    table = capsys.readouterr().out
    [line] = [x for x in table.splitlines() if x.startswith("pairwise ") and " all " in x]
    # agreement: every label but the first is the judge's tie
    assert f"{(len(ok) - 1) / len(ok):.4f}" in line
