"""``python -m bench.power``: MDE and n needed from a run's per_query.parquet."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.metrics.power import z_sum
from bench.power import main
from bench.results.schema import PER_QUERY, SCHEMA_VERSION


def _write(run_dir: Path, configs: dict[str, np.ndarray]) -> Path:
    run_dir.mkdir()
    rows = []
    for cid, vals in configs.items():
        for i, v in enumerate(vals):
            rows.append((cid, f"q{i}", "long" if i % 3 == 0 else "short", "ndcg@10", float(v)))
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    pq.write_table(pa.Table.from_pydict({
        "schema_version": [SCHEMA_VERSION] * n, "run_id": ["r"] * n,
        "config_id": list(cols[0]), "query_id": list(cols[1]), "category": list(cols[2]),
        "metric": list(cols[3]), "value": list(cols[4]), "status": ["scored"] * n,
    }, schema=PER_QUERY), run_dir / "per_query.parquet")
    return run_dir


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:  # type: ignore[type-arg]
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_assumed_correlation_from_one_config(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    v = np.random.default_rng(0).random(300)
    run = _write(tmp_path / "r", {"base": v})
    out = _json(capsys, [str(run), "--target-effect", "0.02"])
    assert out["comparisons"] == 1 and "assumed" in out["basis"]
    rows = {r["scope"]: r for r in out["rows"]}
    assert list(rows) == ["all", "category:long", "category:short"]
    s = float(np.std(v, ddof=1))  # rho 0.5: sd_delta = s
    k = z_sum(alpha=0.05, power=0.8)
    assert rows["all"]["sd_delta"] == pytest.approx(s)
    assert rows["all"]["mde"] == pytest.approx(k * s / math.sqrt(300))
    assert rows["all"]["n_needed"] == [math.ceil((k * s / 0.02) ** 2)]
    long = rows["category:long"]  # 100 of 300 queries: the golden set needs 3x its n
    assert long["n"] == 100 and long["n_total_needed"] == [math.ceil(long["n_needed"][0] * 3)]
    # a category without spread (every value 1.0) sizes nothing
    flat = _write(tmp_path / "flat", {"base": np.where(np.arange(300) % 3 == 0, 1.0, v)})
    rows_flat = {r["scope"]: r for r in _json(capsys, [str(flat), "--target-effect", "0.02"])
                 ["rows"]}
    assert rows_flat["category:long"]["mde"] is None
    assert rows_flat["category:long"]["n_needed"] == [None]
    # rho 0 (independent): sqrt(2) times wider
    wide = _json(capsys, [str(run), "--correlation", "0"])["rows"][0]
    assert wide["mde"] == pytest.approx(math.sqrt(2) * rows["all"]["mde"])


def test_observed_deltas_and_multiplicity(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    a = rng.random(200)
    b = np.clip(a + rng.normal(0, 0.1, 200), 0, 1)
    run = _write(tmp_path / "r", {"A": a, "B": b, "C": rng.random(200)})
    out = _json(capsys, [str(run), "--against", "B"])
    assert out["comparisons"] == 2 and out["baseline"] == "A"  # 3 configs: 2 compared with A
    row = out["rows"][0]
    sd = float(np.std(b - a, ddof=1))
    assert row["sd_delta"] == pytest.approx(sd)
    assert row["mde"] == pytest.approx(z_sum(alpha=0.05, power=0.8, comparisons=2) * sd
                                       / math.sqrt(200))
    stated = _json(capsys, [str(run), "--sd", "0.2", "--comparisons", "1", "--alpha", "0.1"])
    assert stated["rows"][0]["mde"] == pytest.approx(
        (1.644854 + 0.841621) * 0.2 / math.sqrt(200), rel=1e-5)
    assert main([str(run), "--against", "B"]) == 0
    text = capsys.readouterr().out
    assert "Bonferroni level 0.025" in text and "category:long" in text


@pytest.mark.parametrize("argv, needle", [
    (["--alpha", "1.2"], "--alpha"),
    (["--target-effect", "0"], "--target-effect"),
    (["--metric", "mrr"], "not in"),
    (["--config", "nope"], "no config"),
    (["--correlation", "1"], "--correlation"),
])
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               argv: list[str], needle: str) -> None:
    run = _write(tmp_path / "r", {"A": np.linspace(0, 1, 20)})
    assert main([str(run), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err
