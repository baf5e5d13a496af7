"""The plan preview: per node whether the cache has it, its cost from the store's log (this
artifact's, else the last one of the same stage and options) and the ceilings pruning it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from bench.app import CONF_DIR
from bench.budget.chain import ChainBudget
from bench.cache.store import ArtifactStore
from bench.pipeline.components import build_components
from bench.pipeline.executor import Executor
from bench.pipeline.plan import plan
from bench.pipeline.preview import NodeCost, preview, pruned_by
from bench.telemetry.basic import BasicTelemetry


def test_costs_come_from_the_stores_log_and_budgets_name_the_node_they_prune(
        compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    comps = build_components(compose_cfg(["dataset=synthetic", "lexical=bm25"]), "cpu")
    ds = comps.source.load()
    store = ArtifactStore(tmp_path / "cache")
    p = plan(comps, ds, device="cpu", relevance_level=1)
    assert preview(p, store, None).costs == {}  # an empty cache knows no cost
    ex = Executor(store, BasicTelemetry(), "cpu")
    ex.value(p.chunk)
    view = preview(p, store, None)
    assert set(view.costs) == {p.chunk.key}  # nothing else was computed
    cost = view.costs[p.chunk.key]
    assert cost.same and cost.seconds > 0
    assert view.notes(p.chunk) == [f"computed in {cost.seconds:.1f} s"]
    assert view.notes(p.embed_docs) == ["cost unknown"]
    assert view.to_compute(p, ex.is_cached)[1:] == (0, sum(
        1 for n in p.nodes() if n.cached) - 1)
    # another corpus, same chunker: the chunks are to compute, at the last chunking's cost
    d0 = ds.documents[0]
    other = replace(ds, documents=(replace(d0, text=d0.text + " more"), *ds.documents[1:]),
                    fingerprint="")
    q = plan(comps, other, device="cpu", relevance_level=1)
    assert not ex.is_cached(q.chunk)
    assert preview(q, store, None).costs == {q.chunk.key: NodeCost(cost.seconds, False)}
    assert "(last computed with these options)" in q.render(
        ex.is_cached, preview(q, store, None).notes)
    # a stage ceiling names the first node timing the stage, request-wide ones the leaf
    dense, bm25 = p.configs
    chain = pruned_by(p, ChainBudget(max_stage_p95_ms={"retrieve": 5.0, "lexical": 5.0},
                                     max_e2e_p95_ms=50.0))
    assert chain[dense.leaf.key] == ("budget.max_stage_p95_ms.retrieve",
                                     "budget.max_e2e_p95_ms")
    assert chain[bm25.leaf.key] == ("budget.max_stage_p95_ms.lexical", "budget.max_e2e_p95_ms")
    assert len(chain) == 2
    # budget=latency: the same chain budget with the search ceiling alone
    latency = instantiate(OmegaConf.load(Path(CONF_DIR) / "budget" / "latency.yaml"))
    assert isinstance(latency, ChainBudget) and latency.max_stage_p95_ms == {"retrieve": 50.0}
    assert pruned_by(p, latency) == {dense.leaf.key: ("budget.max_stage_p95_ms.retrieve",)}
    assert pruned_by(p, None) == {}
