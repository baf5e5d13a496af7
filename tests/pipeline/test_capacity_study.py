"""``+experiment=capacity`` end to end on the synthetic corpus: the open-loop study against
the dense chain in process and against real bench.serve processes of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.errors import ConfigError
from tests.pipeline.test_budget_pipeline import _run

SMALL = ["reranker=none", "budget=none", "+experiment=capacity", "capacity.level_seconds=1",
         "capacity.level_min_requests=10", "capacity.level_max_requests=40",
         "capacity.knee_start_rps=20", "capacity.knee_repeats=1", "capacity.knee_max_repeats=1",
         "capacity.knee_max_levels=3", "capacity.ceiling_limit_ms=1e4",
         # the generator's ceiling only has to clear the rates below (<= 320 req/s); its own
         # search is tests/capacity's: 40 requests a level, not 200 (20 s less of clock)
         "capacity.ceiling_min_requests=40", "capacity.ceiling_max_rps=400",
         "capacity.slo_e2el_ms=2000", "capacity.closed_users=2",
         "capacity.sweep_shares=[0.5]", "capacity.scale_knee_max_levels=1",
         "capacity.resume=false"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.mark.slow
def test_open_study_in_process(cache: Path, tmp_path: Path) -> None:
    _run(cache, tmp_path, *SMALL, "capacity.target=in_process", "capacity.replicas=1",
         "capacity.components=[embedder,vector_db,reranker,llm]",
         "capacity.component_slo_ms={embedder: 1000, vector_db: 500}",
         "capacity.component_max_levels=2", "capacity.price_per_hour=1.0")
    st = json.loads((tmp_path / "capacity" / "study.json").read_text())
    assert st["kind"] == "in-process" and st["knee"]["probes"]
    # per-component capacity: the two components the dense config has, measured alone at
    # their own SLOs, plus the chain's own knee; the plan composed from them
    comps = {c["name"]: c for c in st["components"]}
    assert list(comps) == ["embedder", "vector_db", "chain"]
    assert comps["embedder"]["slo_ms"] == {"e2el": 1000.0}
    assert comps["vector_db"]["slo_ms"] == {"e2el": 500.0}
    assert comps["chain"]["knee"] == st["knee"]
    for name in ("embedder", "vector_db"):
        assert 1 <= comps[name]["knee"]["levels_run"] <= 2
        assert all(r["label"].startswith(f"component {name}")
                   for p in comps[name]["knee"]["probes"] for r in p["runs"])
    plan = st["plan"]
    assert plan["reference"] == "chain" and plan["target_rps"] == 100.0
    assert [r["component"] for r in plan["rows"]] == ["embedder", "vector_db", "chain"]
    assert "no LLM" in plan["comparability"]
    assert any("reranker: the config has no reranker" in n for n in st["notes"])
    assert any("llm: the config generates no answers" in n for n in st["notes"])
    # the dense chain finds the gold documents: quality-goodput is measured
    assert st["unloaded"]["quality_mean"] > 0.5
    # the experiment asks for a restart fault: an in-process chain has no process to kill
    assert st["faults"] == [] and "faults not injected" in st["notes"][0]
    entry = json.loads((tmp_path / "run.json").read_text())["capacity"]
    assert entry["load"] == "open" and entry["study"]["ceiling_rps"] > 0
    report = (tmp_path / "report.md").read_text()
    assert "## Capacity" in report and "Open loop" in report and "### Knee" in report
    assert "Per-component capacity" in report and "1:50" in report  # NVIDIA's, beside ours
    assert list((tmp_path / "capacity" / "vllm").glob("*.json"))


@pytest.mark.slow
def test_open_study_against_served_replicas(cache: Path, tmp_path: Path) -> None:
    # a served request can take seconds on a loaded 2-core box: slow rates, a lenient
    # target, so the knee is found whatever the load and every step runs. What is checked is
    # that every step runs and what it records, not a statistic: 4 requests a level (8 s at
    # 0.5 req/s, not 20 s); the restart still lands 0.5 s into the fault level, mid-schedule
    _run(cache, tmp_path, *SMALL, "capacity.level_min_requests=4",
         "capacity.target=serve", "capacity.faults=[restart]",
         "capacity.knee_start_rps=0.5", "capacity.knee_max_levels=2", "capacity.attainment=0.5",
         "capacity.slo_e2el_ms=1e6", "capacity.timeout_s=60",
         "capacity.components=[embedder]", "capacity.component_max_levels=1")
    st = json.loads((tmp_path / "capacity" / "study.json").read_text())
    assert st["kind"] == "http" and "/v1/retrieve" in st["backend"]
    # the embedder measured through the served process's own /v1/embeddings
    (emb, chain) = st["components"]
    assert emb["name"] == "embedder" and "/v1/embeddings" in emb["what"]
    assert chain["name"] == "chain"  # the whole request, measured the same way
    assert emb["knee"]["probes"][0]["runs"][0]["statuses"]["ok"] > 0
    assert st["unloaded"]["quality_mean"] > 0.5  # hits read back from the served JSON
    assert st["knee"]["rate_rps"] is not None
    assert st["scale_out"]["replicas"] == 2 and st["scale_out"]["p95_measured_ms"] is not None
    (fault,) = st["faults"]
    assert fault["fault"] == "restart" and fault["restarts"] == 1
    assert fault["lost"] == 0 and fault["double"] == 0
    assert sum(fault["statuses"].values()) == fault["n_requests"]


def test_bad_study_settings_name_the_key(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"capacity\.faults"):
        _run(cache, tmp_path, *SMALL, "capacity.faults=[meteor]")
    with pytest.raises(ConfigError, match=r"capacity\.slo_ttft_ms"):
        _run(cache, tmp_path, *SMALL, "capacity.slo_ttft_ms=-5")
    with pytest.raises(ConfigError, match=r"capacity\.components"):
        _run(cache, tmp_path, *SMALL, "capacity.components=[gpu]")
    with pytest.raises(ConfigError, match=r"capacity\.component_slo_ms\.embedder"):
        _run(cache, tmp_path, *SMALL, "capacity.component_slo_ms={embedder: 0}")
    with pytest.raises(ConfigError, match=r"capacity\.ceiling_min_requests"):
        _run(cache, tmp_path, *SMALL, "capacity.ceiling_min_requests=0")
