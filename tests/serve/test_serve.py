"""``python -m bench.serve`` as a real process: its answers are the run's own values.

One server (module fixture) serves the reranked config of a small synthetic run; the run is
prepared in this process on the same cache, so every comparison is against what the batch
pipeline computed. A second server checks admission (503 beyond the queue) and the drain on
SIGTERM. The launcher always stops the servers, even when a test fails.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from server_fixture import SMALL, in_process, served

OVERRIDES = [*SMALL, "reranker=bi_encoder", "reranker.depths=[5]"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve-cache")


@pytest.fixture(scope="module")
def run(cache: Path) -> dict[str, Any]:
    p = in_process(OVERRIDES, cache)
    reranked = next(c for c in p.plan.configs if c.kind == "reranked")
    pool = p.executor.value(reranked.pool_node)  # builds the artifacts the server then loads
    return {"prepared": p, "spec": reranked, "pool": pool}


@pytest.fixture(scope="module")
def server(run: dict[str, Any], cache: Path) -> Iterator[Any]:
    # one worker, one waiting slot (the admission test, last, needs them; the others send
    # one request at a time); a long drain so that test's requests finish on a loaded machine
    with served([*OVERRIDES, f"config={run['spec'].config_id}", "serve.max_concurrency=1",
                 "serve.max_queue=1", "serve.shutdown_timeout_s=600"], cache,
                stop_timeout_s=600) as srv:
        yield srv


def test_retrieve_gives_the_runs_ranking_for_every_query(run: dict[str, Any],
                                                         server: Any) -> None:
    p, pool = run["prepared"], run["pool"]
    ids = p.dataset.doc_ids
    with httpx.Client(base_url=server.base_url, timeout=60) as c:
        for q, query in enumerate(p.dataset.queries):
            r = c.post("/v1/retrieve", json={"query_id": query.query_id})
            assert r.status_code == 200, r.text
            body = r.json()
            docs, scores = pool.hits.for_query(q)
            assert [h["doc_id"] for h in body["hits"]] == [ids[int(d)] for d in docs]
            np.testing.assert_allclose([h["score"] for h in body["hits"]], scores, rtol=1e-6)
            assert [h["rank"] for h in body["hits"]] == list(range(1, len(docs) + 1))


def test_retrieve_any_text_with_request_id_and_server_timing(run: dict[str, Any],
                                                            server: Any) -> None:
    query = run["prepared"].dataset.queries[3]
    r = httpx.post(f"{server.base_url}/v1/retrieve", timeout=60,
                   json={"query": query.text, "k": 2, "include_text": True},
                   headers={"X-Request-Id": "req-42"})
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "req-42"
    body = r.json()
    assert body["request_id"] == "req-42" and len(body["hits"]) == 2
    assert all(h["text"] for h in body["hits"])
    # the same text as the dataset's query: the same two first documents
    by_id = httpx.post(f"{server.base_url}/v1/retrieve", json={"query_id": query.query_id},
                       timeout=60).json()
    assert [h["doc_id"] for h in body["hits"]] == [h["doc_id"] for h in by_id["hits"][:2]]
    stages = {part.split(";")[0].strip() for part in r.headers["server-timing"].split(",")}
    assert {"embed_query", "retrieve", "rerank", "queue", "total"} <= stages
    ms = body["timings_ms"]
    assert ms["total"] >= ms["embed_query"] + ms["retrieve"] > 0
    assert httpx.get(f"{server.base_url}/health").headers["x-request-id"]  # fresh id


def test_embeddings_are_the_runs_embedder(run: dict[str, Any], server: Any) -> None:
    emb = run["prepared"].comps.embedder
    texts = [d.text for d in run["prepared"].dataset.documents[:5]]
    local = np.zeros((len(texts), emb.dim), dtype=np.float32)
    emb.encode(texts, kind="document", out=local)
    r = httpx.post(f"{server.base_url}/v1/embeddings", json={"input": texts, "model": "any"},
                   timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    got = np.asarray([d["embedding"] for d in sorted(body["data"], key=lambda d: d["index"])])
    assert got.shape == local.shape
    assert float(np.min(np.sum(got * local, axis=1))) >= 0.9999
    assert body["usage"]["prompt_tokens"] > 0
    b64 = httpx.post(f"{server.base_url}/v1/embeddings", timeout=60,
                     json={"input": texts[0], "encoding_format": "base64"}).json()
    vec = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(vec, got[0], rtol=1e-6, atol=1e-7)


def test_rerank_cohere_and_tei_shapes(run: dict[str, Any], server: Any) -> None:
    reranker = run["prepared"].comps.reranker
    query = run["prepared"].dataset.queries[0].text
    docs = [d.text for d in run["prepared"].dataset.documents[:6]]
    local = reranker.score([query], [docs])[0]
    cohere = httpx.post(f"{server.base_url}/v1/rerank", timeout=60,
                        json={"query": query, "documents": docs, "top_n": 4,
                              "return_documents": True}).json()
    order = sorted(range(len(docs)), key=lambda i: (-float(local[i]), i))[:4]
    assert [x["index"] for x in cohere["results"]] == order
    np.testing.assert_allclose([x["relevance_score"] for x in cohere["results"]],
                               local[order], rtol=1e-5)
    assert cohere["results"][0]["document"]["text"] == docs[order[0]]
    tei = httpx.post(f"{server.base_url}/rerank", json={"query": query, "texts": docs},
                     timeout=60).json()
    assert sorted(x["index"] for x in tei) == list(range(len(docs)))
    np.testing.assert_allclose([x["score"] for x in sorted(tei, key=lambda x: x["index"])],
                               local, rtol=1e-5)


def test_bad_requests_are_statuses_with_one_message(server: Any) -> None:
    u = server.base_url
    cases = [
        (httpx.post(f"{u}/v1/retrieve", json={}), 400, "`query`"),
        (httpx.post(f"{u}/v1/retrieve", json={"query": "x", "k": 0}), 400, "k:"),
        (httpx.post(f"{u}/v1/retrieve", json={"query_id": "nope"}), 400, "nope"),
        (httpx.post(f"{u}/v1/embeddings", json={"input": []}), 400, "input"),
        (httpx.post(f"{u}/v1/embeddings", json={"input": "x", "dimensions": 7}), 400, "384"),
        (httpx.post(f"{u}/v1/answer", json={"query": "x"}), 404, "generated config"),
        (httpx.post(f"{u}/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "hi"}]}), 404,
         "no generator"),
    ]
    for resp, status, words in cases:
        assert resp.status_code == status, resp.text
        err = resp.json()["error"]
        assert words in err["message"] and err["code"] == status


def test_ready_and_config(run: dict[str, Any], server: Any) -> None:
    ready = httpx.get(f"{server.base_url}/ready").json()
    assert ready["status"] == "ready" and ready["config_id"] == run["spec"].config_id
    cfg = httpx.get(f"{server.base_url}/v1/config").json()
    assert cfg["label"] == run["spec"].label and cfg["endpoints"]["rerank"] is True
    assert cfg["dataset"]["fingerprint"] == run["prepared"].dataset.fingerprint
    assert server.start_s is not None and server.start_s > 0
    print(f"bench.serve start: {server.start_s:.1f} s spawn -> first 200 from /ready "
          f"(warm cache; chain load {ready['load_s']:.1f} s inside the server)")


def test_a_config_error_is_one_line_and_exit_2_before_listening(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.serve", *OVERRIDES, "config=nope",
         f"cache_dir={tmp_path}", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("bench:")]
    assert len(errors) == 1 and "config key serve.config: no config 'nope'" in errors[0]
    assert "Traceback" not in proc.stderr


def test_admission_limit_and_graceful_drain(run: dict[str, Any], server: Any) -> None:
    """One worker, one waiting slot: a third request is refused 503 with Retry-After; on
    SIGTERM the two admitted requests still finish (200) and the process exits. It stops the
    module's server, so it comes last."""
    texts = [d.text for d in run["prepared"].dataset.documents] * 3  # a request of seconds
    srv = server
    results: list[int] = []

    def slow() -> None:
        r = httpx.post(f"{srv.base_url}/v1/embeddings", json={"input": texts}, timeout=600)
        results.append(r.status_code)

    threads = [threading.Thread(target=slow) for _ in range(2)]
    for t in threads:  # one running, one waiting
        t.start()
        time.sleep(0.3)
    assert not results, "the requests must still be in flight (make them longer)"
    refused = httpx.post(f"{srv.base_url}/v1/embeddings", json={"input": "x"})
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    assert "overloaded" in refused.json()["error"]["message"]
    srv.stop()  # SIGTERM while both are in flight
    for t in threads:
        t.join(timeout=600)
    assert results == [200, 200]
    assert srv.returncode is not None
