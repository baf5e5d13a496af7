"""Pre-registered decisions: adopt / reject / inconclusive from paired per-query values."""

from __future__ import annotations

import json
import math
import types
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf
from runs_fixture import write_summary

from bench.compare import main
from bench.config.schema import BenchConfig
from bench.errors import ConfigError
from bench.metrics import decisions
from bench.metrics.decisions import (
    DecisionRule,
    Guardrail,
    evaluate_decisions,
    rule_hash,
    rules_from_config,
)
from bench.metrics.power import n_needed
from bench.metrics.stats import paired_compare
from bench.results.scores import ConfigScores, scores_from_long

N = 600
RNG = np.random.default_rng(0)
ND = RNG.random(N)
RC = RNG.random(N)
CATS = ["long" if i % 3 == 0 else "short" for i in range(N)]


def _noise(sd: float, seed: int) -> np.ndarray:
    e = np.random.default_rng(seed).normal(0, sd, N)
    return e - e.mean()  # the mean delta is exactly the shift


def _scores(cid: str, nd: np.ndarray, rc: np.ndarray) -> ConfigScores:
    qids = [f"q{i}" for i in range(N)]
    return scores_from_long(cid, qids * 2, CATS * 2, ["ndcg@10"] * N + ["recall@100"] * N,
                            [*nd.tolist(), *rc.tolist()], ["scored"] * (2 * N))


def _rule(**kw: object) -> DecisionRule:
    base = {"name": "r", "baseline": "A", "candidate": "B", "metric": "ndcg@10",
            "min_gain": 0.02, "guardrails": (Guardrail("recall@100", -0.01),)}
    return DecisionRule(**{**base, **kw})  # type: ignore[arg-type]


def _run(b_nd: np.ndarray, b_rc: np.ndarray, rule: DecisionRule | None = None):  # type: ignore[no-untyped-def]
    scores = {"A": _scores("A", ND, RC), "B": _scores("B", b_nd, b_rc)}
    return evaluate_decisions([rule or _rule()], scores, resamples=1000, seed=0)[0]


def test_adopt_when_the_gain_clears_and_the_guardrail_holds() -> None:
    r = _run(ND + 0.06 + _noise(0.05, 1), RC + _noise(0.02, 2))
    assert r.verdict == "adopt" and r.n_needed is None
    primary, guard = r.checks
    assert (primary.role, primary.outcome, guard.role, guard.outcome) == (
        "primary", "pass", "guardrail", "pass")
    # the CI is the run's paired bootstrap CI, same seed and resamples
    cmp = paired_compare(ND, ND + 0.06 + _noise(0.05, 1), resamples=1000, seed=0)
    assert (primary.gain, primary.ci_low, primary.ci_high) == pytest.approx(
        (cmp.delta, cmp.ci_low, cmp.ci_high))
    assert primary.ci_low >= 0.02 and "lower bound >= min gain +0.02" in r.reasons[0]


def test_reject_when_the_upper_bound_is_below_the_min_gain() -> None:
    r = _run(ND + 0.005 + _noise(0.05, 1), RC.copy())
    assert r.verdict == "reject" and r.checks[0].outcome == "fail"
    assert r.checks[0].ci_high < 0.02 and "upper bound < min gain" in r.reasons[0]


def test_reject_when_a_guardrail_breaks_its_budget() -> None:
    r = _run(ND + 0.06 + _noise(0.05, 1), RC - 0.05 + _noise(0.02, 2))
    assert r.verdict == "reject"
    assert [c.outcome for c in r.checks] == ["pass", "fail"]
    assert r.reasons[1].startswith("guardrail recall@100 at all -0.0500")


