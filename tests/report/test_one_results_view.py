"""One typed view of finished results: the in-run comparisons, ``bench.compare``, its
multi-config modes, the merged report and the sweep report read the same records and pair
values by the same rule, so a comparison is the same numbers whoever computes it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.compare import compare
from bench.compare.runs import load_configs
from bench.errors import InputError
from bench.pipeline.run import run
from bench.report.drilldown import all_pairs
from bench.report.load import load_run, record_of
from bench.report.sweep import collect
from bench.results.records import Comparison, ConfigRow, SummaryRow
from bench.results.run_dir import load_side


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    tmp = tmp_path_factory.mktemp("view")
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=[
            "dataset=synthetic", "lexical=bm25", "fusion=rrf", f"cache_dir={tmp / 'c'}",
            "metrics.bootstrap_resamples=300"])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    out = tmp / "run"
    assert run(cfg, out).exit_code == 0
    return out


def test_bench_compare_reproduces_the_runs_own_comparisons(synthetic_run: Path) -> None:
    """Every comparisons.parquet row (scope all) is what bench.compare computes from the
    files at the run's resamples, seed and confidence: same n, means, delta, CI and p."""
    cfg = json.loads((synthetic_run / "run.json").read_text())["config"]
    rows = [record_of(Comparison, r) for r in
            pq.read_table(synthetic_run / "comparisons.parquet").to_pylist()]
    assert rows and cfg["metrics"]["confidence"] == 0.95  # compare's CI level
    checked = 0
    for c in rows:
        if c.scope != "all":
            continue
        a = load_side(synthetic_run, c.baseline_config_id, "--config-a")
        b = load_side(synthetic_run, c.config_id, "--config-b")
        got = compare(a, b, [c.metric], resamples=cfg["metrics"]["bootstrap_resamples"],
                      seed=cfg["seed"])["overall"][c.metric]  # type: ignore[index]
        assert (got["n"], got["mean_a"], got["mean_b"], got["delta"]) == (
            c.n, c.mean_baseline, c.mean_config, c.delta)
        assert (got["ci_low"], got["ci_high"], got["p_value"]) == pytest.approx(
            (c.ci_low, c.ci_high, c.p_value), rel=0, abs=1e-12)
        checked += 1
    assert checked >= 4


def test_every_reader_sees_the_same_typed_records(synthetic_run: Path) -> None:
    run_data = load_run(synthetic_run)
    views = run_data.configs
    assert all(isinstance(c.row, ConfigRow) for c in views)
    assert all(isinstance(s, SummaryRow) for c in views for s in c.summary.values())
    assert all(isinstance(c, Comparison) for c in run_data.comparisons)
    # bench.compare's modes read the same views and the same per-query scores
    loaded = load_configs([synthetic_run])
    assert [c.view.config_id for c in loaded.configs] == [c.config_id for c in views
                                                         if c.kept]
    for lc in loaded.configs:
        side = load_side(synthetic_run, lc.view.config_id, "--config-a")
        assert side.query_ids == lc.scores.query_ids
        assert all((side.values[m] == lc.scores.values[m]).sum()
                   == lc.scores.valued(m).sum() for m in side.values)
    # the sweep report's rows are the view's numbers (a run dir read as one job)
    sweep = synthetic_run.parent / "sweep"
    (sweep / "0").mkdir(parents=True)
    for f in synthetic_run.iterdir():
        if f.is_file():
            (sweep / "0" / f.name).write_bytes(f.read_bytes())
    rows, missing = collect(sweep, "ndcg@10")
    assert missing == []
    for r, c in zip(rows, views, strict=True):
        s = c.mean("ndcg@10")
        assert (r.config_id, r.mean, r.e2e_p95_ms) == (
            c.config_id, None if s is None else s.mean, c.row.e2e_p95_ms)
    # the merged report's all-pairs table pairs like the run: dense vs the next config
    pairs = {(p["a"], p["b"]): p for p in all_pairs([run_data], "ndcg@10",
                                                     resamples=300, seed=0)}
    base, other = views[0], views[1]
    first = next(c for c in run_data.comparisons
                 if (c.config_id, c.scope, c.metric) == (other.config_id, "all", "ndcg@10"))
    got = pairs[(base.key, other.key)]
    assert (got["n"], got["delta"]) == (first.n, first.delta)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((first.ci_low, first.ci_high))


def test_an_older_file_reads_missing_columns_as_defaults(synthetic_run: Path,
                                                         tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    for f in synthetic_run.iterdir():
        if f.is_file():
            (old / f.name).write_bytes(f.read_bytes())
    t = pq.read_table(old / "configs.parquet")
    keep = [c for c in t.column_names if c not in ("status", "cost_per_query",
                                                   "n_e2e_samples", "ttft_p50_ms")]
    pq.write_table(t.select(keep), old / "configs.parquet")
    views = load_run(old).configs
    assert all(c.row.cost_per_query is None and c.row.ttft_p50_ms is None for c in views)
    assert all(c.row.n_e2e_samples == 0 and c.status == "ok" for c in views)


@pytest.mark.parametrize("damage", ["nan", "twice"])
def test_a_per_query_file_that_would_give_a_wrong_number_is_refused(
        synthetic_run: Path, tmp_path: Path, damage: str) -> None:
    t = pq.read_table(synthetic_run / "per_query.parquet")
    rows = t.to_pylist()
    if damage == "nan":
        rows[3] = {**rows[3], "value": float("nan")}
    else:
        rows.append(rows[3])
    path = tmp_path / "per_query.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), path)
    want = "is NaN" if damage == "nan" else "appears twice"
    with pytest.raises(InputError, match=want):
        load_side(path, rows[3]["config_id"], "--config-a")
