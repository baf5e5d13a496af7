"""``python -m bench.compare``: paired comparison of two run dirs' per_query.parquet."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.compare import main
from bench.results.schema import PER_QUERY, SCHEMA_VERSION


def _write(run_dir: Path, rows: list[tuple[str, str, str, str, float]]) -> Path:
    run_dir.mkdir()
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    table = pa.Table.from_pydict({
        "schema_version": [SCHEMA_VERSION] * n, "run_id": ["r"] * n,
        "config_id": list(cols[0]), "query_id": list(cols[1]), "category": list(cols[2]),
        "metric": list(cols[3]), "value": list(cols[4]), "status": ["scored"] * n,
    }, schema=PER_QUERY)
    pq.write_table(table, run_dir / "per_query.parquet")
    return run_dir


def _rows(config: str, shift: float, queries: range) -> list[tuple[str, str, str, str, float]]:
    rng = np.random.default_rng(0)
    base = rng.random(100)
    out = []
    for q in queries:
        cat = "short" if q % 2 else "long"
        out.append((config, f"q{q}", cat, "ndcg@10", float(min(1.0, base[q] + shift))))
        out.append((config, f"q{q}", cat, "mrr", float(base[q])))
    return out


def test_json_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a", _rows("base", 0.0, range(60)))
    b = _write(tmp_path / "b", [*_rows("new", 0.1, range(5, 60)), ("new", "x", "long", "mrr", 1.0)])
    assert main([str(a), str(b), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    nd = out["overall"]["ndcg@10"]
    assert (nd["n"], nd["unpaired_a"], nd["unpaired_b"]) == (55, 5, 0)
    assert out["overall"]["mrr"]["unpaired_b"] == 1
    assert nd["delta"] > 0.05 and nd["ci_low"] > 0 and nd["p_value"] < 0.01
    assert nd["higher_is_better"] is True
    mrr = out["overall"]["mrr"]
    assert (mrr["delta"], mrr["p_value"], mrr["p_holm"]) == (0.0, 1.0, 1.0)
    assert nd["p_holm"] == pytest.approx(min(1.0, 2 * nd["p_value"]))
    assert set(out["per_category"]) == {"long", "short"}
    assert out["per_category"]["short"]["ndcg@10"]["n"] == 28  # odd q in 5..59


def test_table_and_metric_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a", _rows("base", 0.0, range(20)))
    b = _write(tmp_path / "b", _rows("new", 0.1, range(20)))
    assert main([str(a), str(b), "--metric", "mrr"]) == 0
    text = capsys.readouterr().out
    assert "mrr" in text and "ndcg@10" not in text and "category:long" in text


def test_several_configs_need_a_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    a = _write(tmp_path / "a", _rows("c1", 0.0, range(10)) + _rows("c2", 0.1, range(10)))
    assert main([str(a), str(a)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "configs c1, c2:" in err and "--config-a" in err
    assert main([str(a), str(a), "--config-a", "c1", "--config-b", "c2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["config_b"] == "c2"


def test_missing_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope"), str(tmp_path / "nope")]) == 2
    assert "per_query.parquet" in capsys.readouterr().err


def _write_labels(run_dir: Path, labels: dict[str, str]) -> None:
    n = len(labels)
    table = pa.table({
        "config_id": list(labels), "label": list(labels.values()),
        "kind": ["dense"] * n}).append_column("run_id", pa.array(["r"] * n))
    pq.write_table(table, run_dir / "configs.parquet")


def test_configs_chosen_by_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a", _rows("c1", 0.0, range(10)) + _rows("c2", 0.1, range(10)))
    _write_labels(a, {"c1": "dense flat", "c2": "bm25"})
    assert main([str(a), str(a), "--config-a", "dense flat", "--config-b", "bm25",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["config_a"], out["config_b"]) == ("c1", "c2")
    assert main([str(a), str(a)]) == 2  # the error shows ids with their labels
    assert "c1 (dense flat), c2 (bm25)" in capsys.readouterr().err


def _corrupt(run_dir: Path) -> None:
    run_dir.mkdir()
    (run_dir / "per_query.parquet").write_bytes(b"PAR1 this is not parquet PAR1")


def _truncated(run_dir: Path) -> None:
    _write(run_dir, _rows("c1", 0.0, range(10)))
    data = (run_dir / "per_query.parquet").read_bytes()
    (run_dir / "per_query.parquet").write_bytes(data[: len(data) // 2])


def _nan(run_dir: Path) -> None:
    _write(run_dir, [*_rows("c1", 0.0, range(5)), ("c1", "q9", "long", "mrr", float("nan"))])


def _ambiguous_label(run_dir: Path) -> None:
    _write(run_dir, _rows("c1", 0.0, range(5)) + _rows("c2", 0.0, range(5)))
    _write_labels(run_dir, {"c1": "same", "c2": "same"})


def _corrupt_configs(run_dir: Path) -> None:
    _write(run_dir, _rows("c1", 0.0, range(5)) + _rows("c2", 0.0, range(5)))
    (run_dir / "configs.parquet").write_bytes(b"garbage")


HOSTILE_COMPARE = {
    "not parquet": (_corrupt, [], "not a readable Parquet file"),
    "truncated parquet": (_truncated, [], "not a readable Parquet file"),
    "NaN value": (_nan, [], "'mrr' of query 'q9' is NaN"),
    "ambiguous label": (_ambiguous_label, ["--config-a", "same", "--config-b", "c2"],
                        "label 'same' names configs"),
    "unknown label": (_ambiguous_label, ["--config-a", "nope", "--config-b", "c2"],
                      "no config with id or label 'nope'"),
    "corrupt configs.parquet": (_corrupt_configs, ["--config-a", "x", "--config-b", "c2"],
                                "configs.parquet: not a readable Parquet file"),
}


@pytest.mark.parametrize("case", list(HOSTILE_COMPARE))
def test_hostile_input_is_one_line_exit_2(case: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    make, argv, words = HOSTILE_COMPARE[case]
    make(tmp_path / "a")
    assert main([str(tmp_path / "a"), str(tmp_path / "a"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and words in err