def test_inconclusive_names_the_n_that_would_tell() -> None:
    b = ND + 0.03 + _noise(0.25, 3)
    r = _run(b, RC.copy())
    primary = r.checks[0]
    assert r.verdict == "inconclusive" and primary.outcome == "unclear"
    assert primary.ci_low < 0.02 <= primary.ci_high
    sd = float(np.std(b - ND, ddof=1))
    # at the observed gain 0.03, its distance 0.01 from the min gain is the effect to see
    assert primary.n_needed == n_needed(sd, 0.03 - 0.02, alpha=0.05, power=0.8)
    assert r.n_needed == primary.n_needed_total == primary.n_needed  # scope "all"
    assert "would resolve it" in r.reasons[0]


def test_scopes_check_each_category_and_scale_the_golden_set() -> None:
    # the long third gains 0.06, the short two thirds gain 0.025 with noise
    shift = np.where(np.asarray(CATS) == "long", 0.06, 0.025)
    b = ND + shift + _noise(0.2, 4)
    r = _run(b, RC.copy(), _rule(scopes=("category:long", "category:short"), guardrails=()))
    by = {c.scope: c for c in r.checks}
    assert by["category:long"].n == 200 and by["category:short"].n == 400
    unclear = [c for c in r.checks if c.outcome == "unclear"]
    assert unclear and r.verdict == "inconclusive"
    for c in unclear:
        assert c.n_needed_total == math.ceil(c.n_needed * N / c.n)  # type: ignore[operator]
    assert r.n_needed == max(c.n_needed_total for c in unclear)  # type: ignore[type-var]


def test_lower_is_better_metric_flips_the_gain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decisions, "find_metric",
                        lambda name: types.SimpleNamespace(higher_is_better=False))
    # B's values DROP by 0.06: a gain of +0.06 on a lower-is-better metric
    r = _run(ND - 0.06 + _noise(0.05, 1), RC.copy(), _rule(guardrails=()))
    assert r.verdict == "adopt" and r.checks[0].gain == pytest.approx(0.06)


def test_missing_values_and_unknown_configs() -> None:
    pruned = scores_from_long("B", [f"q{i}" for i in range(N)], CATS, ["ndcg@10"] * N,
                              [None] * N, ["pruned"] * N)
    r = evaluate_decisions([_rule(guardrails=())], {"A": _scores("A", ND, RC), "B": pruned})[0]
    assert r.verdict == "inconclusive" and r.checks[0].outcome == "missing"
    assert r.n_needed is None and "cannot be judged" in r.reasons[0]
    with pytest.raises(ValueError, match="candidate 'C' is not a config"):
        evaluate_decisions([_rule(candidate="C")], {"A": _scores("A", ND, RC)})


def test_rule_hash_is_canonical_and_moves_with_the_rule() -> None:
    two = (Guardrail("recall@100", -0.01), Guardrail("mrr", -0.02))
    h = rule_hash(_rule(guardrails=two), confidence=0.95, power=0.8)
    assert len(h) == 64
    assert h == rule_hash(_rule(guardrails=two[::-1]), confidence=0.95, power=0.8)
    assert h != rule_hash(_rule(guardrails=two, min_gain=0.01), confidence=0.95, power=0.8)
    assert h != rule_hash(_rule(guardrails=two), confidence=0.9, power=0.8)
    rec = _run(ND + 0.06 + _noise(0.05, 1), RC.copy())
    assert json.loads(rec.rule_json)["guardrails"] == [["recall@100", -0.01]]


def test_rules_from_config_and_the_schema() -> None:
    raw = {"decisions": [{"name": "rrf_over_dense", "baseline": "dense", "candidate": "rrf",
                          "metric": "ndcg@10", "min_gain": 0.02,
                          "guardrails": {"recall@100": -0.01}}]}
    cfg = OmegaConf.merge(OmegaConf.structured(BenchConfig), raw)
    items = OmegaConf.to_container(cfg.decisions)
    (rule,) = rules_from_config(items)  # type: ignore[arg-type]
    assert rule.scopes == ("all",) and rule.guardrails == (Guardrail("recall@100", -0.01),)
    bad = [({"min_gain": "x"}, "decisions[0].min_gain"),
           ({"guardrails": {"recall@100": 0.01}}, "decisions[0].guardrails.recall@100"),
           ({"scopes": ["cat:x"]}, "decisions[0].scopes[0]"),
           ({"candidate": "dense"}, "decisions[0].candidate"),
           ({"nope": 1}, "decisions[0].nope")]
    for change, key in bad:
        with pytest.raises(ConfigError) as err:
            rules_from_config([{**raw["decisions"][0], **change}])
        assert err.value.key == key
    with pytest.raises(ConfigError, match=r"decisions\[1\]\.name"):
        rules_from_config([raw["decisions"][0], raw["decisions"][0]])


