"""Hostile services at the served surfaces (issue 38): every HTTP client bench has, against a
real hostile server on 127.0.0.1 (``hostile_server``: the standard library's http.server).

- a body with invalid UTF-8 or NaN is an ``invalid`` query, never a traceback or an ``ok``;
- ``timeout_s`` bounds the whole request, body included, however slowly it trickles
  (system=http, the embedder/reranker client, the generator, the capacity driver);
- an SSE stream cut inside its last event does not dispatch it: the answer is incomplete;
- a bearer token a server echoes back never reaches an error text, the run dir, the cache
  or the output.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hostile_server import hostile
from omegaconf import OmegaConf
from scripted_fixture import REPO, compose_run

from bench.config.build import build
from bench.data.base import Dataset
from bench.errors import ConfigError
from bench.http.client import JSONEndpoint, StreamCut, iter_sse_data, redact
from bench.system.base import SystemQuery
from bench.system.http import HTTPSystem

TOKEN = "sk-planted-3c9e1f0a7b"  # the API key: must never be written or printed
ENV = "BENCH_TEST_PLANTED_KEY"
MAPPING = {"documents": "hits", "doc_id": "id", "score": "s", "answer": "answer"}
GOOD = {"hits": [{"id": "d1", "s": 0.5}], "answer": "fine"}
#: the slack a deadline may take past timeout_s (thread wake-up, a loaded 2-core box)
SLACK_S = 1.5


def _by_path(path: str, body: Any) -> dict[str, Any]:
    seg = path.strip("/").split("/")[0]
    return {
        "badutf8": {"kind": "raw", "bytes": b'{"hits": [{"id": "d1\xff", "s": 1}], '
                                            b'"answer": "x"}'},
        "nan": {"kind": "raw", "bytes": b'{"hits": [{"id": "d1", "s": NaN}], "answer": "x"}'},
        "trickle": {"kind": "trickle", "gap_s": 0.2},
        "cut": {"kind": "sse_cut", "events": [{"hits": [{"id": "d1", "s": 1.0}]},
                                              {"delta": "The answer "}],
                "cut": {"delta": "is incomplete"}},
        "echo": {"kind": "echo", "status": 401},
        "echo500": {"kind": "echo", "status": 500},
        "gencut": {"kind": "sse_cut", "events": [
            {"choices": [{"delta": {"content": "part"}}]}],
            "cut": {"choices": [{"delta": {"content": "ial"}, "finish_reason": "stop"}]}},
        "gentrickle": {"kind": "trickle", "gap_s": 0.2},
        "genecho": {"kind": "echo", "status": 500},
        "capecho": {"kind": "echo", "sse": True},
    }.get(seg, {"kind": "ok", "body": GOOD})


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    with hostile(_by_path) as url:
        yield url


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(ENV, TOKEN)
    return TOKEN


def _system(root: str, path: str, **kw: Any) -> HTTPSystem:
    opts: dict[str, Any] = {"url": f"{root}/{path}", "response": MAPPING, "timeout_s": 10.0,
                            "backoff_s": 0.01, "max_retries": 0, **kw}
    return HTTPSystem(**opts)


def _ask(s: HTTPSystem) -> Any:
    try:
        (r,) = s.ask([SystemQuery("q1", "what?")])
        return r
    finally:
        s.close()


# --- 1, 2: bodies that are not JSON ----------------------------------------------------------

def test_invalid_utf8_body_is_an_invalid_query_and_a_one_line_preflight(root: str) -> None:
    r = _ask(_system(root, "badutf8"))
    assert r.status == "invalid" and "body is not JSON" in (r.error or "")
    assert "invalid start byte" in (r.error or "")
    with pytest.raises(ConfigError) as err:
        _system(root, "badutf8").preflight()
    line = err.value.one_line()
    assert line.startswith("config key system.url: preflight request to") and "\n" not in line
    assert "invalid: body is not JSON" in line


def test_nan_in_a_body_is_an_invalid_query_not_ok(root: str) -> None:
    r = _ask(_system(root, "nan"))
    assert r.status == "invalid" and "NaN is not JSON" in (r.error or "")


# --- 3: the deadline bounds the whole request ------------------------------------------------

def test_a_trickled_body_times_out_at_timeout_s(root: str) -> None:
    t0 = time.perf_counter()
    r = _ask(_system(root, "trickle", timeout_s=1.5))
    took = time.perf_counter() - t0
    assert r.status == "timeout" and "within 1.5 s" in (r.error or "")
    assert 1.5 <= took < 1.5 + SLACK_S
    # the stream mode too (a server sending keep-alive bytes forever)
    t0 = time.perf_counter()
    r = _ask(_system(root, "trickle", timeout_s=1.0, stream=True,
                     response={"documents": "hits", "doc_id": "id", "delta": "delta"}))
    assert r.status == "timeout" and time.perf_counter() - t0 < 1.0 + SLACK_S


def test_the_remote_embedder_and_reranker_client_is_bounded_end_to_end(root: str) -> None:
    ep = JSONEndpoint(base_url=root, key="embedder", timeout_s=1.0, max_retries=2,
                      backoff_s=0.01)
    t0 = time.perf_counter()
    res = ep.post("/trickle/v1/embeddings", {"input": ["x"]})
    took = time.perf_counter() - t0
    ep.close()
    assert res.record.status == "timeout" and res.record.attempts == 1
    assert took < 1.0 + SLACK_S
    ok = JSONEndpoint(base_url=root, key="embedder", timeout_s=5.0)
    assert ok.post("/v1/embeddings", {"input": ["x"]}).ok  # a healthy one still answers
    ok.close()


def _generator(root: str, prefix: str, **kw: Any) -> Any:
    from bench.generation.openai_http import OpenAIHTTPGenerator

    return OpenAIHTTPGenerator(model="m", base_url=f"{root}/{prefix}", tokenizer=None,
                               max_retries=0, backoff_s=0.01, **kw)


def _request() -> Any:
    from bench.generation.base import ChatMessage, GenerationRequest

    return GenerationRequest("r1", (ChatMessage("user", "hi"),))


def test_the_remote_generator_is_bounded_end_to_end(root: str) -> None:
    gen = _generator(root, "gentrickle", timeout_s=1.0)
    t0 = time.perf_counter()
    (g,) = gen.generate([_request()])
    gen.close()
    assert g.status == "timeout" and time.perf_counter() - t0 < 1.0 + SLACK_S


def test_the_capacity_driver_is_bounded_end_to_end(root: str) -> None:
    from bench.capacity.driver import RetryPolicy, run_closed
    from bench.capacity.http import HttpTarget

    async def go() -> Any:
        async with HttpTarget([root], path="/trickle", body=lambda q: {"q": q},
                              timeout_s=1.0) as t:
            return await run_closed(t, users=1, n=1, n_queries=1, timeout_s=1.0,
                                    retry=RetryPolicy(retries=0))

    t0 = time.perf_counter()
    level = asyncio.run(go())
    assert [r.status for r in level.records] == ["timeout"]
    assert time.perf_counter() - t0 < 1.0 + SLACK_S


# --- 4: a stream cut inside its last event ---------------------------------------------------

def test_an_unterminated_event_is_not_dispatched() -> None:
    lines = iter(["data: one", "", "data: two"])  # the stream ends before "two"'s blank line
    got = []
    with pytest.raises(StreamCut):
        for data in iter_sse_data(lines):
            got.append(data)
    assert got == ["one"]
    assert list(iter_sse_data(iter(["data: one", "", "data: two", ""]))) == ["one", "two"]
    # OpenAI's terminator without its blank line carries no content: not a cut
    assert list(iter_sse_data(iter(["data: one", "", "data: [DONE]"]))) == ["one", "[DONE]"]


def test_a_cut_stream_is_an_incomplete_answer_not_a_scored_one(root: str) -> None:
    r = _ask(_system(root, "cut", stream=True,
                     response={"documents": "hits", "doc_id": "id", "score": "s",
                               "delta": "delta"}))
    assert r.status == "invalid" and "stream ended inside an event" in (r.error or "")
    assert r.answer is None
    gen = _generator(root, "gencut", timeout_s=10.0)
    (g,) = gen.generate([_request()])
    gen.close()
    # the cut event carried the finish reason: without it the answer is not complete
    assert g.status == "error" and "stream ended inside an event" in (g.error or "")


# --- secrets ---------------------------------------------------------------------------------

def test_redact_removes_configured_values_and_echoed_credentials() -> None:
    text = (f'{{"Authorization": "Bearer {TOKEN}"}} x-api-key: k-123456 raw {TOKEN} '
            "password=hunter22&ok=1 authorization failed")
    out = redact(text, [TOKEN])
    assert TOKEN not in out and "k-123456" not in out and "hunter22" not in out
    assert '"Authorization": "Bearer [redacted]"' in out and "x-api-key: [redacted]" in out
    assert "authorization failed" in out and "ok=1" in out


def test_no_client_puts_an_echoed_token_in_an_error(root: str, planted: str) -> None:
    # system=http: per query (system.parquet's error column) and the preflight's one line
    r = _ask(_system(root, "echo500", api_key_env=ENV))
    assert r.status == "failed" and "HTTP 500" in (r.error or "") and planted not in r.error
    assert "[redacted]" in (r.error or "")
    with pytest.raises(ConfigError) as err:
        _system(root, "echo", api_key_env=ENV).preflight()
    assert "HTTP 401" in str(err.value) and planted not in str(err.value)
    # a key given as a configured header instead of api_key_env
    r = _ask(_system(root, "echo500", headers={"X-Api-Key": planted}))
    assert r.error is not None and planted not in r.error
    # the embedder / reranker client: its records and its one-line error
    ep = JSONEndpoint(base_url=root, key="embedder", api_key_env=ENV, timeout_s=5.0,
                      max_retries=1, backoff_s=0.01)
    res = ep.post("/echo500/v1/embeddings", {"input": ["x"]})
    ep.close()
    assert res.record.status == "failed" and planted not in str(res.record.error)
    assert planted not in str(ep.fail(res.record))
    # the generator: an error status and an error event in the stream
    gen = _generator(root, "genecho", api_key_env=ENV, timeout_s=5.0)
    (g,) = gen.generate([_request()])
    gen.close()
    assert g.status == "error" and "HTTP 500" in (g.error or "")
    assert planted not in (g.error or "")
    # the capacity driver's target: a server's error event echoing a credential
    from bench.capacity.http import HttpTarget

    async def go() -> Any:
        async with HttpTarget([root], path="/capecho", body=lambda q: {"q": q},
                              headers={"Authorization": f"Bearer {planted}"}) as t:
            return await t.send(0)

    reply = asyncio.run(go())
    assert reply.status == "failed" and "server error event" in reply.error
    assert planted not in reply.error and "[redacted]" in reply.error


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return build(OmegaConf.load(REPO / "conf/dataset/synthetic.yaml"), "dataset").load()


def _grep(folder: Path, needle: bytes) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.slow  # a whole run (~20-60 s on a shared 2-core box): only a run writes every
# file the token could reach (system.parquet, logs, the artifact cache, run.json)
def test_a_run_against_a_hostile_service_is_complete_and_keeps_no_token(
        dataset: Dataset, tmp_path: Path, planted: str,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """A whole run: query 0 answers NaN, query 1 invalid UTF-8, query 2 a 500 echoing the
    bearer token; the run completes (those three not scored) and the token is nowhere."""
    qs = dataset.queries
    bad = {qs[0].text: {"kind": "raw", "bytes": b'{"hits": [{"id": "x", "s": NaN}]}'},
           qs[1].text: {"kind": "raw", "bytes": b'{"hits": [{"id": "\xc3\x28"}]}'},
           qs[2].text: {"kind": "echo", "status": 500}}

    def choose(path: str, body: Any) -> dict[str, Any]:
        q = str(body.get("query", ""))
        if q in bad:
            return bad[q]
        gold = [d for d, _ in sorted(next((x.qrels for x in qs if x.text == q), ()),
                                     key=lambda r: -r[1])] or [dataset.doc_ids[0]]
        return {"kind": "ok", "body": {"hits": [{"id": d, "s": 1.0, "text": "a passage"}
                                                for d in gold], "answer": "an answer"}}

    caplog.set_level("DEBUG")
    with hostile(choose) as url:
        mapping = json.dumps({**MAPPING, "passage": "text"}).replace('"', "")
        result = compose_run(["system=http", f"system.url={url}/v1/answer",
                              f"system.api_key_env={ENV}", "system.timeout_s=10",
                              "system.max_retries=1", "system.backoff_s=0.01",
                              "system.response.server_timings=null",
                              f"system.response={mapping}"],
                             tmp_path / "cache", tmp_path / "run")
    assert (result.run_dir / "run.json").is_file()  # complete: NaN no longer ends the run
    rows = pq.read_table(result.run_dir / "system.parquet").to_pylist()
    status = {r["query_id"]: r["status"] for r in rows}
    assert status[qs[0].query_id] == "invalid" and status[qs[1].query_id] == "invalid"
    assert status[qs[2].query_id] == "failed"
    assert sum(s == "ok" for s in status.values()) == len(qs) - 3
    echoed = next(r["error"] for r in rows if r["query_id"] == qs[2].query_id)
    assert "HTTP 500" in echoed and "[redacted]" in echoed
    out = capsys.readouterr()
    needle = planted.encode()
    assert _grep(tmp_path / "run", needle) == [] and _grep(tmp_path / "cache", needle) == []
    assert planted not in out.out + out.err and planted not in caplog.text
    assert os.environ[ENV] == planted  # the key was set all along
