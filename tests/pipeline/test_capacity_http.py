"""``+experiment=capacity_http`` end to end on the synthetic corpus: the study against
services bench does not own, each started as a real process on 127.0.0.1 (the small RAG API
read through its system=http mapping, the scripted OpenAI-compatible chat server streamed,
its /rerank), every timed reply scored; bad endpoints are one line naming the key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from db_dirs import server_data_dir

from bench.capacity.servers import free_port
from bench.errors import ConfigError
from tests.pipeline.test_budget_pipeline import _run

SMALL = ["reranker=none", "budget=none", "+experiment=capacity_http",
         "capacity.level_seconds=1", "capacity.level_min_requests=20",
         "capacity.level_max_requests=40", "capacity.knee_start_rps=10",
         "capacity.knee_repeats=1", "capacity.knee_max_repeats=1", "capacity.knee_max_levels=2",
         "capacity.ceiling_limit_ms=1e4", "capacity.ceiling_max_rps=200",
         # 40 requests a ceiling level, not 200: 18 s less of clock per service (the
         # ceiling's own search is tested in tests/capacity)
         "capacity.ceiling_min_requests=40",
         "capacity.closed_users=2",
         "capacity.sweep_shares=[1.0]", "capacity.resume=false"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def pg_dir() -> Iterator[str]:
    # pgvector under ingest
    with server_data_dir("bench-capacity-http-", postgres=("pgvector",)) as root:
        yield str(root)


@pytest.mark.slow
def test_study_against_three_services_bench_does_not_own(cache: Path, tmp_path: Path,
                                                         pg_dir: str) -> None:
    # three services started and stopped, each with its own ceiling, knee and sweep; then
    # pgvector under ingest (a small corpus: 10 documents at 20 docs/s)
    _run(cache, tmp_path, *SMALL, "capacity.slo_e2el_ms=5000",
         "capacity.endpoints.1.slo_ttft_ms=5000", "capacity.endpoints.1.slo_tpot_ms=5000",
         "capacity.endpoints.2.slo_e2el_ms=5000", f"capacity.freshness.data_dir={pg_dir}",
         "capacity.freshness.n_base=300", "capacity.freshness.n_ingest=10",
         "capacity.freshness.ingest_rps=20", "capacity.freshness.dim=16")
    studies = {n: json.loads((tmp_path / "capacity" / n / "study.json").read_text())
               for n in ("rag", "llm", "reranker")}
    rag, llm, rr = studies["rag"], studies["llm"], studies["reranker"]
    assert "does not own" in rag["kind"] and rag["ceiling"]["rate_rps"] > 0
    # the unloaded pass ran last, over every golden query, and the RAG service's BM25
    # finds gold documents: ndcg@10 read from its mapped ranking
    assert rag["unloaded"]["n_requests"] == 24 and rag["unloaded"]["quality_mean"] > 0.1
    assert rag["knee"]["probes"] and rag["quality"][0]["n_queries"] > 0
    # levels draw unused queries first: the closed loop asked 20 of the 24 queries (it sends
    # min_requests when the unloaded pass comes last), so the open level after it asks the
    # 4 others first and every later request is a repeat, reported apart
    assert rag["closed"]["n_requests"] == 20
    same = rag["open_same_load"]
    assert same["repeats"] == same["n_requests"] - 4
    assert same["e2el_fresh"]["n"] + same["e2el_repeat"]["n"] == same["statuses"]["ok"]
    # streamed chat: TTFT / TPOT measured, answers scored by token_f1 against references
    lvl = llm["sweep"][0]
    assert lvl["ttft"]["n"] > 0 and lvl["quality_mean"] is not None
    assert llm["settings"]["slo_ms"] == {"ttft": 5000.0, "tpot": 5000.0}
    assert rr["unloaded"]["quality_mean"] is not None and rr["settings"]["slo_ms"] == {
        "e2el": 5000.0}
    assert all(s["faults"] == [] for s in studies.values())
    assert any("scale-out not checked" in n for n in rag["notes"]) or \
        rag["settings"]["replicas"] == 1
    report = (tmp_path / "report.md").read_text()
    assert "## Capacity" in report and "### rag: rag" in report and "### llm: chat" in report
    # the endpoints are components of one RAG request: the plan composed from their knees
    assert "Composed from the endpoints" in report and "Per-component capacity" in report
    entry = json.loads((tmp_path / "run.json").read_text())["capacity"]
    assert entry["load"] == "open" and entry["study"]["ceiling_rps"] > 0
    # pgvector under ingest: its tables in the report, its records in freshness/
    fresh = json.loads((tmp_path / "freshness" / "freshness.json").read_text())["results"]
    assert [r["database"] for r in fresh] == ["pgvector"] and len(fresh[0]["docs"]) == 10
    assert "## Freshness under ingest" in report and "| pgvector | pgvector hnsw" in report
    assert "freshness" in entry["files"]


def test_bad_endpoints_name_the_key_before_any_work(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"capacity\.faults"):
        _run(cache, tmp_path, *SMALL, "capacity.faults=[status_503]")
    with pytest.raises(ConfigError, match=r"capacity\.faults"):
        _run(cache, tmp_path, *SMALL, "capacity.faults=[restart]", "capacity.allow_faults=true")
    with pytest.raises(ConfigError, match=r"capacity\.endpoints\.0\.response\.bogus"):
        _run(cache, tmp_path, *SMALL, "+capacity.endpoints.0.response.bogus=x")
    with pytest.raises(ConfigError, match=r"capacity\.endpoints\.1\.api"):
        _run(cache, tmp_path, *SMALL, "capacity.endpoints.1.api=grpc")
    with pytest.raises(ConfigError, match=r"capacity\.endpoints\.2\.start"):
        _run(cache, tmp_path, *SMALL, "capacity.endpoints.2.start=[x,'{nope}']")


def test_an_endpoint_that_refuses_connections_is_a_config_error(cache: Path,
                                                                  tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"capacity\.endpoints\.0\.url: preflight"):
        _run(cache, tmp_path, *SMALL, "~capacity.endpoints.0.start",
             f"capacity.endpoints.0.url=http://127.0.0.1:{free_port()}/v1/ask")