def _write_run(d: Path, decisions_cfg: list[dict[str, object]] | None) -> Path:
    d.mkdir()
    config = {"seed": 0, "metrics": {"confidence": 0.95, "bootstrap_resamples": 500},
              "decisions": decisions_cfg or []}
    (d / "run.json").write_text(json.dumps({"dataset": {"fingerprint": "fp"},
                                            "config": config}))
    pq.write_table(pa.Table.from_pylist([
        {"config_id": "c0", "label": "dense", "status": "ok", "pruned_reason": None},
        {"config_id": "c1", "label": "rrf", "status": "ok", "pruned_reason": None}]),
        d / "configs.parquet")
    b_nd, b_rc = ND + 0.06 + _noise(0.05, 1), RC + _noise(0.02, 2)
    rows = []
    for cid, nd, rc in (("c0", ND, RC), ("c1", b_nd, b_rc)):
        for i in range(N):
            for metric, v in (("ndcg@10", nd[i]), ("recall@100", rc[i])):
                rows.append({"config_id": cid, "query_id": f"q{i}", "category": CATS[i],
                             "metric": metric, "value": float(v), "status": "scored"})
    pq.write_table(pa.Table.from_pylist(rows), d / "per_query.parquet")
    write_summary(d, rows)
    return d


RULE = {"name": "rrf_over_dense", "baseline": "dense", "candidate": "rrf", "metric": "ndcg@10",
        "min_gain": 0.02, "guardrails": {"recall@100": -0.01}}


def test_decide_cli_from_run_json_and_from_a_rules_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_run(tmp_path / "run", [RULE])
    assert main([str(run), "--decide", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (rec,) = out["decisions"]
    assert (out["source"], rec["verdict"], rec["baseline"], rec["candidate"]) == (
        "run.json", "adopt", "c0", "c1")
    assert main([str(run), "--decide"]) == 0
    text = capsys.readouterr().out
    assert "rrf_over_dense: ADOPT — c1 (rrf) over c0 (dense)" in text and "500 resamples" in text
    # a rules file replaces the run's rules: a 0.1 minimum gain is out of reach
    rules = tmp_path / "rules.yaml"
    rules.write_text("decisions:\n  - name: big\n    baseline: c0\n    candidate: c1\n"
                     "    metric: ndcg@10\n    min_gain: 0.1\n")
    assert main([str(run), "--decide", "--rules", str(rules), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["decisions"][0]["verdict"] == "reject"


def test_decide_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_run(tmp_path / "run", None)
    assert main([str(run), "--decide"]) == 2
    assert "no 'decisions'" in capsys.readouterr().err
    rules = tmp_path / "rules.yaml"
    rules.write_text("decisions:\n  - name: x\n    baseline: c0\n    candidate: c1\n"
                     "    metric: ndcg@10\n    min_gain: lots\n")
    assert main([str(run), "--decide", "--rules", str(rules)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rules.yaml" in err and "decisions[0].min_gain" in err
    rules.write_text("decisions:\n  - name: x\n    baseline: c0\n    candidate: zz\n"
                     "    metric: ndcg@10\n")
    assert main([str(run), "--decide", "--rules", str(rules)]) == 2
    assert "candidate 'zz' is not a config" in capsys.readouterr().err
