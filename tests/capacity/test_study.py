"""A whole capacity study against real served replicas of the synthetic service (2 slots x
40 ms each): every step runs, the files are written, and a rerun resumes every level."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.capacity.backends import HttpBackend, PoolBackend
from bench.capacity.faults import Fault
from bench.capacity.metrics import import_vllm
from bench.capacity.report import write_study
from bench.capacity.servers import synthetic
from bench.capacity.study import LevelStore, StudySettings, run_study, study_key

SETTINGS = StudySettings(
    slo_ms={"e2el": 400.0}, level_seconds=1.5, level_min_requests=20,
    level_max_requests=80,
    knee_start_rps=10.0, knee_repeats=1, knee_max_repeats=2, knee_max_levels=5,
    knee_max_seconds=30, ceiling_limit_ms=1e4, ceiling_seconds=0.5, ceiling_max_rps=100,
    ceiling_min_requests=20,
    closed_users=2, sweep_shares=[0.5, 1.0], replicas=2, scale_knee_max_levels=2,
    faults=(Fault("restart", at_s=0.3),),
    price_per_hour=2.0, unloaded_queries=6)


@pytest.mark.slow
def test_study_runs_every_step_and_resumes(tmp_path: Path) -> None:
    def start(i: int):  # type: ignore[no-untyped-def]
        return synthetic(slots=2, service_ms=40, tokens=4,
                         log_path=tmp_path / f"replica{i}.log").start()

    def study():  # type: ignore[no-untyped-def]
        be = HttpBackend(start, path="/v1/answer", body=lambda q: {"query": q}, n_queries=6,
                         name="synthetic", work_dir=tmp_path)
        store = LevelStore(tmp_path / "levels", study_key(be.name, SETTINGS))
        try:
            return asyncio.run(run_study(be, SETTINGS, store=store,
                                         score=lambda q, a: float(a == f"answer {q}")))
        finally:
            be.close()

    st = study()
    # a generous limit: the ceiling's mechanics, not this loaded machine's figure
    assert st.ceiling is not None and st.ceiling.rate_rps == 100
    assert st.unloaded.n_requests == 6 and st.unloaded.quality_mean == 1.0
    assert st.closed.mode == "closed" and st.open_same_load is not None
    assert st.knee.probes and st.knee.levels_run <= 5
    assert len(st.sweep) == 2 and len(st.quality) == 2
    assert all(q.delta_vs_unloaded is not None for q in st.quality)
    assert st.scale_out is not None and st.scale_out.p95_measured_ms is not None
    assert [f.fault for f in st.faults] == ["restart"]
    assert all(f.survived for f in st.faults)
    assert st.cost["per_1m_queries"] is not None
    files = write_study(st, tmp_path / "capacity")
    md = (tmp_path / "capacity" / "capacity.md").read_text()
    for part in ("Closed loop vs open loop", "### Knee", "Quality under load", "Scale-out",
                 "### Faults", "per 1M correct answers"):
        assert part in md
    assert json.loads(files[0].read_text())["knee"]["attainment"] == 0.9
    vllm = sorted((tmp_path / "capacity" / "vllm").glob("*.json"))
    assert vllm and import_vllm(vllm[0]).n_requests == 6
    assert files[2].stat().st_size > 10_000

    again = study()  # the same plan: every level comes from levels/
    assert again.resumed_levels >= st.knee.levels_run + 2
    assert again.knee.rate_rps == st.knee.rate_rps


def test_pool_backend_has_no_faults() -> None:
    be = PoolBackend(lambda q: f"answer {q}", n_queries=3, name="fn")
    assert be.fault_rig() is None
