"""capacity.target=http's target against real server processes on 127.0.0.1 that are not
bench.serve: the scripted OpenAI-compatible server (chat / completions streamed, embeddings,
rerank) and the small RAG API, read through system=http's mapping."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator

import pytest

from bench.capacity.driver import run_open
from bench.capacity.mapped import Endpoint, EndpointQuery, MappedTarget, preflight
from bench.capacity.metrics import summarize
from bench.capacity.quality import answer_scorer
from bench.capacity.schedule import poisson_arrivals
from bench.capacity.servers import Served, free_port
from bench.data.base import Query
from bench.errors import ConfigError

DOCS = [("d1", "Alpha is the first letter. It comes before beta."),
        ("d2", "Beta follows alpha in the Greek alphabet."),
        ("d3", "Gamma rays are electromagnetic radiation.")]
QUERIES = [EndpointQuery("q1", "what letter comes before beta", candidates=tuple(DOCS)),
           EndpointQuery("q2", "gamma rays radiation", candidates=tuple(DOCS))]
ANSWERS = {"what letter comes before beta": "alpha is the first letter",
           "gamma rays radiation": "electromagnetic radiation"}
RAG_MAPPING = {"documents": "results", "doc_id": "id", "score": "score", "passage": "text",
               "answer": "answer"}


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    d = tmp_path_factory.mktemp("chat")
    (d / "answers.jsonl").write_text("".join(json.dumps({"query": q, "answer": a}) + "\n"
                                             for q, a in ANSWERS.items()))
    with Served([sys.executable, "-m", "bench.capacity.services.chat", "--port", "{port}",
                 "--slots", "2", "--prefill-ms", "20", "--tpot-ms", "5",
                 "--answers", str(d / "answers.jsonl")], log_path=d / "chat.log") as s:
        yield s


@pytest.fixture(scope="module")
def rag(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    d = tmp_path_factory.mktemp("rag")
    (d / "corpus.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                                            for i, t in DOCS))
    with Served([sys.executable, "-m", "bench.capacity.services.rag", "--port", "{port}",
                 "--corpus", str(d / "corpus.jsonl"), "--generate-ms", "30",
                 "--word-ms", "2"], log_path=d / "rag.log") as s:
        yield s


def _send(t: MappedTarget, q: int):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        async with t:
            return await t.send(q)

    return asyncio.run(go())


def test_chat_streamed_through_the_openai_preset(chat: Served) -> None:
    ep = Endpoint("llm", "chat", (chat.url + "/v1/chat/completions",), model="scripted-chat")
    r = _send(MappedTarget(ep, QUERIES, key="capacity.endpoints.0"), 0)
    assert r.status == "ok" and r.answer == "alpha is the first letter"
    # one content chunk per word: 5 tokens, the first after the 20 ms prefill, 4 gaps
    assert r.output_tokens == 5 and len(r.token_at) == 4
    assert r.first_token_at is not None and r.first_token_at - r.started_at >= 0.018
    ep2 = Endpoint("llm", "completions", (chat.url + "/v1/completions",), max_tokens=1)
    r2 = _send(MappedTarget(ep2, QUERIES, key="k"), 1)
    assert r2.status == "ok" and r2.answer == "electromagnetic" and r2.output_tokens == 1


def test_embeddings_and_rerank_presets(chat: Served) -> None:
    emb = Endpoint("embedder", "embeddings", (chat.url + "/v1/embeddings",))
    r = _send(MappedTarget(emb, QUERIES, key="k", reads="none"), 0)
    assert r.status == "ok" and r.answer == "0"  # one vector, index 0
    rr = Endpoint("reranker", "rerank", (chat.url + "/rerank",))
    got = _send(MappedTarget(rr, QUERIES, key="k", reads="ranking"), 1)
    # "gamma rays radiation": d3 holds all 3 words, the others none -> d3 first
    assert got.status == "ok" and got.answer is not None and got.answer.split()[0] == "d3"
    score = answer_scorer([Query("q1", "x", qrels=(("d1", 1),)),
                           Query("q2", "y", qrels=(("d3", 2),))], "ndcg@3")
    assert score(1, got.answer) == 1.0


def test_rag_json_and_stream_read_by_the_system_mapping(rag: Served) -> None:
    ep = Endpoint("rag", "rag", (rag.url + "/v1/ask",),
                  request={"question": "{query}", "top_k": 2}, response=RAG_MAPPING)
    r = _send(MappedTarget(ep, QUERIES, key="k", reads="ranking"), 1)
    assert r.status == "ok" and r.answer is not None and r.answer.split()[0] == "d3"
    st = Endpoint("rag", "rag", (rag.url + "/v1/ask",), stream=True,
                  request={"question": "{query}", "top_k": 2, "stream": True},
                  response={"documents": "results", "doc_id": "id", "delta": "delta"})
    s = _send(MappedTarget(st, QUERIES, key="k"), 1)
    assert s.status == "ok" and s.answer == "Gamma rays are electromagnetic radiation."
    assert s.first_token_at is not None and s.output_tokens == 5


def test_a_reply_the_mapping_does_not_fit_is_invalid_and_preflight_names_the_key(
        rag: Served) -> None:
    ep = Endpoint("rag", "rag", (rag.url + "/v1/ask",), request={"question": "{query}"},
                  response={"documents": "hits", "doc_id": "id"})
    t = MappedTarget(ep, QUERIES, key="capacity.endpoints.0")
    r = _send(t, 0)
    assert r.status == "invalid" and r.error.startswith("response.documents")

    async def pre() -> None:
        async with MappedTarget(ep, QUERIES, key="capacity.endpoints.0") as t2:
            await preflight(t2, key="capacity.endpoints.0")

    with pytest.raises(ConfigError) as e:
        asyncio.run(pre())
    assert e.value.key == "capacity.endpoints.0.response.documents"


def test_a_refused_connection_fails_the_preflight_naming_the_url() -> None:
    ep = Endpoint("rag", "rag", (f"http://127.0.0.1:{free_port()}/v1/ask",),
                  response=RAG_MAPPING)

    async def pre() -> None:
        async with MappedTarget(ep, QUERIES, key="capacity.endpoints.1") as t:
            await preflight(t, key="capacity.endpoints.1")

    with pytest.raises(ConfigError) as e:
        asyncio.run(pre())
    assert e.value.key == "capacity.endpoints.1.url" and "failed" in e.value.message


def test_bad_options_name_their_key() -> None:
    with pytest.raises(ConfigError) as e:
        MappedTarget(Endpoint("x", "rag", ("http://127.0.0.1:1/a",), response={"bogus": "a"}),
                     QUERIES, key="capacity.endpoints.2")
    assert e.value.key == "capacity.endpoints.2.response.bogus"
    with pytest.raises(ConfigError) as e:
        MappedTarget(Endpoint("x", "grpc", ("http://127.0.0.1:1/a",)), QUERIES, key="c.e.0")
    assert e.value.key == "c.e.0.api"


def test_open_loop_level_against_the_chat_server_scores_every_timed_request(
        chat: Served) -> None:
    ep = Endpoint("llm", "chat", (chat.url + "/v1/chat/completions",))
    refs = [Query("q1", "x", expected_answer="alpha is the first letter"),
            Query("q2", "y", expected_answer="electromagnetic radiation")]

    async def go():  # type: ignore[no-untyped-def]
        async with MappedTarget(ep, QUERIES, key="k") as t:
            return await run_open(poisson_arrivals(rate_rps=20, n=20, n_queries=2, seed=1), t,
                                  timeout_s=5)

    run = asyncio.run(go())
    m = summarize(run, slo_ms={"ttft": 2000}, score=answer_scorer(refs, "token_f1"))
    assert m.statuses["ok"] == 20 and m.correct == 20 and m.quality_mean == 1.0
    assert m.ttft.n == 20 and m.tpot.n == 20 and m.quality_goodput_ci is not None
