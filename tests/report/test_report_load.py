"""Reading run dirs back from files: optional columns, fused latency, multiruns, bad dirs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from report_fixture import DENSE_MS, FUSION_TOTAL_MS, LEXICAL_MS, N_CONFIGS, write_run

from bench.errors import InputError
from bench.report.load import load_runs


def test_loads_every_config_and_composes_fused_latency(run_dir: Path) -> None:
    m = load_runs([run_dir])
    assert [c.key for c in m.configs] == [f"c{i}" for i in range(N_CONFIGS)]
    fused = m.configs[2].latency
    per_query = np.asarray(DENSE_MS) + LEXICAL_MS + FUSION_TOTAL_MS / 6  # 2.5 .. 7.5
    assert fused.p95_ms == pytest.approx(float(np.percentile(per_query, 95)))  # 7.25
    assert fused.p95_ms == pytest.approx(6.5 + 0.75 * 1.0)
    assert fused.p50_ms == pytest.approx(5.0)
    assert fused.source == "sum of inputs: retrieve + lexical + fusion/query"
    assert m.configs[0].latency.source == "search only"
    pruned = m.configs[8]
    assert (pruned.kept, pruned.status) == (False, "pruned")
    # optional columns absent: read as None, run.json has no VRAM
    assert all(c.peak_vram_bytes is None and c.cost_per_query is None for c in m.configs)
    assert m.higher_is_better("ndcg@10") is True


def test_optional_columns_are_read_by_name(tmp_path: Path) -> None:
    d = write_run(tmp_path / "r", extra={
        "status": ["ok"] * 7 + ["failed", "pruned"],
        "peak_vram_bytes": [2**30 * (i + 1) for i in range(N_CONFIGS)],
        "cost_per_query": [0.001 * (i + 1) for i in range(N_CONFIGS)]})
    m = load_runs([d])
    assert m.configs[7].status == "failed" and not m.configs[8].kept
    assert m.configs[3].peak_vram_bytes == 4 * 2**30
    assert m.configs[3].cost_per_query == pytest.approx(0.004)


def test_multirun_prefixes_keys_and_counts_missing_jobs(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    write_run(sweep / "0", run_id="a")
    write_run(sweep / "1", run_id="b")
    (sweep / "2" / ".hydra").mkdir(parents=True)  # a job that never finished
    m = load_runs([sweep])
    assert len(m.configs) == 2 * N_CONFIGS
    assert m.configs[0].key == "sweep/0/c0" and m.configs[0].display == "sweep/0: dense"
    assert m.missing_jobs == ("sweep/2",)


def test_bad_dirs_are_input_errors(tmp_path: Path, run_dir: Path) -> None:
    with pytest.raises(InputError, match="no such run folder"):
        load_runs([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not a run folder"):
        load_runs([tmp_path / "empty"])
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    (broken / "summary.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"summary\.parquet: not a readable Parquet"):
        load_runs([broken])
    (broken / "configs.parquet").unlink()
    with pytest.raises(InputError, match=r"configs\.parquet: missing"):
        load_runs([broken])


def test_latency_is_the_whole_chain_when_end_to_end_is_recorded(tmp_path: Path) -> None:
    # as the pipeline writes a reranked config: p*_ms are its parent's first-stage search,
    # e2e_* add the reranker (here 2.0 + 40.0 ms at p95); a fused>reranked one has only e2e_*
    e2e = [None] * N_CONFIGS
    e2e[3], e2e[2] = 2.0 + 40.0, 7.25 + 30.0
    d = write_run(tmp_path / "r", extra={
        "e2e_p50_ms": [None if v is None else v / 2 for v in e2e], "e2e_p95_ms": e2e,
        "e2e_p99_ms": [None if v is None else v + 1 for v in e2e],
        "n_e2e_samples": [50 if v is not None else 0 for v in e2e]})
    m = load_runs([d])
    rer, fused = m.configs[3].latency, m.configs[2].latency
    assert (rer.p50_ms, rer.p95_ms, rer.p99_ms, rer.n_samples) == (21.0, 42.0, 43.0, 50)
    assert rer.source == fused.source == "e2e: sum along the chain"
    assert fused.p95_ms == pytest.approx(37.25)
    assert m.configs[0].latency.source == "search only"  # no e2e_*: its search figures
