"""A served generated config (the packaged SmolLM2-135M on CPU): ``/v1/answer`` streams the
run's own answer, ``/v1/chat/completions`` speaks OpenAI's format — the existing
``generator=openai_http`` client reads it.

The run answers with ``generator.batch_size=1`` so its greedy answers are the ones a single
request gets (left padding in a batch changes float rounding).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_fixture import SMALL, in_process, served

from bench.generation.base import ChatMessage, GenerationRequest, SamplingParams
from bench.generation.openai_http import OpenAIHTTPGenerator

OVERRIDES = [*SMALL, "generator=transformers_cpu", "generator.batch_size=1",
             "generation.max_queries=2", "generation.max_tokens=12", "context.top_k=2"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cache = tmp_path_factory.mktemp("serve-gen-cache")
    p = in_process(OVERRIDES, cache)
    spec = next(c for c in p.plan.configs if c.kind == "generated")
    answers = p.executor.value(spec.answers)
    p.comps.generator.close()
    return {"prepared": p, "spec": spec, "answers": answers, "cache": cache}


@pytest.fixture(scope="module")
def server(run: dict[str, Any]) -> Iterator[Any]:
    with served([*OVERRIDES, f"config={run['spec'].config_id}"], run["cache"]) as srv:
        yield srv


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(ln.split(": ", 1) for ln in block.splitlines())
        out.append((lines.get("event", ""), json.loads(lines["data"])))
    return out


def test_answer_streams_the_runs_answer(run: dict[str, Any], server: Any) -> None:
    for gen in run["answers"]:
        with httpx.stream("POST", f"{server.base_url}/v1/answer", timeout=300,
                          json={"query_id": gen.request_id}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            events = _events(r.read().decode())
        kinds = [e for e, _ in events]
        assert kinds[0] == "retrieval" and kinds[-1] == "done"
        assert set(kinds[1:-1]) <= {"token"}
        done = events[-1][1]
        assert done["answer"] == gen.text  # the run's own greedy answer
        assert "".join(d["text"] for e, d in events if e == "token") == gen.text
        assert done["generation"]["output_tokens"] == gen.output_tokens
        hits = [h["doc_id"] for h in events[0][1]["hits"]]
        assert [c["doc_id"] for c in done["context"]] == hits[: len(done["context"])]
        assert {"embed_query", "retrieve", "context", "generate", "total"} <= set(
            done["timings_ms"])
    plain = httpx.post(f"{server.base_url}/v1/answer", timeout=300,
                       json={"query_id": run["answers"][0].request_id, "stream": False}).json()
    assert plain["answer"] == run["answers"][0].text and plain["hits"]


def test_chat_completions_speak_openai(server: Any) -> None:
    msgs = [{"role": "user", "content": "Name a colour."}]
    plain = httpx.post(f"{server.base_url}/v1/chat/completions", timeout=300,
                       json={"messages": msgs, "max_tokens": 8}).json()
    text = plain["choices"][0]["message"]["content"]
    assert plain["object"] == "chat.completion" and plain["usage"]["completion_tokens"] > 0
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", timeout=300,
                      json={"messages": msgs, "max_tokens": 8, "stream": True,
                            "stream_options": {"include_usage": True}}) as r:
        body = r.read().decode()
    blocks = [b[len("data: "):] for b in body.strip().split("\n\n")]
    assert blocks[-1] == "[DONE]"
    chunks = [json.loads(b) for b in blocks[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                       if c["choices"])
    assert streamed == text
    assert chunks[-1]["usage"] == plain["usage"]
    # the repository's own OpenAI client reads the stream: TTFT, usage, the same text
    client = OpenAIHTTPGenerator(model="smollm2", base_url=f"{server.base_url}/v1")
    try:
        (g,) = client.generate([GenerationRequest(
            "r1", (ChatMessage("user", "Name a colour."),), SamplingParams(max_tokens=8))])
    finally:
        client.close()
    assert g.status == "ok" and g.text == text and g.ttft_ms is not None
    assert g.output_tokens == plain["usage"]["completion_tokens"]
