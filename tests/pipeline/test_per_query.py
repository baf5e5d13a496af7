"""The per-query path agrees with the batch path, op by op, on the synthetic corpus.

Every query-time op's ``run_one`` (what the budget probe, the capacity driver and a served
endpoint call) must give, for each query, the row the batch op gives for it: same documents,
same chunks, same scores. Each op is fed the batch values of its inputs restricted to the
query (by induction along the chain), so a difference is the op's own; the query encoder is
compared on its own (a batch of one is padded differently from a batch of many).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.embedding.stage import Embeddings, EmbeddingStats, EmbedOp
from bench.pipeline.components import build_components
from bench.pipeline.executor import Executor
from bench.pipeline.node import Node, OneQuery, Phase, QueryOp, QueryTimer
from bench.pipeline.plan import plan
from bench.pipeline.request import QueryChain
from bench.retrieval.base import Pool, order_key
from bench.telemetry.basic import BasicTelemetry

#: queries checked per config (every config of the plan is checked)
N_QUERIES = 8
OVERRIDES = ["dataset=synthetic", "rewriter=query_rewrite", "~rewriter.rewriters.mq3",
             "++rewriter.rewriters.bo1._target_=bench.rewrite.bo1.Bo1Rewriter",
             "generator@rewriter.generator=none",
             "rewriter.generator._target_=rewrite_fakes.RewriteGenerator",
             "lexical=bm25", "fusion=rrf",
             "filters=hard_vs_soft", "reranker=bi_encoder_l3", "reranker.depths=[4,8]",
             "index=hnsw", "index.query_params=[{ef_search: 16}]",
             "metrics.bootstrap_resamples=200",
             # no wall-time limit any query reaches: a loop stopped by the clock differs
             # between two runs of it on a loaded machine
             "iterative=decompose", "iterative.max_wall_ms=1e9", "router=rules"]


#: a dense lane pushed down into an embedded database (LanceDB's pre-filtered ``where``)
PUSHDOWN = ["dataset=synthetic", "index=lancedb", "index.query_params=[{ef: 100}]",
            "filters=entitlement", "filters.pushdown=true", "metrics.bootstrap_resamples=200"]


def _built(cache: Path, overrides: list[str]) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.cache.store import ArtifactStore
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=[*overrides, f"cache_dir={cache}"])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    comps = build_components(cfg, "cpu")
    dataset = comps.source.load()
    the_plan = plan(comps, dataset, device="cpu", relevance_level=1)
    executor = Executor(ArtifactStore(Path(cache)), BasicTelemetry(), "cpu")
    for c in the_plan.configs:
        executor.resolved(c.leaf)
    return {"plan": the_plan, "executor": executor, "dataset": dataset}


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _built(tmp_path_factory.mktemp("cache"), OVERRIDES)


@pytest.fixture(scope="module")
def pushdown_batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("lancedb")
    d = tmp_path_factory.mktemp("pushdown")
    return _built(d / "cache", [*PUSHDOWN, f"index.data_dir={d / 'lance'}"])


def _row(value: Any, q: int) -> Any:
    """The batch value of one query-time node restricted to query ``q``."""
    if isinstance(value, Embeddings):
        return Embeddings(np.asarray(value.vectors)[q:q + 1], EmbeddingStats(1, 0, 0.0, 0))
    if isinstance(value, Pool):
        s, e = int(value.hits.offsets[q]), int(value.hits.offsets[q + 1])
        hits = value.hits.take(np.asarray([0, e - s]), np.arange(s, e))
        return Pool(hits, None if value.chunk_result is None else value.chunk_result)
    return value


def _same_pool(one: Pool, batch: Pool, q: int, what: str) -> None:
    docs, scores = batch.hits.for_query(q)
    s, e = int(batch.hits.offsets[q]), int(batch.hits.offsets[q + 1])
    got_docs, got_scores = one.hits.for_query(0)
    assert got_docs.tolist() == docs.tolist(), what
    assert one.hits.chunks().tolist() == batch.hits.chunks()[s:e].tolist(), what
    np.testing.assert_allclose(got_scores, scores, rtol=1e-5, atol=1e-6, err_msg=what)


def _check_every_op(batch: dict[str, Any]) -> set[str]:
    """Run each config's chain query by query against the batch rows; the stages checked."""
    the_plan, ex, ds = batch["plan"], batch["executor"], batch["dataset"]
    id_key = order_key(ds.doc_ids)
    checked: set[str] = set()
    for spec in the_plan.configs:
        for q, query in enumerate(ds.queries[:N_QUERIES]):
            one = OneQuery(query, type(ds)(ds.name, ds.documents, (query,),
                                           fingerprint=ds.fingerprint), id_key)
            vals: dict[str, Any] = {}
            for n in spec.chain:
                if n.phase is Phase.INDEX:
                    vals[n.key] = ex.value(n)
                elif n.phase is Phase.OFFLINE:
                    vals[n.key] = None
                elif isinstance(n.op, EmbedOp):  # compared on its own (below)
                    vals[n.key] = _row(ex.value(n), q)
                else:
                    assert isinstance(n.op, QueryOp), n.label
                    vals[n.key] = n.op.run_one(n.bind(vals), one, QueryTimer())
                    if isinstance(vals[n.key], Pool):
                        _same_pool(vals[n.key], ex.value(n), q, f"{n.label} query {q}")
                        checked.add(n.stage)
                    elif isinstance(vals[n.key], Embeddings):  # a rewritten query
                        np.testing.assert_allclose(
                            np.asarray(vals[n.key].vectors)[0],
                            np.asarray(ex.value(n).vectors)[q], rtol=1e-6, atol=1e-7)
                        checked.add(n.stage)
    return checked


