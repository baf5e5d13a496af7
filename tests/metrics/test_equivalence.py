"""Cheapest equivalent config: TOST against the best on every metric, then the lowest cost."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs_fixture import write_summary

from bench.compare import main
from bench.metrics.equivalence import CostedConfig, best_config, cheapest_equivalent
from bench.results.scores import ConfigScores, scores_from_long

N = 400
RNG = np.random.default_rng(5)
BASE = RNG.random(N)
BASE_R = RNG.random(N)


def _values(shift: float, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # noise with its sample mean removed: the mean delta vs "exact" is exactly the shift
    r = np.random.default_rng(seed)
    e1, e2 = r.normal(0, noise, N), r.normal(0, noise, N)
    return BASE + shift + e1 - e1.mean(), BASE_R + shift / 2 + e2 - e2.mean()


#: (key, cost, ndcg shift, noise): "exact" is the best; "ef64" is within 0.005 of it with
#: little noise (equivalent within 0.02); "ef16" is 0.06 worse (not equivalent); "ef32" is
#: 0.004 worse but so noisy that its interval leaves +-0.02 (not shown equivalent)
CONFIGS = [("exact", 9.0, 0.0, 0.0), ("ef64", 4.0, -0.005, 0.02),
           ("ef16", 1.0, -0.06, 0.02), ("ef32", 2.0, -0.004, 0.35)]


def _scores(key: str, shift: float, noise: float, seed: int) -> ConfigScores:
    nd, rc = _values(shift, noise, seed)
    qids = [f"q{i}" for i in range(N)]
    cats = ["a" if i % 2 else "b" for i in range(N)]
    return scores_from_long(key, qids * 2, cats * 2, ["ndcg@10"] * N + ["recall@100"] * N,
                            [*nd.tolist(), *rc.tolist()], ["scored"] * (2 * N))


def _costed() -> list[CostedConfig]:
    return [CostedConfig(k, k.upper(), cost, _scores(k, s, n, i))
            for i, (k, cost, s, n) in enumerate(CONFIGS)]


def test_picks_the_cheapest_equivalent() -> None:
    configs = _costed()
    assert best_config(configs, "ndcg@10") == "exact"
    r = cheapest_equivalent(configs, metrics=["ndcg@10", "recall@100"], margin=0.02)
    assert [x.key for x in r.rows] == ["ef16", "ef32", "ef64", "exact"]  # by cost
    verdict = {x.key: x.equivalent for x in r.rows}
    assert verdict == {"ef16": False, "ef32": False, "ef64": True, "exact": True}
    assert r.chosen == "ef64"
    ef16 = next(x for x in r.rows if x.key == "ef16")
    assert any(reason.startswith("ndcg@10: delta -0.06") for reason in ef16.reasons)
    # a margin wide enough for ef16 picks it; a margin too tight for ef64 leaves the best
    assert cheapest_equivalent(configs, metrics=["ndcg@10"], margin=0.08).chosen == "ef16"
    assert cheapest_equivalent(configs, metrics=["ndcg@10"], margin=0.004).chosen == "exact"


def test_no_cost_cannot_be_chosen_and_best_is_a_choice() -> None:
    configs = _costed()
    configs[1] = CostedConfig("ef64", "EF64", None, configs[1].scores)
    r = cheapest_equivalent(configs, metrics=["ndcg@10"], margin=0.02)
    assert r.chosen == "exact" and r.rows[-1].key == "ef64"  # uncosted last
    # against ef16 as the reference nothing else is within 0.02
    r = cheapest_equivalent(configs, metrics=["ndcg@10"], margin=0.02, best="ef16")
    assert (r.best, r.chosen) == ("ef16", "ef16")
    with pytest.raises(ValueError, match="not among"):
        cheapest_equivalent(configs, metrics=["ndcg@10"], margin=0.02, best="nope")


def _write_job(d: Path, configs: list[tuple[str, float, float, float]], seeds: list[int],
               fingerprint: str = "fp") -> None:
    d.mkdir(parents=True)
    (d / ".hydra").mkdir()
    (d / "run.json").write_text(json.dumps({"dataset": {"fingerprint": fingerprint}}))
    pq.write_table(pa.Table.from_pylist([
        {"config_id": k, "label": k.upper(), "status": "ok", "pruned_reason": None,
         "e2e_p95_ms": cost, "index_bytes": int(cost * 1000)} for k, cost, _, _ in configs]),
        d / "configs.parquet")
    rows = []
    for (k, _, s, n), seed in zip(configs, seeds, strict=True):
        nd, rc = _values(s, n, seed)
        for i in range(N):
            cat = "a" if i % 2 else "b"
            rows.append({"config_id": k, "query_id": f"q{i}", "category": cat,
                         "metric": "ndcg@10", "value": float(nd[i]), "status": "scored"})
            rows.append({"config_id": k, "query_id": f"q{i}", "category": cat,
                         "metric": "recall@100", "value": float(rc[i]), "status": "scored"})
    pq.write_table(pa.Table.from_pylist(rows), d / "per_query.parquet")
    write_summary(d, rows)


def test_cli_over_a_multirun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "sweep"
    _write_job(sweep / "0", CONFIGS[:2], [0, 1])
    _write_job(sweep / "1", CONFIGS[2:], [2, 3])
    (sweep / "2" / ".hydra").mkdir(parents=True)  # a job that did not finish
    argv = [str(sweep), "--cheapest-equivalent", "--margin", "0.02", "--metric", "ndcg@10",
            "recall@100"]
    assert main([*argv, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["best"], out["chosen"], out["cost"]) == ("sweep/0/exact", "sweep/0/ef64",
                                                         "e2e_p95_ms")
    assert out["skipped"] == ["sweep/2 (no results)"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "cheapest equivalent: sweep/0/ef64 (EF64), e2e_p95_ms 4 vs the best's 9" in text
    assert "90 % t interval" in text
    # by index size, with the reference named by label
    assert main([*argv, "--cost", "index_bytes", "--best", "EF16", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] == "sweep/1/ef16"


@pytest.mark.parametrize("extra, needle", [
    (["--margin", "0"], "--margin"),
    (["--margin", "0.02", "--cost", "nope"], "--cost 'nope'"),
    (["--margin", "0.02", "--metric", "mrr"], "--metric 'mrr'"),
    (["--margin", "0.02", "--best", "zzz"], "--best 'zzz'"),
])
def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                       needle: str) -> None:
    _write_job(tmp_path / "run", CONFIGS[:2], [0, 1])
    argv = [str(tmp_path / "run"), "--cheapest-equivalent", "--metric", "ndcg@10"]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_cli_refuses_runs_on_different_datasets(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _write_job(tmp_path / "a", CONFIGS[:2], [0, 1], fingerprint="one")
    _write_job(tmp_path / "b", CONFIGS[2:], [2, 3], fingerprint="two")
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--cheapest-equivalent",
                 "--margin", "0.02", "--metric", "ndcg@10"]) == 2
    assert "another dataset" in capsys.readouterr().err


def test_two_run_equivalence_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_job(tmp_path / "a", CONFIGS[:1], [0])
    _write_job(tmp_path / "b", CONFIGS[1:2], [1])
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--equivalence", "0.02",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    nd = out["overall"]["ndcg@10"]
    assert nd["equivalent"] is True and nd["tost_ci_low"] > -0.02 and nd["tost_p"] < 0.05
    assert out["equivalence"] == {"margin": 0.02, "alpha": 0.05, "interval": "90 % t"}
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--equivalence", "0.001"]) == 0
    assert "equivalence (TOST)" in capsys.readouterr().out
    assert main([str(tmp_path / "a")]) == 2
    assert "two run dirs" in capsys.readouterr().err
