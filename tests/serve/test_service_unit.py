"""``bench.serve.service`` without a server or a run: settings validation, which config is
served, how a request becomes a query, and the component endpoints' arithmetic on fakes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from bench.data.base import Dataset, Document, Query
from bench.errors import ConfigError
from bench.generation.base import SamplingParams
from bench.pipeline.lanes import ConfigKind, ConfigSpec
from bench.serve.service import BadRequest, Service, choose_config, serve_settings


def _spec(cid: str, label: str) -> ConfigSpec:
    return ConfigSpec(cid, label, ConfigKind.DENSE, None, {})  # type: ignore[arg-type]


def _serve_cfg(**over: Any) -> Any:
    base = {"config": None, "host": "127.0.0.1", "port": 8000, "max_concurrency": 4,
            "max_queue": 16, "shutdown_timeout_s": 5.0, "torch_threads": None,
            "traces": None}
    return OmegaConf.create({"serve": base | over})


def test_serve_settings_refuse_each_bad_value_by_its_key() -> None:
    s = serve_settings(_serve_cfg(torch_threads=2, traces="spans.json"))
    assert (s.port, s.max_concurrency, s.torch_threads, s.traces, s.traces_content) == (
        8000, 4, 2, "spans.json", True)
    for key, value in (("max_concurrency", 0), ("max_queue", -1), ("port", 70000),
                       ("shutdown_timeout_s", -0.5), ("torch_threads", 0), ("traces", "  ")):
        with pytest.raises(ConfigError) as err:
            serve_settings(_serve_cfg(**{key: value}))
        assert err.value.key == f"serve.{key}"


def test_the_served_config_by_id_or_unique_label() -> None:
    a, b, b2 = _spec("aaa", "dense"), _spec("bbb", "hnsw"), _spec("ccc", "hnsw")
    assert choose_config([a], None) is a
    assert choose_config([a, b], "bbb") is b and choose_config([a, b], "dense") is a
    with pytest.raises(ConfigError, match="this run has 2 configs: name one"):
        choose_config([a, b], None)
    with pytest.raises(ConfigError, match="label 'hnsw' names 2 configs"):
        choose_config([a, b, b2], "hnsw")
    with pytest.raises(ConfigError, match=r"no config 'zzz' in this run; its configs: aaa "
                                          r"dense; bbb hnsw"):
        choose_config([a, b], "zzz")


class _Embedder:
    dim = 3

    def encode(self, texts: list[str], *, kind: str, out: np.ndarray) -> Any:
        for i, t in enumerate(texts):
            out[i] = [len(t), 1.0 if kind == "query" else 0.0, i]
        return type("Stats", (), {"n_tokens": sum(len(t.split()) for t in texts)})()


class _Reranker:
    def score(self, queries: list[str], docs: list[list[str]]) -> list[np.ndarray]:
        return [np.asarray([float(len(d)) for d in docs[0]])]


def _service(reranker: Any = None) -> Service:
    ds = Dataset("fake", (Document("d0", "zero"),),
                 (Query("q1", "known text", allowed_roles=("staff",), tenant="t1"),))
    return Service(spec=_spec("aaa", "dense"), chain=lambda: None,  # type: ignore[arg-type,return-value]
                   dataset=ds, embedder=_Embedder(), reranker=reranker,  # type: ignore[arg-type]
                   generator=None, answer_nodes=None, executor=None, device="cpu")


def test_a_request_becomes_a_query_keeping_a_known_callers_roles_unless_given() -> None:
    svc = _service()
    known = svc.query(text=None, query_id="q1", roles=None, tenant=None, request_id="r")
    assert (known.text, known.allowed_roles, known.tenant) == ("known text", ("staff",), "t1")
    over = svc.query(text="new", query_id="q1", roles=["admin"], tenant="t2", request_id="r")
    assert (over.query_id, over.text, over.allowed_roles, over.tenant) == (
        "q1", "new", ("admin",), "t2")
    fresh = svc.query(text="free text", query_id=None, roles=None, tenant=None,
                      request_id="req-7")
    assert (fresh.query_id, fresh.allowed_roles, fresh.tenant) == ("req-7", (), "")
    with pytest.raises(BadRequest, match="'nope' is not a query of the served dataset"):
        svc.query(text=None, query_id="nope", roles=None, tenant=None, request_id="r")
    with pytest.raises(BadRequest, match=r"`query` .* is required"):
        svc.query(text=None, query_id=None, roles=None, tenant=None, request_id="r")
    assert not svc.loaded and not svc.can_answer


def test_embed_rerank_and_sampling_endpoints_on_fakes() -> None:
    svc = _service(_Reranker())
    e = svc.embed(["a b", "c"], kind="query")
    assert e.vectors.shape == (2, 3) and e.vectors[:, 1].tolist() == [1.0, 1.0]
    assert e.n_tokens == 3 and e.timings_ms["embed"] >= 0.0
    r = svc.rerank("q", ["xx", "x", "xxx"])
    assert r.scores.tolist() == [2.0, 1.0, 3.0] and r.scores.dtype == np.float32
    assert svc.rerank("q", []).scores.shape == (0,)
    with pytest.raises(LookupError, match="reranker=none"):
        _service().rerank("q", ["x"])
    # no generate op: the defaults, with what the request overrides
    s = svc.sampling(max_tokens=7, temperature=None, top_p=None, seed=3)
    assert s == SamplingParams(max_tokens=7, temperature=0.0, top_p=1.0, seed=3)
