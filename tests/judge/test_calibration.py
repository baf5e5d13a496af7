"""The calibration loop: labelling rows in, human labels, agreement with CIs, records, and the
release-gate check that refuses an uncalibrated judge metric and accepts a calibrated one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.calibrate import main
from bench.errors import ConfigError, InputError
from bench.judge.calibration import (
    Boot,
    Calibration,
    MetricAgreement,
    Stat,
    _rate,
    agreement_table,
    bootstrap,
    records_of,
    write_records,
)
from bench.judge.faithfulness import FaithfulnessJudge
from bench.judge.gating import CalibrationPolicy, check_calibrated_gates, gated_metrics
from bench.judge.labelling import Item, read_human, read_labelling
from bench.judge.relevancy import AnswerRelevancyJudge
from bench.judge.rubric import rubric
from bench.judge.suite import JudgeSuite
from tests.judge.scripted import ScriptedGenerator

FAITH = rubric("faithfulness").digest
REL = rubric("answer_relevancy").digest


def _row(qid: str, judge: str, metric: str, kind: str, score: float | None, approve: bool | None,
         *, category: str = "a", split: str = "calibration", status: str = "ok",
         digest: str = FAITH) -> dict[str, object]:
    return {"item_id": f"c:{qid}:{metric}", "config_id": "c", "query_id": qid,
            "category": category, "split": split, "dataset": "foldoc", "judge": judge,
            "metric": metric, "kind": kind, "rubric": digest, "status": status,
            "score": score, "approve": approve, "rationale": "", "query": "q", "answer": "a",
            "context": [], "human": None}


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _faith_items() -> list[dict[str, object]]:
    # judge approves q1, q2, q5 (score 1.0) and rejects q3, q4 (score < 1)
    return [_row("q1", "faithfulness", "faithfulness", "ratio", 1.0, True),
            _row("q2", "faithfulness", "faithfulness", "ratio", 1.0, True),
            _row("q3", "faithfulness", "faithfulness", "ratio", 0.5, False, category="b"),
            _row("q4", "faithfulness", "faithfulness", "ratio", 0.0, False, category="b"),
            _row("q5", "faithfulness", "faithfulness", "ratio", 1.0, True, category="b"),
            _row("q6", "faithfulness", "faithfulness", "ratio", 1.0, True, split="release")]


def test_binary_agreement_kappa_and_error_rates_by_hand(tmp_path: Path) -> None:
    items = read_labelling(_jsonl(tmp_path / "l.jsonl", _faith_items()))
    human = read_human(_jsonl(tmp_path / "h.jsonl", [
        {"item_id": "c:q1:faithfulness", "human": True},
        {"item_id": "c:q2:faithfulness", "human": False},  # a false approval
        {"item_id": "c:q3:faithfulness", "human": False},
        {"item_id": "c:q4:faithfulness", "human": True},  # a false rejection
        {"item_id": "c:q5:faithfulness", "human": True},
        {"item_id": "c:q6:faithfulness", "human": True},  # release split: left out
    ]))
    cal = agreement_table(items, human, labels_path="h.jsonl", resamples=200)
    assert (cal.n_labelled, cal.n_other_split) == (6, 1)
    a = cal.results[0]
    assert (a.metric, a.scope, a.n) == ("faithfulness", "all", 5)
    # human (T, F, F, T, T) vs judge (T, T, F, F, T): p_o = 3/5;
    # p_e = P(h=T) P(j=T) + P(h=F) P(j=F) = 3/5 * 3/5 + 2/5 * 2/5 = 13/25
    assert a.kappa.value == pytest.approx((3 / 5 - 13 / 25) / (1 - 13 / 25))
    assert a.false_approval.value == pytest.approx(1 / 2)  # of 2 human rejections, 1 approved
    assert a.false_rejection.value == pytest.approx(1 / 3)  # of 3 human approvals, 1 rejected
    lo, hi = a.false_approval.ci_low, a.false_approval.ci_high
    assert lo is not None and hi is not None and lo <= 0.5 <= hi
    assert [r.scope for r in cal.results] == ["all", "category:a", "category:b"]


def test_graded_labels_weighted_kappa_and_spearman(tmp_path: Path) -> None:
    rows = [_row(f"q{i}", "answer_relevancy", "answer_relevancy", "graded", float(s), s >= 4,
                 digest=REL) for i, s in enumerate([5, 4, 2, 1, 3], start=1)]
    items = read_labelling(_jsonl(tmp_path / "l.jsonl", rows))
    human = read_human(_jsonl(tmp_path / "h.jsonl", [
        {"item_id": f"c:q{i}:answer_relevancy", "human": h}
        for i, h in enumerate([5, 5, 2, 1, 3], start=1)]))
    [a, *_] = agreement_table(items, human, labels_path="h", resamples=100).results
    assert a.spearman is not None and a.weighted_kappa is not None
    # judge (5, 4, 2, 1, 3) vs human (5, 5, 2, 1, 3): ranks agree but for one tie
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    assert a.spearman.value == pytest.approx(spearmanr([5, 5, 2, 1, 3], [5, 4, 2, 1, 3])[0])
    assert a.weighted_kappa.value == pytest.approx(
        cohen_kappa_score([5, 5, 2, 1, 3], [5, 4, 2, 1, 3], weights="quadratic"))
    assert a.false_rejection.value == 0.0  # human approvals (>= 4): q1, q2; judge approves both


def test_rate_and_bootstrap_of_a_constant() -> None:
    assert _rate([(False, True), (False, False), (True, True)], False) == 1 / 2
    assert _rate([(True, True)], False) is None
    s = bootstrap(lambda xs: sum(xs) / len(xs), [1.0] * 10, Boot(50, 0, 0.9))
    assert (s.value, s.ci_low, s.ci_high, s.n_boot) == (1.0, 1.0, 1.0, 50)


def test_labels_matching_no_verdict_is_one_line_exit_2(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    lab = _jsonl(tmp_path / "l.jsonl", _faith_items())
    bad = _jsonl(tmp_path / "h.jsonl", [{"item_id": "nope", "human": True}])
    assert main([str(bad), str(lab)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{bad}:1: ") and "matches a verdict" in err and "\n" not in err
    graded_for_pref = _jsonl(tmp_path / "g.jsonl", [{"item_id": "c:q1:faithfulness",
                                                     "human": "tie"}])
    assert main([str(graded_for_pref), str(lab)]) == 2
    assert "does not fit a ratio score" in capsys.readouterr().err


def test_cli_table_and_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = _jsonl(tmp_path / "l.jsonl", _faith_items())
    human = _jsonl(tmp_path / "h.jsonl", [
        {"item_id": f"c:q{i}:faithfulness", "human": h}
        for i, h in enumerate([True, True, False, False, True], start=1)])
    assert main([str(human), str(lab), "--records", str(tmp_path / "rec"),
                 "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "false_approval" in out and "category:b" in out
    rec = json.loads((tmp_path / "rec" / "faithfulness.json").read_text())
    assert (rec["judge"], rec["rubric"], rec["split"], rec["dataset"]) == (
        "faithfulness", FAITH, "calibration", "foldoc")
    assert rec["metrics"]["faithfulness"]["kappa"][0] == pytest.approx(1.0)


def _suite() -> JudgeSuite:
    return JudgeSuite(generator=ScriptedGenerator(lambda r: ""),
                      judges=["faithfulness", "unsupported_numbers"])


def _record(tmp_path: Path, kappa: float, digest: str = FAITH) -> Path:
    items = [Item(f"c:q{i}:faithfulness", "faithfulness", "faithfulness", "ratio", "a",
                  "calibration", "foldoc", digest, "ok", 1.0, True) for i in range(2)]
    s = Stat(kappa, kappa - 0.1, kappa + 0.1, 100)
    cal = Calibration("calibration", 2, 0, (MetricAgreement(
        "faithfulness", "faithfulness", "all", 2, 0, s, s, s, None, None, 1.0),), tuple(items))
    labels = _jsonl(tmp_path / "labels.jsonl", [])
    write_records(records_of(cal, labels, 0.95), tmp_path / "records")
    return tmp_path / "records"


def test_gate_refused_uncalibrated_then_accepted_after_calibration(tmp_path: Path) -> None:
    gates = [("gates[0].metric", "unsupported_numbers"), ("gates[1].metric", "faithfulness")]
    block = {"records": str(tmp_path / "records")}
    kw = {"dataset": "foldoc", "evaluated": {"release"}}
    # no record: refused, naming the gate's key; the verifier's gate needs none
    with pytest.raises(ConfigError, match=r"config key gates\[1\]\.metric: faithfulness .*"
                                          r"no calibration record"):
        check_calibrated_gates(gates, _suite(), block, **kw)
    # allowed explicitly: let through and reported
    [u] = check_calibrated_gates(gates, _suite(), {**block, "uncalibrated": "allow"}, **kw)
    assert (u.key, u.metric, u.judge) == ("gates[1].metric", "faithfulness", "faithfulness")
    # a record below the floor is refused; one above it is accepted
    _record(tmp_path, 0.2)
    with pytest.raises(ConfigError, match=r"kappa 0\.200 < floor 0\.4"):
        check_calibrated_gates(gates, _suite(), block, **kw)
    _record(tmp_path, 0.7)
    assert check_calibrated_gates(gates, _suite(), block, **kw) == []
    # ... unless the run evaluates the calibration split itself, or the rubric moved
    with pytest.raises(ConfigError, match=r"evaluates queries of the 'calibration' split"):
        check_calibrated_gates(gates, _suite(), block, dataset="foldoc",
                               evaluated={"calibration"})
    _record(tmp_path, 0.7, digest="0" * 64)
    with pytest.raises(ConfigError, match="recalibrate"):
        check_calibrated_gates(gates, _suite(), block, **kw)
    with pytest.raises(ConfigError, match=r"judge\.calibration\.floor_x"):
        CalibrationPolicy.of({"floor_x": 1})


def test_rubric_hash_is_in_the_cache_key_and_records() -> None:
    j = FaithfulnessJudge(generator=ScriptedGenerator(lambda r: ""))
    assert j.cache_params()["rubric"] == FAITH and len(FAITH) == 64
    assert AnswerRelevancyJudge(generator=ScriptedGenerator(lambda r: "")).rubric.digest == REL


def test_unlabelled_and_bad_human_rows(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no labelled row"):
        read_human(_jsonl(tmp_path / "h.jsonl", [{"item_id": "x", "human": None}]))
    with pytest.raises(InputError, match=r"h2.jsonl:1: .*'human'"):
        read_human(_jsonl(tmp_path / "h2.jsonl", [{"item_id": "x", "human": [1]}]))


def test_regression_gates_are_release_gates_too(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from bench.config.schema import GateConfig

    settings = SimpleNamespace(gates=[GateConfig(metric="e2e_p95_ms", max=1.0)],
                               regression=SimpleNamespace(rules=[SimpleNamespace(
                                   metric="faithfulness")]))
    keys = gated_metrics(settings)
    assert keys == [("gates[0].metric", "e2e_p95_ms"),
                    ("regression.gates[0].metric", "faithfulness")]
    with pytest.raises(ConfigError, match=r"regression\.gates\[0\]\.metric: faithfulness"):
        check_calibrated_gates(keys, _suite(), {"records": str(tmp_path)}, dataset="foldoc",
                               evaluated={""})
