"""scripts/capacity_infinity.py: bench's capacity study against Infinity (infinity-emb),
started from its own venv, offline, serving the packaged MiniLM from its folder; stopped after.

The end-to-end test runs only where Infinity's venv exists: set ``BENCH_INFINITY`` to its
``infinity_emb`` executable (Infinity 0.0.78 would downgrade packages of bench's venv, so it
is never a dependency; docs/experiments/capacity_http.md). Without it the test is skipped,
saying so. The command it composes is checked everywhere."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from argparse import Namespace
from pathlib import Path
from types import ModuleType

import pytest

from tests.pipeline.test_budget_pipeline import _run

ROOT = Path(__file__).resolve().parents[2]
INFINITY = os.environ.get("BENCH_INFINITY", "")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capacity_infinity",
                                                  ROOT / "scripts" / "capacity_infinity.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["capacity_infinity"] = mod
    spec.loader.exec_module(mod)
    return mod


ci = _load()


def _args(**kw: object) -> Namespace:
    base: dict[str, object] = dict(
        infinity=INFINITY or "/opt/infinity/bin/infinity_emb", model=Path("/m/minilm"),
        rerank_model=None, with_services=[], slo_ms=50.0, rerank_slo_ms=200.0, batch_size=32,
        startup_timeout_s=180.0, run_dir=Path("/tmp/run"), overrides=[])
    return Namespace(**{**base, **kw})


def test_the_command_studies_infinity_and_then_the_services_asked_for() -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from bench.app import CONF_DIR
    from bench.config.schema import register

    argv = ci.command(_args(with_services=["llm"], overrides=["capacity.target_rps=50"]))
    assert argv[1:4] == ["-m", "bench", "+experiment=capacity_http"]
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config",
                      overrides=[o for o in argv[3:] if not o.startswith("hydra.")])
    eps = OmegaConf.to_container(cfg.capacity.endpoints)
    assert isinstance(eps, list) and [e["name"] for e in eps] == ["infinity-embed", "llm"]
    inf = eps[0]
    # the argv reached the config whole: the path, the {port} placeholder, the model folder
    assert inf["start"][:2] == [str(_args().infinity), "v2"]
    assert inf["start"][inf["start"].index("--port") + 1] == "{port}"
    assert inf["start"][inf["start"].index("--model-id") + 1] == "/m/minilm"
    assert inf["api"] == "embeddings" and inf["url"] == "/embeddings"
    assert inf["slo_e2el_ms"] == 50.0 and cfg.capacity.target_rps == 50
    assert not cfg.capacity.freshness  # pgvector under ingest is off


@pytest.mark.slow
@pytest.mark.skipif(not Path(INFINITY).is_file(),
                    reason="Infinity's own venv: set BENCH_INFINITY to its infinity_emb "
                           "executable (docs/experiments/capacity_http.md)")
def test_study_against_infinity_embeddings(tmp_path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    eps = ci.endpoints(_args(model=ci.minilm_dir()))
    _run(tmp_path / "cache", tmp_path, "reranker=none", "budget=none",
         "+experiment=capacity_http", "capacity/freshness=none",
         f"capacity.endpoints={ci.flow(eps)}",
         "capacity.level_seconds=1", "capacity.level_min_requests=20",
         "capacity.level_max_requests=40", "capacity.knee_start_rps=10",
         "capacity.knee_repeats=1", "capacity.knee_max_repeats=1", "capacity.knee_max_levels=2",
         "capacity.ceiling_limit_ms=1e4", "capacity.ceiling_max_rps=200",
         "capacity.ceiling_min_requests=40", "capacity.closed_users=2",
         "capacity.sweep_shares=[1.0]", "capacity.resume=false",
         "capacity.endpoints.0.slo_e2el_ms=5000")
    st = json.loads((tmp_path / "capacity" / "infinity-embed" / "study.json").read_text())
    assert "does not own" in st["kind"] and st["ceiling"]["rate_rps"] > 0
    # every request of every level came back from Infinity and fit the embeddings mapping
    levels = [st["closed"], st["open_same_load"], *st["sweep"]]
    for lv in levels:
        assert lv["statuses"]["ok"] == lv["n_requests"] > 0, lv["statuses"]
    # a 5 s SLO is met at every rate the two knee levels probe (the knee lies beyond them)
    assert st["knee"]["probes"] and all(p["mean"] == 1.0 for p in st["knee"]["probes"])
    # the unloaded pass asked every golden query once (after the load levels)
    assert st["unloaded"]["n_requests"] == st["unloaded"]["statuses"]["ok"] == 24
    # AIPerf's per-request export of each open level, next to the study
    assert list((tmp_path / "capacity" / "infinity-embed" / "aiperf").glob("*.jsonl"))
    # Infinity's own log: it served the model from the folder (no download)
    assert (tmp_path / "capacity" / "infinity-embed.log").is_file()
