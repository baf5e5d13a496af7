"""``+experiment=traffic`` (bench.traces.traffic): the windows, the serve overrides, a bad
setting refused before any work, a failed step said in the report with exit 1, and the whole
loop end to end on the synthetic corpus with real ``bench.serve`` processes (the production
config writing spans through the OpenTelemetry SDK, two candidates)."""

from __future__ import annotations

import dataclasses
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
                           pii_requests=2, candidates={"hnsw": ["index=hnsw"]},
                           answer_with=["generator=transformers_cpu", "config=generated"])


def _bench(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'kernels'}", "HF_HUB_OFFLINE": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_windows_are_disjoint_and_the_injected_one_carries_the_absent_category() -> None:
    ds = SyntheticDataset(n_docs=60, n_queries=120).load()
    w = build_windows(ds, SETTINGS)
    ids = [q.query_id for v in w.values() for q in v]
    assert len(ids) == len(set(ids)) == 3 * 20 + 4  # and the 4 questions production answers
    assert not any(q.category == "multi_doc" for q in w["reference"] + w["clean"] + w["answered"])
    assert sum(q.category == "multi_doc" for q in w["injected"]) == 10
    assert build_windows(ds, SETTINGS) == w  # seeded
    # the answered questions are drawn after the windows: without them the windows are the same
    no_answers = build_windows(ds, dataclasses.replace(SETTINGS, answers=0))
    assert "answered" not in no_answers and all(no_answers[k] == w[k] for k in no_answers)


