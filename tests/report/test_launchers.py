"""Sweeps on Hydra's launchers (joblib, submitit local, Ray local) with one shared cache.

Each launcher runs 2 workers on an empty cache and must produce exactly the per-query rows of
the sequential (basic launcher) run, with every artifact computed once — counted from the
store's persistent event log, which every worker process appends to. A failing job is
recorded in the sweep report while the others finish, and the exit code says incomplete.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.cache.events import computations, read_events

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

SWEEP = ["index=flat,hnsw", "retriever.k=10,20,50"]  # 6 configs
SMALL = ["index=flat", "retriever.k=10,20"]  # 2 configs, a subset of SWEEP
# Every job runs the packaged static encoder: what is checked is the launchers' processes and
# shared cache, for which any encoder does, and a job that imports no transformer model takes
# about half the seconds of one that does (6 against 12 s a synthetic run, idle box).


def _need(module: str, extra: str = "cluster") -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[{extra}]')")


def _sweep(tmp: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    sweep, cache = tmp / f"sweep-{name}", tmp / f"cache-{name}"
    res = subprocess.run(
        [sys.executable, "-m", "bench", "-m", "dataset=synthetic", "embedder=static_l3",
         f"cache_dir={cache}",
         "metrics.bootstrap_resamples=100", f"hydra.sweep.dir={sweep}", *args],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    return res, sweep, cache


def _rows(sweep: Path) -> dict[str, list[tuple[object, ...]]]:
    """Per job (keyed by its overrides minus the cache folder): sorted per-query rows."""
    out = {}
    for job in sweep.iterdir():
        if not (job / "per_query.parquet").is_file():
            continue
        items = [ln.removeprefix("- ").strip()
                 for ln in (job / ".hydra" / "overrides.yaml").read_text().splitlines()]
        key = " ".join(i for i in items if i and not i.startswith("cache_dir="))
        rows = pq.read_table(job / "per_query.parquet").to_pylist()
        out[key] = sorted((r["config_id"], r["query_id"], r["metric"], r["value"], r["status"])
                          for r in rows)
    return out


@pytest.fixture(scope="module")
def sequential(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[object, ...]]]:
    res, sweep, _ = _sweep(tmp_path_factory.mktemp("seq"), "seq", *SWEEP)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(sweep)
    assert len(rows) == 6
    return rows


def _check_parallel(res: subprocess.CompletedProcess[str], sweep: Path, cache: Path,
                    expected: dict[str, list[tuple[object, ...]]], n_jobs: int) -> None:
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(sweep)
    assert len(rows) == n_jobs
    for key, got in rows.items():
        assert got == expected[key], key
    counts = computations(cache)
    assert counts and set(counts.values()) == {1}, counts  # nothing computed twice
    events = read_events(cache)
    assert len({e["pid"] for e in events}) == 2  # really two worker processes
    report = (sweep / "sweep_report.md").read_text()
    assert f"{n_jobs} finished jobs" in report and "Sweep exit code: 0" in report
    shared = [(s, k) for (s, k) in counts
              if sum(e["key"] == k for e in events if e["event"] in ("hit", "wait", "miss")) > 1]
    print(f"\n{sweep.name}: {len(counts)} artifacts computed once each, "
          f"{len(shared)} shared by several jobs; events "
          f"{ {k: sum(e['event'] == k for e in events) for k in ('miss', 'wait', 'hit')} }")


def test_joblib_two_workers_six_configs(sequential, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _need("hydra_plugins.hydra_joblib_launcher")
    res, sweep, cache = _sweep(tmp_path, "joblib", "hydra/launcher=joblib",
                               "hydra.launcher.n_jobs=2", *SWEEP)
    _check_parallel(res, sweep, cache, sequential, 6)


def test_submitit_local_two_workers(sequential, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _need("hydra_plugins.hydra_submitit_launcher")
    res, sweep, cache = _sweep(tmp_path, "submitit", "hydra/launcher=submitit_local", *SMALL)
    _check_parallel(res, sweep, cache, sequential, 2)


def test_ray_local_two_workers(sequential, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _need("hydra_plugins.hydra_ray_launcher")
    _need("ray")
    res, sweep, cache = _sweep(tmp_path, "ray", "hydra/launcher=ray",
                               "+hydra.launcher.ray.init.num_cpus=2", *SMALL)
    _check_parallel(res, sweep, cache, sequential, 2)


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]],
                         ids=["basic", "joblib"])
def test_failing_job_is_reported_and_others_finish(tmp_path: Path, launcher: list[str]) -> None:
    if launcher:
        _need("hydra_plugins.hydra_joblib_launcher")
    # job 0 is a bad value; the basic launcher used to stop there with no sweep report
    res, sweep, _ = _sweep(tmp_path, "fail", *launcher, "index=flat", "chunker.size=0,128")
    assert res.returncode == 4, res.stderr[-3000:]
    assert "bench: sweep incomplete: 1 job(s) failed" in res.stderr
    assert "Traceback" not in res.stderr
    report = (sweep / "sweep_report.md").read_text()
    assert "1 finished jobs" in report
    assert "| failed | ConfigError: config key chunker.size: must be >= 1 token, got 0 |" in report
    status = json.loads((sweep / "sweep_status.json").read_text())
    assert status["finished"] == ["1"] and status["exit_code"] == 4
    print("\n" + "\n".join(ln for ln in report.splitlines() if "failed" in ln or "exit" in ln))
