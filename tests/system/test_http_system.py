"""``system=http`` against a real HTTP service (uvicorn in a subprocess, scripted answers):
its rankings and answers flow into the same metrics, checks, statuses and comparisons as
bench's own configs; bad input is one line and exit 2 before work; a crash keeps what was
answered and a rerun resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf
from scripted_fixture import REPO, compose_run, serving

from bench.config.build import build
from bench.data.base import Dataset
from bench.errors import ConfigError
from bench.generation.openai_http import free_port
from bench.pipeline.run import RunResult

APP = "tests.system.scripted_server:app"
RESPONSE = {"documents": "documents", "doc_id": "doc_id", "score": "score",
            "passage": "text", "answer": "answer",
            "server_timings": {"retrieve": "timings.retrieve_ms",
                               "generate": "timings.generate_ms"}}


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    src = build(OmegaConf.load(REPO / "conf/dataset/synthetic.yaml"), "dataset")
    return src.load()


def perfect(d: Dataset, q: Any) -> dict[str, Any]:
    """The gold documents first (best grade first), then two others: a ranking scored 1.0
    at every cutoff."""
    gold = [x for x, _ in sorted(q.qrels, key=lambda r: -r[1])] or [d.doc_ids[0]]
    ranked = [*gold, *[x for x in d.doc_ids if x not in gold][:2]]
    docs = [{"doc_id": x, "score": 1.0 - 0.1 * i, "text": f"passage of {x}"}
            for i, x in enumerate(ranked)]
    return {"documents": docs, "answer": q.expected_answer or "I don't know.",
            "timings": {"retrieve_ms": 2.0, "generate_ms": 3.0}}


def script(d: Dataset, path: Path, **extra: Any) -> dict[str, Any]:
    """Query 0 answers 500, 1 too slowly, 2 with a body that is not JSON, 3 with an id the
    corpus lacks, 4 with 503 once (retried, then ok); every other one perfectly."""
    qs = d.queries
    queries: dict[str, Any] = {q.text: {"body": perfect(d, q)} for q in qs}
    queries[qs[0].text] = {"status": 500, "body": {"error": "boom"}}
    queries[qs[1].text] = {"delay_s": 8.0, "body": perfect(d, qs[1])}
    queries[qs[2].text] = {"raw": "{not json"}
    bad = perfect(d, qs[3])
    bad["documents"][1]["doc_id"] = "not-a-doc"
    queries[qs[3].text] = {"body": bad}
    queries[qs[4].text] = {"fail_first": 1, "body": perfect(d, qs[4])}
    out = {"queries": queries, "default": {"body": perfect(d, qs[5])}, **extra}
    path.write_text(json.dumps(out))
    return out


def system_overrides(root: str, *, path: str = "/v1/answer", timeout_s: float = 5.0,
                     response: dict[str, Any] | None = None) -> list[str]:
    mapping = json.dumps(response or RESPONSE).replace('"', "")
    return ["system=http", f"system.url={root}{path}", f"system.timeout_s={timeout_s}",
            "system.backoff_s=0.05", "system.max_retries=1",
            # the option's own server_timings are replaced, not merged into
            "system.response.server_timings=null", f"system.response={mapping}"]


@pytest.fixture(scope="module")
def served(dataset: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("script") / "script.json"
    script(dataset, path)
    with serving(APP, env={"SCRIPT": str(path)}) as root:
        yield root


@pytest.fixture(scope="module")
def system_run(served: str, tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return compose_run(system_overrides(served), tmp_path_factory.mktemp("cache"),
                       tmp_path_factory.mktemp("run"))


def _configs(r: RunResult) -> dict[str, dict[str, Any]]:
    return {c["label"]: c for c in pq.read_table(r.run_dir / "configs.parquet").to_pylist()}


def test_the_service_is_a_ranking_config_and_an_answered_config(system_run: RunResult) -> None:
    configs = _configs(system_run)
    assert configs["system(http)"]["kind"] == "system"
    answered = configs["system(http)>answer"]
    assert answered["kind"] == "generated"
    assert answered["parent_config_id"] == configs["system(http)"]["config_id"]
    # the whole request's client-side time is its end-to-end latency
    assert configs["system(http)"]["e2e_p50_ms"] > 0


def test_failures_are_statuses_never_dropped(system_run: RunResult, dataset: Dataset) -> None:
    cid = _configs(system_run)["system(http)"]["config_id"]
    rows = [r for r in pq.read_table(system_run.run_dir / "per_query.parquet").to_pylist()
            if r["config_id"] == cid and r["metric"] == "ndcg@10"]
    status = {r["query_id"]: r["status"] for r in rows}
    q = dataset.queries
    assert status[q[0].query_id] == "failed"  # HTTP 500, retried, still 500
    assert status[q[1].query_id] == "timeout"
    assert status[q[2].query_id] == "invalid"  # not JSON
    assert status[q[3].query_id] == "invalid"  # a doc id the corpus lacks
    assert status[q[4].query_id] == "scored"  # 503 once, then answered
    value = {r["query_id"]: r["value"] for r in rows}
    assert value[q[0].query_id] is None or value[q[0].query_id] != value[q[0].query_id]
    scored = [r for r in rows if r["status"] == "scored"]
    assert len(scored) == sum(1 for x in q if x.qrels) - 4
    assert all(r["value"] == pytest.approx(1.0) for r in scored)


def test_answers_are_checked_with_the_same_statuses(system_run: RunResult,
                                                    dataset: Dataset) -> None:
    cid = _configs(system_run)["system(http)>answer"]["config_id"]
    rows = [r for r in pq.read_table(system_run.run_dir / "per_query.parquet").to_pylist()
            if r["config_id"] == cid and r["metric"] == "token_f1"]
    status = {r["query_id"]: r["status"] for r in rows}
    q = dataset.queries
    assert status[q[0].query_id] == "failed"
    assert status[q[1].query_id] == "timeout"
    assert status[q[2].query_id] == "invalid"
    assert status[q[3].query_id] == "invalid"
    ok = [r for r in rows if r["status"] == "scored"]
    assert ok and all(r["value"] == pytest.approx(1.0) for r in ok)  # the reference itself


def test_the_service_is_paired_with_the_first_config(system_run: RunResult,
                                                     dataset: Dataset) -> None:
    configs = _configs(system_run)
    cid = configs["system(http)"]["config_id"]
    rows = pq.read_table(system_run.run_dir / "comparisons.parquet").to_pylist()
    mine = [r for r in rows if r["config_id"] == cid and r["metric"] == "ndcg@10"
            and r["scope"] == "all"]
    assert len(mine) == 1
    assert mine[0]["baseline_config_id"] == next(iter(configs.values()))["config_id"]
    # the 4 incomplete queries are not paired
    assert mine[0]["n"] == sum(1 for x in dataset.queries if x.qrels) - 4


def test_every_request_is_recorded_with_its_latency_split(system_run: RunResult) -> None:
    cid = _configs(system_run)["system(http)"]["config_id"]
    rows = [r for r in pq.read_table(system_run.run_dir / "system.parquet").to_pylist()
            if r["config_id"] == cid]
    assert len(rows) == 24
    assert sum(r["status"] == "invalid" for r in rows) == 2  # not JSON; an unknown doc id
    ok = [r for r in rows if r["status"] == "ok"]
    # the service reports retrieve 2 ms + generate 3 ms; the rest is network and client
    assert all(r["server_ms"] == pytest.approx(5.0) for r in ok)
    # network is the rest of e2e (never negative: a service may over-report its own time)
    assert all(r["network_ms"] + r["server_ms"] + r["client_ms"]
               == pytest.approx(max(r["e2e_ms"], r["server_ms"] + r["client_ms"]))
               for r in ok)
    retried = [r for r in rows if r["attempts"] == 2 and r["status"] == "ok"]
    assert len(retried) == 1  # the 503-once query
    report = (system_run.run_dir / "report.md").read_text()
    assert "## Black-box systems" in report


def test_a_server_that_dies_mid_run_keeps_what_was_answered(
        dataset: Dataset, tmp_path: Path) -> None:
    """The server exits at its 11th request (the preflight and 9 answers before it): those
    answers are cached as they arrive, the rest are ``failed``; a rerun against the server
    restarted on the same endpoint asks only the queries that failed."""
    clean = {"queries": {q.text: {"body": perfect(dataset, q)} for q in dataset.queries},
             "default": {"body": perfect(dataset, dataset.queries[0])}}
    dying, healthy = tmp_path / "dying.json", tmp_path / "healthy.json"
    dying.write_text(json.dumps({**clean, "die_after": 10}))
    healthy.write_text(json.dumps(clean))
    port = free_port()
    cache = tmp_path / "cache"
    with serving(APP, env={"SCRIPT": str(dying)}, port=port) as root:
        first = compose_run(system_overrides(root), cache, tmp_path / "run1")
    rows = pq.read_table(first.run_dir / "system.parquet").to_pylist()
    assert [r["status"] for r in rows].count("ok") == 9
    assert [r["status"] for r in rows].count("failed") == 15
    with serving(APP, env={"SCRIPT": str(healthy)}, port=port) as root:
        second = compose_run(system_overrides(root), cache, tmp_path / "run2")
        asked = httpx.get(f"{root}/count").json()["n"]
    assert asked == 1 + 15  # the preflight, then only what failed before
    rows = pq.read_table(second.run_dir / "system.parquet").to_pylist()
    assert all(r["status"] == "ok" for r in rows)
    assert "| 24 / 0 / 0 / 0 | 9 |" in (second.run_dir / "report.md").read_text()


def test_bad_endpoint_is_one_line_and_exit_2_before_work(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "dataset=synthetic", f"cache_dir={tmp_path}",
         "system=http", f"system.url=http://127.0.0.1:{port}/v1/answer",
         "system.timeout_s=1", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": f"{REPO}:{REPO / 'kernels'}"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(err) == 1 and "config key system.url: preflight request" in err[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "configs.parquet").exists()


def test_the_builder_checks_the_mapping_before_work(served: str, compose_cfg: Any) -> None:
    from bench.system.stage import build as build_system

    cfg = compose_cfg(["dataset=synthetic", *system_overrides(
        served, response={**RESPONSE, "documents": "hits"})])
    with pytest.raises(ConfigError, match=r"^config key system\.response\.documents: the "
                                          r"preflight response .* 'hits' not found"):
        build_system(cfg, "cpu")