def test_too_few_questions_name_the_key() -> None:
    ds = SyntheticDataset(n_docs=60, n_queries=24).load()  # 6 per category
    with pytest.raises(ConfigError, match=r"hydra\.callbacks\.traffic\.injected_share"):
        build_windows(ds, SETTINGS)
    with pytest.raises(ConfigError, match=r"hydra\.callbacks\.traffic\.per_window"):
        TrafficSettings(per_window=10, candidates={"a": ["index=hnsw"]}).check()
    with pytest.raises(ConfigError, match="candidates"):
        TrafficSettings().check()
    with pytest.raises(ConfigError, match=r"traffic\.answer_with: production answers"):
        TrafficSettings(candidates={"a": ["index=hnsw"]}).check()  # answers 8, no generator
    assert TrafficSettings(candidates={"a": ["index=hnsw"]}, answers=0).check()
    with pytest.raises(ConfigError, match=r"traffic\.judges: 'refusal'"):
        dataclasses.replace(SETTINGS, judges=["faithfulness", "refusal"]).check()


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
    # a config the run does not have: the production server refuses to start
    bad = dataclasses.replace(SETTINGS, answer_with=["generator=transformers_cpu", "config=nope"])
    res = run_loop(bad, dataset=ds, out=tmp_path, serve_overrides=[
        "dataset=synthetic", "dataset.n_queries=120", "device=cpu",
        f"cache_dir={tmp_path / 'cache'}"])
    assert res.exit_code == 1
    assert [(s.name, s.status) for s in res.steps] == [
        ("serve", "failed"), *[(n, "not run") for n in (
            "import", "evaluations", "sample", "drift", "quality", "guardrails", "replay",
            "judge", "review")]]
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
               "hydra.callbacks.traffic.pii_requests=2", "hydra.callbacks.traffic.answers=2",
               cwd=tmp_path, timeout=900)
    md = (run / "traffic.md").read_text() if (run / "traffic.md").exists() else ""
    assert p.returncode == 0, f"{p.stderr[-3000:]}\n{md}"
    res = json.loads((run / "traffic.json").read_text())
    assert [s["status"] for s in res["steps"]] == ["ok"] * 10
    assert all(c["ok"] for c in res["checks"]) and len(res["checks"]) == 13
    # the spans came from the server's SDK exporter, and every request became a record
    first = json.loads((run / "spans.jsonl").read_text().splitlines()[0])
    scope = first["resourceSpans"][0]["scopeSpans"][0]
    assert scope["spans"] and first["resourceSpans"][0]["resource"]["attributes"]
    imp = res["imported"]
    # 60 requests of the windows and 2 answered ones (with a generation span)
    assert imp["format"] == "otlp" and imp["records"] == 62 == res["traffic"]["requests"] + 2
    assert imp["docs_resolved"] == 62 * 10 and imp["records_with_pii"] == 2
    assert imp["partial"] == {"no_generation_span": 60} and imp["skipped"] == {}
    # hit@10 events: every request whose question has a relevant document, read back as written
    windows = build_windows(SyntheticDataset(n_docs=60, n_queries=120).load(), SETTINGS)
    answerable = sum(1 for w in ("reference", "clean", "injected") for q in windows[w] if q.qrels)
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
    # judge metrics: production's traced answers and each candidate's, three judges, paired
    j = res["judged"]
    assert j["answers"] == {"production": 2, "hnsw_ef16": 2, "ivf_nprobe1": 2}
    assert [(p["candidate"], p["metric"]) for p in j["pairs"]] == [
        (c, m) for c in ("hnsw_ef16", "ivf_nprobe1")
        for m in ("faithfulness", "answer_relevancy", "context_relevance")]
    judged = [json.loads(ln) for ln in (run / "judged.jsonl").read_text().splitlines()]
    assert len(judged) == 3 * 2 * 3  # sides x answers x metrics, every one with a status
    # an answer identical to one judged before repeats its verdict (one judge call)
    assert j["reused"] == {k: sum(1 for r in judged if r["side"] == k and r["shared_with"])
                           for k in j["answers"]}
    for r in (r for r in judged if r["shared_with"]):
        assert any(x["side"] == r["shared_with"] and not x["shared_with"]
                   and (x["metric"], x["status"], x["value"], x["detail"])
                   == (r["metric"], r["status"], r["value"], r["detail"]) for x in judged)
    for p in j["pairs"]:  # a pair is counted once: scored on both sides, or not scored
        assert p["requests"] == 2 and 0 <= p["n"] <= 2
        assert p["n"] == sum(1 for r in judged if r["side"] == p["candidate"]
                             and r["metric"] == p["metric"] and r["value"] is not None
                             and any(x["trace_id"] == r["trace_id"] and x["side"] ==
                                     "production" and x["metric"] == p["metric"]
                                     and x["value"] is not None for x in judged))
    # labelled metrics of the reviewed sample: the control scores as production
    assert res["review"]["merged"] == res["review"]["queued"] == res["sample"]["sampled"]
    ctl = [r for r in res["labelled"] if r["candidate"] == "production (control)"]
    assert len(ctl) == 3 and all(r["comparison"]["delta"] == 0.0 and r["n"] > 0 for r in ctl)
    # the golden set's ndcg@10 re-weighted to each window's route mix
    q = {r["window"]: r for r in res["quality"]}
    assert set(q) == {"reference", "clean", "injected"}
    for r in q.values():
        assert r["ci_low"] <= r["delta"] <= r["ci_high"]
        assert r["delta"] == pytest.approx(r["expected"] - r["golden"])
        missed = sum(x["traffic_share"] for x in r["slices"] if x["golden_mean"] is None)
        assert r["covered_share"] + missed == pytest.approx(1.0)
    md = (run / "traffic.md").read_text()
    assert "**Complete**" in md and "## Shadow replay of the sample" in md
    assert "**Plumbing check**" in md and "## Expected quality from the slice mix" in md
    assert md.index("## Drift") < md.index("## Expected quality") < md.index("## Guardrails")
    assert md == report_md(_loaded(res))


def _loaded(data: dict) -> LoopResult:
    """The LoopResult of a traffic.json (its report must be the one on disk)."""
    keep = {k: v for k, v in data.items() if k != "exit_code"}
    keep["steps"] = [Step(**s) for s in keep["steps"]]
    return LoopResult(**keep)
