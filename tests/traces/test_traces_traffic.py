"""``+experiment=traffic`` (bench.traces.traffic): the windows, the serve overrides, a bad
setting refused before any work, a failed step said in the report with exit 1, and the whole
loop end to end on the synthetic corpus with real ``bench.serve`` processes (the production
config writing spans through the OpenTelemetry SDK, two candidates)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.data.synthetic import SyntheticDataset
from bench.errors import ConfigError
from bench.traces.traffic import TrafficSettings, build_windows, run_loop, serve_overrides
from bench.traces.traffic_report import LoopResult, Step, report_md, write_report

REPO = Path(__file__).resolve().parents[2]
SETTINGS = TrafficSettings(per_window=20, rate_rps=20.0, absent_category="multi_doc",
                           pii_requests=2, candidates={"hnsw": ["index=hnsw"]})


def _bench(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'kernels'}", "HF_HUB_OFFLINE": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_windows_are_disjoint_and_the_injected_one_carries_the_absent_category() -> None:
    ds = SyntheticDataset(n_docs=60, n_queries=120).load()
    w = build_windows(ds, SETTINGS)
    ids = [q.query_id for v in w.values() for q in v]
    assert len(ids) == len(set(ids)) == 3 * 20
    assert not any(q.category == "multi_doc" for q in w["reference"] + w["clean"])
    assert sum(q.category == "multi_doc" for q in w["injected"]) == 10
    assert build_windows(ds, SETTINGS) == w  # seeded


def test_too_few_questions_name_the_key() -> None:
    ds = SyntheticDataset(n_docs=60, n_queries=24).load()  # 6 per category
    with pytest.raises(ConfigError, match=r"hydra\.callbacks\.traffic\.injected_share"):
        build_windows(ds, SETTINGS)
    with pytest.raises(ConfigError, match=r"hydra\.callbacks\.traffic\.per_window"):
        TrafficSettings(per_window=10, candidates={"a": ["index=hnsw"]}).check()
    with pytest.raises(ConfigError, match="candidates"):
        TrafficSettings().check()


def test_the_server_gets_the_run_config_without_the_experiment() -> None:
    over = serve_overrides(["+experiment=traffic", "dataset=synthetic", "cache_dir=x",
                            "hydra.run.dir=/tmp/r", "retriever.k=5"], "/abs/cache")
    assert over == ["dataset=synthetic", "retriever.k=5", "cache_dir=/abs/cache"]


def test_a_bad_setting_is_one_line_and_exit_2_before_the_run(tmp_path: Path) -> None:
    p = _bench("+experiment=traffic", "dataset=synthetic", f"cache_dir={tmp_path / 'c'}",
               f"hydra.run.dir={tmp_path / 'run'}", "hydra.callbacks.traffic.per_window=5",
               cwd=tmp_path, timeout=120)
    assert p.returncode == 2, p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert err == ["bench: error: config key hydra.callbacks.traffic.per_window: must be >= 20 "
                   "(the drift tests' minimum window), got 5"]
    assert not (tmp_path / "c").exists()  # nothing computed


def test_a_failed_step_is_said_and_exits_1(tmp_path: Path) -> None:
    ds = SyntheticDataset(n_docs=60, n_queries=120).load()
    # a config id the run does not have: the production server refuses to start
    res = run_loop(SETTINGS, dataset=ds, out=tmp_path, serve_overrides=[
        "dataset=synthetic", "dataset.n_queries=120", "config=nope", "device=cpu",
        f"cache_dir={tmp_path / 'cache'}"])
    assert res.exit_code == 1
    assert [(s.name, s.status) for s in res.steps] == [
        ("serve", "failed"), *[(n, "not run") for n in ("import", "evaluations", "sample",
                                                       "drift", "guardrails", "replay")]]
    md = write_report(res, tmp_path).read_text()
    assert md.startswith("# Production-traffic loop") and "**FAILED** at step `serve`" in md
    assert "serve.config" in md and "Traceback" not in md
    assert "## Shadow replay" not in md and "## Drift" not in md
    assert json.loads((tmp_path / "traffic.json").read_text())["exit_code"] == 1


@pytest.mark.slow  # the run and three bench.serve processes load MiniLM (~2 min on 2 busy cores)
def test_the_loop_end_to_end(tmp_path: Path) -> None:
    run = tmp_path / "run"
    p = _bench("+experiment=traffic", "dataset=synthetic", "dataset.n_queries=120",
               "device=cpu", "metrics.bootstrap_resamples=200", f"cache_dir={tmp_path / 'c'}",
               f"hydra.run.dir={run}", "hydra.callbacks.traffic.per_window=20",
               "hydra.callbacks.traffic.rate_rps=20",
               "hydra.callbacks.traffic.absent_category=multi_doc",
               "hydra.callbacks.traffic.pii_requests=2", cwd=tmp_path, timeout=900)
    md = (run / "traffic.md").read_text() if (run / "traffic.md").exists() else ""
    assert p.returncode == 0, f"{p.stderr[-3000:]}\n{md}"
    res = json.loads((run / "traffic.json").read_text())
    assert [s["status"] for s in res["steps"]] == ["ok"] * 7
    assert all(c["ok"] for c in res["checks"]) and len(res["checks"]) == 10
    # the spans came from the server's SDK exporter, and every request became a record
    first = json.loads((run / "spans.jsonl").read_text().splitlines()[0])
    scope = first["resourceSpans"][0]["scopeSpans"][0]
    assert scope["spans"] and first["resourceSpans"][0]["resource"]["attributes"]
    imp = res["imported"]
    assert imp["format"] == "otlp" and imp["records"] == 60 == res["traffic"]["requests"]
    assert imp["docs_resolved"] == 60 * 10 and imp["records_with_pii"] == 2
    assert imp["partial"] == {"no_generation_span": 60} and imp["skipped"] == {}
    # hit@10 events: every request whose question has a relevant document, read back as written
    windows = build_windows(SyntheticDataset(n_docs=60, n_queries=120).load(), SETTINGS)
    answerable = sum(1 for w in windows.values() for q in w if q.qrels)
    ev = res["evaluations"]
    assert ev["written"] == ev["read_back"] == ev["on_imported_spans"] == answerable
    assert 0 < answerable < 60  # the synthetic `unanswerable` questions have none
    assert res["drift"]["injected"]["alarm"] and not res["drift"]["clean"]["alarm"]
    regen = {o["rule"]: o for o in res["guardrails"]["injected"]}["regeneration_rate"]
    assert regen["status"] == "alert" and regen["deploys"] == ["injected-change"]
    cost = {o["rule"]: o for o in res["guardrails"]["clean"]}["cost_per_query_usd"]
    assert cost["status"] == "no_data"  # retrieve-only requests carry no tokens or cost
    rows = {r["candidate"]: r for r in res["replay"]}
    assert set(rows) == {"production (control)", "hnsw_ef16", "ivf_nprobe1"}
    n = res["sample"]["sampled"] - sum(1 for ln in (run / "sample.jsonl").read_text()
                                       .splitlines() if json.loads(ln)["record"]["pii_scrubbed"])
    assert all(r["n"] == n and not r["failed"] for r in rows.values())
    assert rows["production (control)"]["overlap"]["mean"] == 1.0
    for r in rows.values():
        assert 0.0 <= r["overlap"]["ci_low"] <= r["overlap"]["mean"] <= r["overlap"]["ci_high"]
        assert r["p50_ms"]["value"] > 0
    md = (run / "traffic.md").read_text()
    assert "**Complete**" in md and "## Shadow replay of the sample" in md
    assert md == report_md(_loaded(res))


def _loaded(data: dict) -> LoopResult:
    """The LoopResult of a traffic.json (its report must be the one on disk)."""
    keep = {k: v for k, v in data.items() if k != "exit_code"}
    keep["steps"] = [Step(**s) for s in keep["steps"]]
    return LoopResult(**keep)
