"""router=llm: the prompt and schema it sends, the route it parses, the fallback on a bad
output, config errors before any work, and a routed run scored like the other routers."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from route_fakes import RouteGenerator

from bench.errors import ConfigError
from bench.route.llm import LLMRouter

ROUTES = {"none": "none", "one_shot": "one_shot", "iterative": "iterative"}


def test_it_asks_with_a_schema_of_the_routes_and_parses_the_route() -> None:
    r = LLMRouter(generator=RouteGenerator(), routes=ROUTES)
    req = r.request("What is a compiler?")
    schema = json.loads(req.json_schema or "")
    assert schema["properties"]["route"]["enum"] == ["none", "one_shot", "iterative"]
    assert req.sampling.temperature == 0.0
    user = req.messages[-1].content
    assert "Question: What is a compiler?" in user and "- iterative: " in user
    assert r.choose("Explain A and B") == "iterative"
    assert r.choose("zzz") == "none" and r.choose("What is a compiler?") == "one_shot"
    assert r.failures == 0
    assert r.parse('{"route": "elsewhere"}') is None and r.parse("[1]") is None


def test_a_bad_output_goes_to_the_default_route_and_is_counted() -> None:
    r = LLMRouter(generator=RouteGenerator(), routes=ROUTES, default="iterative")
    assert r.choose("garble this") == "iterative" and r.failures == 1


@pytest.mark.parametrize(("node", "key"), [
    ({"default": "two_shot"}, "router.default"),
    ({"prompt": "no slots here"}, "router.prompt"),
    ({"prompt": "{query} {routes} {other}"}, "router.prompt"),
    ({"descriptions": {"fast": "x"}}, "router.descriptions.fast"),
    ({"routes": {"one_shot": "one_shot"}}, "router.routes"),
    ({"max_tokens": 0}, "router.max_tokens"),
])
def test_bad_llm_router_options_name_the_key(node: dict, key: str) -> None:
    from bench.config.build import build

    with pytest.raises(ConfigError) as err:
        build({"_target_": "bench.route.llm.LLMRouter", "routes": ROUTES, **node}, "router",
              generator=RouteGenerator())
    assert err.value.key == key


def test_a_generator_block_on_another_router_is_a_config_error(compose_cfg,  # type: ignore[no-untyped-def]
                                                               tmp_path: Path) -> None:
    from bench.route.stage import build

    cfg = compose_cfg(["dataset=synthetic", "router=rules",
                       "+generator@router.generator=transformers_cpu"])
    with pytest.raises(ConfigError) as err:
        build(cfg, "cpu")
    assert err.value.key == "router.generator"


def test_an_llm_routed_run_is_scored_like_any_router(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    over = ["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}", "iterative=decompose",
            "iterative.max_wall_ms=1e9", "router=llm", "generator@router.generator=none",
            "router.generator._target_=route_fakes.RouteGenerator",
            "metrics.bootstrap_resamples=200", "latency.queries=4", "latency.warmup=1"]
    res = run(compose_cfg(over), tmp_path / "run")
    assert res.exit_code == 0
    d = tmp_path / "run"
    configs = {r["label"] for r in pq.read_table(d / "configs.parquet").to_pylist()}
    assert {"dense", "dense>iterative[decompose]", "route:none", "routed[llm]"} <= configs
    routes = pq.read_table(d / "routes.parquet").to_pylist()
    assert len(routes) == 24  # every synthetic query: nothing is held out to fit
    assert all(r["route"] in ROUTES for r in routes)
    assert all(r["correct"] == (r["label"] == r["route"]) for r in routes)
    assert "## Routing" in (d / "report.md").read_text()
