"""Routing: labels from the data, the rules router, the classifier's training set, the
per-request chain running only the chosen route, config errors before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.config.build import build
from bench.data.base import Query
from bench.errors import ConfigError
from bench.route.embedding import EmbeddingRouter
from bench.route.labels import route_label
from bench.route.report import classification
from bench.route.rules import RulesRouter
from tests.cli import bench, bench_in_process

ROUTES = {"none": "none", "one_shot": "one_shot", "iterative": "iterative"}


def test_labels_come_from_must_abstain_and_the_number_of_relevant_documents() -> None:
    assert route_label(Query("a", "x", must_abstain=True)) == "none"
    assert route_label(Query("b", "x", qrels=(("d1", 0),))) == "none"  # nothing relevant
    assert route_label(Query("c", "x", qrels=(("d1", 2),))) == "one_shot"
    assert route_label(Query("d", "x", qrels=(("d1", 2), ("d2", 1)))) == "iterative"
    assert route_label(Query("e", "x", qrels=(("d1", 2), ("d2", 1))), relevance_level=2) \
        == "one_shot"


def test_the_first_matching_rule_names_the_route() -> None:
    r = RulesRouter(routes=ROUTES, default="one_shot", rules=[
        {"route": "iterative", "pattern": "connection to"},
        {"route": "none", "max_words": 1}])
    assert r.choose("Explain A and its CONNECTION TO B.") == "iterative"
    assert r.choose("hello") == "none"
    assert r.choose("What is a compiler?") == "one_shot"


@pytest.mark.parametrize(("node", "key"), [
    ({"default": "two_shot", "rules": []}, "router.default"),
    ({"default": "one_shot", "rules": [{"route": "bogus"}]}, "router.rules[0].route"),
    ({"default": "one_shot", "rules": [{"route": "none", "pattern": "("}]},
     "router.rules[0].pattern"),
    ({"default": "one_shot", "rules": [{"route": "none", "when": 1}]}, "router.rules[0].when"),
    ({"default": "one_shot", "rules": [], "slo_p95_ms": {"fast": 5}}, "router.slo_p95_ms.fast"),
    ({"default": "one_shot", "rules": [], "slo_p95_ms": {"none": 0}}, "router.slo_p95_ms.none"),
])
def test_bad_rules_router_options_name_the_key(node: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        build({"_target_": "bench.route.rules.RulesRouter", "routes": ROUTES, **node}, "router")
    assert err.value.key == key


def test_a_classifier_router_needs_every_label_as_a_route() -> None:
    with pytest.raises(ConfigError) as err:
        build({"_target_": "bench.route.embedding.EmbeddingRouter",
               "routes": {"one_shot": "one_shot"}}, "router")
    assert err.value.key == "router.routes"


@pytest.mark.parametrize("classifier", ["logistic", "centroid"])
def test_the_classifier_separates_separable_classes(classifier: str) -> None:
    rng = np.random.default_rng(0)
    centres = {"none": [1, 0, 0], "one_shot": [0, 1, 0], "iterative": [0, 0, 1]}
    x = np.asarray([np.asarray(c) + 0.05 * rng.standard_normal(3) for c in centres.values()
                    for _ in range(10)], np.float32)
    y = [k for k in centres for _ in range(10)]
    r = EmbeddingRouter(routes=ROUTES, classifier=classifier)
    fitted = r.fit(x, y)
    assert fitted.n_train == 30 and dict(fitted.support) == {k: 10 for k in centres}
    assert r.predict(fitted, np.asarray([[0.9, 0.1, 0.0], [0.0, 0.1, 0.9]])) == \
        ["none", "iterative"]


def test_classification_table_by_hand() -> None:
    labels = ["none", "none", "one_shot", "iterative"]
    routes = ["none", "one_shot", "one_shot", "one_shot"]
    c = classification(labels, routes)
    rep = c["report"]
    # none: 1 predicted, 1 right -> P 1, R 1/2; one_shot: 3 predicted, 1 right -> P 1/3, R 1
    assert rep["none"]["precision"] == 1.0 and rep["none"]["recall"] == 0.5
    assert rep["one_shot"]["precision"] == pytest.approx(1 / 3) and rep["one_shot"]["recall"] == 1
    assert rep["iterative"]["recall"] == 0.0 and c["accuracy"] == 0.5
    assert c["classes"] == ["iterative", "none", "one_shot"]
    assert c["confusion"] == [[0, 0, 1], [0, 1, 1], [0, 0, 1]]


BAD_INPUT = [
    (["router=rules", "router.routes.one_shot=dense(nope)"], "router.routes.one_shot"),
    (["router=rules"], "router.routes.iterative"),  # iterative route, no iterative stage
    (["iterative=decompose", "iterative.max_calls=0"], "iterative.max_calls"),
    (["iterative=decompose", "router=embedding"], "router"),  # every query evaluated
]


@pytest.mark.parametrize(("args", "key"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line_before_any_work(args: list[str], key: str,
                                                         tmp_path: Path) -> None:
    run = bench if args == BAD_INPUT[0][0] else bench_in_process  # tests/cli.py
    res = run("dataset=synthetic", f"cache_dir={tmp_path}/cache", f"hydra.run.dir={tmp_path}/r",
              *args)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.npy"))


@pytest.mark.slow
def test_a_routed_run_on_the_held_out_split(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.executor import Executor
    from bench.pipeline.request import QueryChain
    from bench.pipeline.run import prepare, run
    from bench.route.stage import RoutedPool, TrainRouterOp

    over = ["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}", "iterative=decompose",
            "iterative.max_wall_ms=1e9", "router=embedding", "subset.max_queries=12",
            "metrics.bootstrap_resamples=200", "latency.queries=6", "latency.warmup=1"]
    cfg = compose_cfg(over)
    p = prepare(cfg)
    train = next(n for c in p.plan.configs for n in c.chain if isinstance(n.op, TrainRouterOp))
    assert isinstance(train.op, TrainRouterOp)
    evaluated = {q.text for q in p.dataset.queries}
    # fitted on the 12 queries the run does not evaluate, never on one it scores
    assert len(train.op.texts) == 12 and not evaluated & set(train.op.texts)
    res = run(compose_cfg(over), tmp_path / "run")
    assert res.exit_code == 0
    d = tmp_path / "run"
    configs = {r["label"]: r for r in pq.read_table(d / "configs.parquet").to_pylist()}
    assert {"dense", "dense>iterative[decompose]", "route:none", "routed[embedding]"} \
        <= set(configs)
    routes = pq.read_table(d / "routes.parquet").to_pylist()
    assert len(routes) == 12 and all(r["correct"] == (r["label"] == r["route"]) for r in routes)
    iters = pq.read_table(d / "iterations.parquet").to_pylist()
    assert {r["query_id"] for r in iters} == {r["query_id"] for r in routes}
    assert all(r["turn"] <= r["calls"] for r in iters)
    manifest = json.loads((d / "run.json").read_text())
    assert set(manifest["stages"]) == {"iterative", "route"}
    report = (d / "report.md").read_text()
    assert "## Routing" in report and "## Iterative retrieval vs one-shot" in report
    # a routed request runs its decision and the chosen route only
    ex = Executor(p.executor.store, p.telemetry, "cpu")
    spec = next(c for c in p.plan.configs if c.label == "routed[embedding]")
    chain = QueryChain(spec.chain, ex, p.dataset, "cpu")
    by_qid = {r["query_id"]: r["route"] for r in routes}
    for q, query in enumerate(p.dataset.queries):
        ms, pool = chain(q)
        assert isinstance(pool, RoutedPool) and pool.routes == (by_qid[query.query_id],)
        assert ("iterate" in ms) == (pool.routes[0] == "iterative")
        assert ("retrieve" in ms) == (pool.routes[0] != "none")
        assert "route" in ms and "embed_query" in ms  # the classifier reads the embedding
