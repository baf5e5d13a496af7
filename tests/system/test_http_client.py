"""``HTTPSystem`` against a real scripted HTTP service: templates, SSE streaming and TTFT,
retries, statuses, and the preflight's one-line config errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from scripted_fixture import serving

from bench.config.build import OptionError
from bench.errors import ConfigError
from bench.generation.openai_http import free_port
from bench.system.base import SystemQuery
from bench.system.http import HTTPSystem

APP = "tests.system.scripted_server:app"
DOCS = [{"id": "d1#0", "s": 0.9, "t": "first"}, {"id": "d2#3", "s": 0.4, "t": "second"}]
MAPPING = {"documents": "hits", "doc_id": "id", "score": "s", "passage": "t",
           "answer": "answer.text"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("script") / "script.json"
    path.write_text(json.dumps({
        "default": {"body": {"hits": DOCS, "answer": {"text": "ok"}}},
        "queries": {
            "stream me": {"gap_s": 0.05, "events": [
                {"hits": DOCS}, {"delta": "Hel"}, {"delta": "lo"},
                {"timings": {"gen": 7.5}}]},
            "bad event": {"events": [{"hits": DOCS}, "{oops"]},
            "no docs in stream": {"events": [{"delta": "x"}]},
            "slow": {"delay_s": 2.0, "body": {"hits": DOCS, "answer": {"text": "late"}}},
            "busy twice": {"fail_first": 2, "body": {"hits": DOCS, "answer": {"text": "ok"}}},
            "not found": {"status": 404, "body": {"error": "nope"}},
            "wrong shape": {"body": {"hits": {"not": "a list"}, "answer": {"text": "x"}}},
        }}))
    with serving(APP, env={"SCRIPT": str(path)}) as url:
        yield url


def system(root: str, **kw: Any) -> HTTPSystem:
    opts: dict[str, Any] = {"url": f"{root}/v1/answer", "response": MAPPING, "timeout_s": 1.0,
                            "backoff_s": 0.01, "max_retries": 2, **kw}
    return HTTPSystem(**opts)


def ask(s: HTTPSystem, *texts: str) -> list[Any]:
    try:
        return s.ask([SystemQuery(f"q{i}", t, ("staff",), "acme") for i, t in enumerate(texts)])
    finally:
        s.close()


def test_the_template_is_filled_with_typed_values(root: str) -> None:
    s = system(root, timeout_s=30.0,
               request={"q": "{query}", "who": {"roles": "{roles}", "t": "{tenant}"},
                        "note": "id={query_id}", "k": 5, "query": "{query}"})
    (r,) = ask(s, "hello")
    assert r.status == "ok" and r.doc_ids == ("d1#0", "d2#3") and r.scores == (0.9, 0.4)
    assert r.answer == "ok" and r.passages == ("first", "second")
    last = httpx.get(f"{root}/received").json()[-1]
    assert last == {"q": "hello", "who": {"roles": ["staff"], "t": "acme"}, "note": "id=q0",
                    "k": 5, "query": "hello"}


def test_chunk_ids_fold_to_their_document(root: str) -> None:
    (r,) = ask(system(root, doc_id_separator="#", timeout_s=30.0), "hello")
    assert r.doc_ids == ("d1", "d2")


def test_streamed_answer_is_joined_and_its_ttft_measured(root: str) -> None:
    s = system(root, url=f"{root}/v1/stream", stream=True, timeout_s=30.0,
               response={"documents": "hits", "doc_id": "id", "delta": "delta",
                         "server_timings": {"gen": "timings.gen"}})
    (r,) = ask(s, "stream me")
    assert r.status == "ok" and r.answer == "Hello" and r.doc_ids == ("d1#0", "d2#3")
    assert r.server_ms == (("gen", 7.5),)
    # the first delta is the second event, each sent 50 ms after the one before
    assert r.ttft_ms is not None and 90.0 <= r.ttft_ms < r.e2e_ms


def test_statuses_of_requests_that_do_not_complete(root: str) -> None:
    s = system(root, url=f"{root}/v1/stream", stream=True, timeout_s=30.0,
               response={"documents": "hits", "doc_id": "id", "delta": "delta"})
    bad, missing = ask(s, "bad event", "no docs in stream")
    assert bad.status == "invalid" and "not JSON" in (bad.error or "")
    assert missing.status == "invalid" and (missing.error or "").startswith("response.documents")
    (slow,) = ask(system(root), "slow")  # 2 s late for a 1 s limit
    assert slow.status == "timeout"
    busy, lost, shape = ask(system(root, timeout_s=30.0), "busy twice", "not found",
                            "wrong shape")
    assert busy.status == "ok" and busy.attempts == 3  # 503, 503, then answered
    assert lost.status == "failed" and lost.attempts == 1 and lost.http_status == 404
    assert shape.status == "invalid" and (shape.error or "").startswith("response.documents")


def test_concurrent_requests_keep_query_order(root: str) -> None:
    texts = [f"query {i}" for i in range(12)]
    out = ask(system(root, max_concurrency=4, timeout_s=30.0), *texts)
    assert [r.query_id for r in out] == [f"q{i}" for i in range(12)]
    assert all(r.status == "ok" for r in out)


def test_an_unreachable_endpoint_is_a_config_error_before_work() -> None:
    s = HTTPSystem(url=f"http://127.0.0.1:{free_port()}/v1/answer", response=MAPPING,
                   timeout_s=1.0, backoff_s=0.0)
    with pytest.raises(ConfigError, match=r"config key system\.url: preflight request"):
        s.preflight()


def test_a_mapping_the_response_does_not_fit_names_its_key(root: str) -> None:
    s = system(root, response={**MAPPING, "documents": "results"})
    with pytest.raises(ConfigError, match=r"config key system\.response\.documents: .*"
                                          r"'results' not found"):
        s.preflight()
    s = system(root, response={**MAPPING, "score": "score"})
    with pytest.raises(ConfigError, match=r"config key system\.response\.score"):
        s.preflight()


def test_a_dead_health_url_is_named(root: str) -> None:
    s = system(root, health_url=f"http://127.0.0.1:{free_port()}/health")
    with pytest.raises(ConfigError, match=r"config key system\.health_url: .* unreachable"):
        s.preflight()


@pytest.mark.parametrize(("opts", "key"), [
    ({"response": {"answer": "a", "bogus": "x"}}, "response.bogus"),
    ({"response": {"documents": "hits"}}, "response.doc_id"),
    ({"response": {"answer": "a", "score": "s"}}, "response.score"),
    ({"response": {"answer": "a", "delta": "d"}}, "response.delta"),
    ({"response": {"answer": "a..b"}}, "response.answer"),
    ({"response": {"doc_id": "id"}}, "response"),
    ({"response": {"answer": "a"}, "request": {"q": "{question}"}}, "request.q"),
    ({"response": {"answer": "a"}, "url": "localhost:8000"}, "url"),
    ({"response": {"answer": "a"}, "max_concurrency": 0}, "max_concurrency"),
])
def test_malformed_options_name_their_key(opts: dict[str, Any], key: str) -> None:
    with pytest.raises(OptionError) as err:
        HTTPSystem(**{"url": "http://127.0.0.1:1/x", **opts})
    assert err.value.option == key


def test_no_request_at_construction(tmp_path: Path) -> None:
    # building the option (config validation, plan_only) never touches the network
    HTTPSystem(url=f"http://127.0.0.1:{free_port()}/v1/answer", response=MAPPING)