def test_every_query_time_op_agrees_with_its_batch_rows(batch: dict[str, Any]) -> None:
    checked = _check_every_op(batch)
    assert {"rewrite", "retrieve", "lexical", "fusion", "filters", "rerank_cut",
            "rewrite_lexical", "rewrite_hyde", "rewrite_multi_query",
            "iterate", "route", "no_retrieval"} <= checked


def test_a_pushed_down_search_agrees_with_its_batch_rows(pushdown_batch: dict[str, Any]
                                                        ) -> None:
    """The filtered search inside the database (one ``where`` search per query) and the
    filters stage after it, query by query against the batch pass."""
    checked = _check_every_op(pushdown_batch)
    assert {"retrieve_where", "filters"} <= checked


def test_the_query_encoder_agrees_with_the_batch_pass(batch: dict[str, Any]) -> None:
    the_plan, ex, ds = batch["plan"], batch["executor"], batch["dataset"]
    node: Node = the_plan.embed_queries
    op = node.op
    assert isinstance(op, EmbedOp) and op.phase is Phase.QUERY
    vectors = np.asarray(ex.value(node).vectors)
    id_key = order_key(ds.doc_ids)
    for q, query in enumerate(ds.queries[:N_QUERIES]):
        one = OneQuery(query, ds, id_key)
        got = op.run_one(node.bind({node.inputs[0].key: ds}), one, QueryTimer())
        cos = float(np.dot(np.asarray(got.vectors)[0], vectors[q]))
        assert cos > 0.9999, (q, cos)


def test_the_chain_times_every_latency_stage_of_its_ops(batch: dict[str, Any]) -> None:
    the_plan, ex, ds = batch["plan"], batch["executor"], batch["dataset"]
    reranked = next(c for c in the_plan.configs if c.kind == "reranked"
                    and c.label.startswith("rrf"))
    chain = QueryChain(reranked.chain, ex, ds, "cpu")
    times, pool = chain(0)
    emitted = {s for n in reranked.chain if n.phase is Phase.QUERY
               for s in n.op.latency_stages}
    assert set(times) == emitted  # no stage silently drops out of end-to-end latency
    assert {"embed_query", "retrieve", "lexical", "fold", "fusion", "filters", "rerank",
            "rerank_cut"} == emitted
    assert isinstance(pool, Pool) and pool.hits.n_queries == 1
    # the rewrite lanes (rocchio, rm3, hyde, multi-query), the iterative lanes, the routed
    # config add theirs
    assert set(the_plan.query_time_stages()) == emitted | {"rewrite", "rewrite_generate",
                                                           "iterate", "route"}


def test_a_routed_request_runs_the_chosen_route_only(batch: dict[str, Any]) -> None:
    from bench.route.stage import RoutedPool

    the_plan, ex, ds = batch["plan"], batch["executor"], batch["dataset"]
    spec = next(c for c in the_plan.configs if c.label == "routed[rules]")
    whole = ex.value(spec.leaf)
    assert isinstance(whole, RoutedPool)
    chain = QueryChain(spec.chain, ex, ds, "cpu")
    seen = set()
    for q in range(len(ds.queries)):
        ms, pool = chain(q)
        _same_pool(pool, whole, q, f"routed query {q}")
        route = whole.routes[q]
        seen.add(route)
        # the decision, then the route's own chain: no other route's stage is timed
        assert "route" in ms and ("iterate" in ms) == (route == "iterative"), (route, ms)
        assert "rerank" not in ms and "lexical" not in ms
    assert seen == {"one_shot", "iterative"}  # the shipped rules never choose none


#: generated configs (the scripted echo generator of test_generation_plan): a budgeted
#: context over a hybrid pool, and the judged gold-position probe (one context per position)
GENERATED = ["dataset=synthetic", "generator._target_=test_generation_plan.EchoGenerator",
             "generation.max_queries=6", "lexical=bm25", "fusion=rrf",
             "metrics.bootstrap_resamples=200"]


@pytest.fixture(scope="module", params=["context=budgeted", "context=gold_position"])
def generated_batch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                    ) -> dict[str, Any]:
    """The run's own plan (with its generation settings: ``bench.pipeline.run.prepare``),
    every config resolved."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register
    from bench.pipeline.run import prepare

    register()
    cache = tmp_path_factory.mktemp("generated")
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=[*GENERATED, str(request.param), f"cache_dir={cache}"])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    p = prepare(cfg)
    for c in p.plan.configs:
        p.executor.resolved(c.leaf)
    return {"plan": p.plan, "executor": p.executor, "dataset": p.dataset}


def test_a_whole_request_gives_the_batch_context_and_answer(generated_batch: dict[str, Any]
                                                            ) -> None:
    """Retrieval, context and generation of one request on one chain (what /v1/answer and an
    in-process capacity study run): each answered query's context and answer are the batch
    run's, and the request times its context and generation."""
    from bench.generation.stage import ContextOp, Contexts, GenerateOp

    the_plan, ex, ds = (generated_batch["plan"], generated_batch["executor"],
                        generated_batch["dataset"])
    generated = [c for c in the_plan.configs if c.answers is not None]
    assert generated
    by_id = {q.query_id: q for q in ds.queries}
    n_checked = 0
    seen: dict[str, Any] = {}
    for spec in generated:
        ctx_node = spec.answers.input("contexts")
        assert isinstance(ctx_node.op, ContextOp) and isinstance(spec.answers.op, GenerateOp)
        batch_ctx: Contexts = ex.value(ctx_node)
        batch_gen = {g.request_id: g for g in ex.value(spec.answers)}
        chain = QueryChain(spec.chain, ex, ds, "cpu", whole_request=True)
        assert chain.last is spec.answers  # the judge after it is no request's work
        for c in batch_ctx.contexts:
            seen.clear()
            ms, gens = chain.serve(by_id[c.query_id],
                                   on_value=lambda n, v, _ms: seen.__setitem__(n.key, v))
            one: Contexts = seen[ctx_node.key]
            assert len(one.contexts) == 1 and len(gens) == 1
            got = one.contexts[0]
            assert got.messages == c.messages, (spec.label, c.query_id)
            assert [(p.doc_id, p.chunk_idx, p.rank, p.truncated) for p in got.passages] == \
                [(p.doc_id, p.chunk_idx, p.rank, p.truncated) for p in c.passages]
            assert (got.n_tokens, got.n_candidates, got.n_dropped) == \
                (c.n_tokens, c.n_candidates, c.n_dropped)
            want = batch_gen[c.query_id]
            assert (gens[0].text, gens[0].status, gens[0].prompt_tokens,
                    gens[0].output_tokens) == (want.text, want.status, want.prompt_tokens,
                                               want.output_tokens)
            # every stage of the request is timed, retrieval's and the two request ops'
            assert set(ms) == {s for n in spec.chain if n.phase is Phase.QUERY
                               for s in n.op.latency_stages} | {"context", "generate"}
            if batch_ctx.placements:  # a judged builder places the gold as in the batch
                assert one.placements == tuple(p for p in batch_ctx.placements
                                               if p.query_id == c.query_id)
            n_checked += 1
    assert n_checked >= 6


def test_the_probe_chain_stops_before_the_request_ops(generated_batch: dict[str, Any]) -> None:
    """Without ``whole_request`` a generated config's chain is its retrieval alone (the
    budget probe's unit): no context, no generation."""
    the_plan, ex, ds = (generated_batch["plan"], generated_batch["executor"],
                        generated_batch["dataset"])
    spec = next(c for c in the_plan.configs if c.answers is not None)
    ms, value = QueryChain(spec.chain, ex, ds, "cpu")(0)
    assert isinstance(value, Pool) and not {"context", "generate"} & set(ms)
