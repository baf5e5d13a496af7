"""``embedder=openai_http`` and ``reranker=http`` against a REAL server process
(``python -m bench.serve``, started here), not a mock: the remote run's vectors are the
in-process embedder's (cosine >= 0.9999) and its per-query metrics are identical.

The corpus is a slice of the default dataset (FOLDOC: 200 documents, 40 queries). The served
run and the in-process run share one cache, so the server loads what the in-process run
built. The retry and failure paths run against a small real HTTP server in a thread.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from server_fixture import in_process, served

from bench.embedding.openai_http import OpenAIHTTPEmbedder
from bench.http.client import JSONEndpoint, RemoteError, free_port
from bench.pipeline.run import execute, score
from bench.rerank.http import HTTPReranker

SLICE = ["dataset=foldoc", "dataset.max_docs=200", "dataset.max_queries=40", "device=cpu",
         "metrics.bootstrap_resamples=200"]
LOCAL = [*SLICE, "reranker=bi_encoder", "reranker.depths=[10]"]


def remote(url: str) -> list[str]:
    return [*SLICE, "embedder=openai_http", f"embedder.base_url={url}/v1",
            "embedder.model=packaged:all-MiniLM-L6-v2", "reranker=http",
            f"reranker.base_url={url}/v1", "reranker.depths=[10]"]


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def foldoc_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The default dataset: the checkout's ``make data`` build, else (a clean clone, as in
    CI) version 3 built here from Debian's packages (~30 s) and named by BENCH_DATA_DIR,
    which the in-process runs and the served process both read."""
    if (REPO / ".data" / "foldoc" / "manifest.json").is_file() \
            and "BENCH_DATA_DIR" not in os.environ:
        yield REPO / ".data"
        return
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("no FOLDOC build and no apt-get/dpkg-deb to make one (make data)")
    from bench.data.foldoc import build
    from bench.data.foldoc.benchmark_v3 import BuildOptionsV3
    from bench.errors import BenchError

    root = tmp_path_factory.mktemp("data")
    try:
        build(root / "foldoc", deb=None, cache_dir=root / "debs", opts=BuildOptionsV3())
    except BenchError as err:
        pytest.skip(f"Debian packages not reachable to build FOLDOC: {err}")
    old = os.environ.get("BENCH_DATA_DIR")
    os.environ["BENCH_DATA_DIR"] = str(root)
    try:
        yield root
    finally:
        if old is None:
            del os.environ["BENCH_DATA_DIR"]
        else:
            os.environ["BENCH_DATA_DIR"] = old


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("remote-cache")


@pytest.fixture(scope="module")
def local(cache: Path) -> Any:
    p = in_process(LOCAL, cache)
    configs, probe, memo = execute(p)
    return score(p, configs, probe, memo)


@pytest.fixture(scope="module")
def server(local: Any, cache: Path) -> Iterator[Any]:
    dense = next(c for c in local.plan.configs if c.kind == "dense")
    with served([*LOCAL, f"config={dense.config_id}"], cache) as srv:
        yield srv


@pytest.fixture(scope="module")
def remote_run(server: Any, cache: Path) -> Any:
    p = in_process(remote(server.base_url), cache)
    configs, probe, memo = execute(p)
    return score(p, configs, probe, memo)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_remote_vectors_match_the_in_process_embedder(local: Any, remote_run: Any) -> None:
    for node in ("embed_docs", "embed_queries"):
        mine = local.executor.value(getattr(local.plan, node)).vectors
        theirs = remote_run.executor.value(getattr(remote_run.plan, node)).vectors
        assert mine.shape == theirs.shape
        cos = _cosines(mine, theirs)
        print(f"{node}: {len(cos)} vectors, cosine min {cos.min():.9f} mean {cos.mean():.9f}, "
              f"max |difference| {np.abs(np.asarray(mine) - np.asarray(theirs)).max():.2e}")
        assert cos.min() >= 0.9999
        np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1.0, rtol=1e-5)


def test_remote_run_metrics_are_identical(local: Any, remote_run: Any) -> None:
    kinds = [str(c.kind) for c in local.plan.configs]
    assert kinds == [str(c.kind) for c in remote_run.plan.configs] == ["dense", "reranked"]
    for mine, theirs in zip(local.scores, remote_run.scores, strict=True):
        assert mine.query_ids == theirs.query_ids
        assert set(mine.values) == set(theirs.values)
        for m in mine.values:
            assert np.array_equal(np.asarray(mine.values[m]), np.asarray(theirs.values[m]),
                                  equal_nan=True), m
    # the reranked pools are the same rankings
    a = local.executor.value(local.plan.configs[1].leaf).hits
    b = remote_run.executor.value(remote_run.plan.configs[1].leaf).hits
    assert np.array_equal(a.doc_idx, b.doc_idx) and np.array_equal(a.offsets, b.offsets)


def test_remote_stages_store_their_requests(remote_run: Any) -> None:
    import pyarrow.parquet as pq

    store = remote_run.executor.store
    d = store.lookup("embed_docs", remote_run.plan.embed_docs.key)
    t = pq.read_table(d / "requests.parquet").to_pylist()
    assert t and all(r["status"] == "ok" and r["endpoint"] == "/embeddings" for r in t)
    assert all(r["server_ms"] is not None and r["latency_ms"] >= r["server_ms"] for r in t)
    n_chunks = len(remote_run.executor.value(remote_run.plan.chunk).text)
    assert sum(r["n_items"] for r in t) == n_chunks + 1  # and the one-text dimension probe


def test_a_wrong_dimension_names_the_key(server: Any) -> None:
    emb = OpenAIHTTPEmbedder(base_url=f"{server.base_url}/v1", model="m", dimensions=512)
    with pytest.raises(RemoteError) as err:
        emb.encode(["a text"], kind="document", out=np.zeros((1, 512), np.float32))
    line = err.value.one_line()
    assert line.startswith("config key embedder.dimensions: POST ")
    assert "/v1/embeddings invalid" in line and "384-d vectors" in line and "512" in line


def test_both_rerank_shapes_of_the_server_agree(server: Any) -> None:
    tei = HTTPReranker(base_url=server.base_url, api="tei", depths=[3])
    cohere = HTTPReranker(base_url=f"{server.base_url}/v1", depths=[3])
    a = tei.score(["q"], [["a", "b", "a"]])[0]
    np.testing.assert_array_equal(a, cohere.score(["q"], [["a", "b", "a"]])[0])
    assert a[0] == a[2]  # equal texts, equal scores (asked once)
    # Cohere's body sent to TEI's endpoint: refused, not retried, one line naming the key
    wrong = HTTPReranker(base_url=server.base_url, api="cohere", depths=[3])
    with pytest.raises(RemoteError, match=r"config key reranker.base_url: POST \S+/rerank "
                                          r"failed after 1 attempt: HTTP 400"):
        wrong.score(["q"], [["a"]])


@pytest.mark.parametrize(("body", "words"), [
    ({"results": [{"index": 0, "relevance_score": 0.5}]}, "1 of 2 documents not scored"),
    ({"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 1}]},
     "document 0 scored twice"),
    ({"results": [{"index": 0, "relevance_score": "high"}, {"index": 1,
                                                            "relevance_score": 1}]},
     "item 0: relevance_score 'high' is not a finite number"),
    ([{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}], "no `results` list"),
])
def test_a_malformed_rerank_mapping_is_invalid(flaky: ThreadingHTTPServer, body: Any,
                                               words: str) -> None:
    _Flaky.rerank_body = body
    rr = HTTPReranker(base_url=f"http://127.0.0.1:{flaky.server_address[1]}", depths=[3])
    with pytest.raises(RemoteError) as err:
        rr.score(["q"], [["a", "b"]])
    line = err.value.one_line()
    assert line.startswith("config key reranker.base_url: POST ") and "/rerank invalid" in line
    assert f"malformed response: {words}" in line
    assert rr.take_records()[-1].status == "invalid"


def test_an_unreachable_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "dataset=synthetic", "embedder=openai_http",
         f"embedder.base_url=http://127.0.0.1:{port}/v1", "embedder.max_retries=1",
         "embedder.backoff_s=0.01", f"cache_dir={tmp_path}", f"hydra.run.dir={tmp_path}/r"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("bench:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert errors[0].startswith(f"bench: error: config key embedder.base_url: POST "
                                f"http://127.0.0.1:{port}/v1/embeddings failed after 2 "
                                "attempts: ConnectError")
    assert "Traceback" not in proc.stderr


class _Flaky(BaseHTTPRequestHandler):
    """A real HTTP server whose first answers are 503 / 429 (with Retry-After), then 200;
    the test then shuts it down (the server dies mid-run)."""

    script: ClassVar[list[int]] = []
    seen: ClassVar[list[str]] = []
    rerank_body: ClassVar[Any] = None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(self.headers.get("Authorization", ""))
        code = self.script.pop(0) if self.script else 200
        if code != 200:
            self.send_response(code)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        if self.path.endswith("/rerank"):
            out = json.dumps(self.rerank_body).encode()
        else:
            data = [{"index": i, "embedding": [1.0, 1.0, 0.0]}
                    for i in range(len(body["input"]))]
            out = json.dumps({"data": data, "usage": {"prompt_tokens": 3}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_retries_backoff_api_key_and_a_server_that_dies(flaky: ThreadingHTTPServer,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv("BENCH_TEST_KEY", "s3cret")
    url = f"http://127.0.0.1:{flaky.server_address[1]}"
    _Flaky.script, _Flaky.seen = [503, 429], []
    emb = OpenAIHTTPEmbedder(base_url=url, model="m", api_key_env="BENCH_TEST_KEY",
                             backoff_s=0.01, max_retries=2)
    vec = emb.encode_query("x")
    np.testing.assert_allclose(vec, [[2 ** -0.5, 2 ** -0.5, 0.0]], rtol=1e-6)  # normalised
    rec = emb.take_records()
    assert [(r.status, r.attempts, r.http_status) for r in rec] == [("ok", 3, 200)]
    assert _Flaky.seen == ["Bearer s3cret"] * 3
    assert "s3cret" not in repr(emb) and "s3cret" not in json.dumps(emb.cache_params())
    # retries are bounded: 503 three times with max_retries=2 fails
    _Flaky.script = [503, 503, 503]
    with pytest.raises(RemoteError, match="failed after 3 attempts: HTTP 503"):
        emb.encode_query("x")
    # the server dies mid-run: connection refused, retried, then one line
    flaky.shutdown()
    flaky.server_close()
    end = JSONEndpoint(base_url=url, key="embedder", max_retries=1, backoff_s=0.01)
    res = end.post("/embeddings", {"input": ["x"]})
    assert res.record.status == "failed" and res.record.attempts == 2
    assert "ConnectError" in (res.record.error or "")


def test_a_pass_cut_short_resumes_from_the_memo(flaky: ThreadingHTTPServer,
                                                tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{flaky.server_address[1]}"
    texts = ["a", "b", "c"]

    def embedder() -> OpenAIHTTPEmbedder:
        return OpenAIHTTPEmbedder(base_url=url, model="m", dimensions=3, batch_size=1,
                                  max_concurrency=1, max_retries=0, memo_dir=str(tmp_path))

    _Flaky.script, _Flaky.seen = [200, 503], []
    with pytest.raises(RemoteError, match="HTTP 503"):
        embedder().encode(texts, kind="document", out=np.zeros((3, 3), np.float32))
    assert len(_Flaky.seen) == 2  # no batch is sent after the failure
    _Flaky.seen = []
    out = np.zeros((3, 3), np.float32)
    stats = embedder().encode(texts, kind="document", out=out)
    assert len(_Flaky.seen) == 2  # only the batches never answered are asked again
    np.testing.assert_allclose(out, np.full((3, 3), [2 ** -0.5, 2 ** -0.5, 0.0]), rtol=1e-6)
    assert stats.n_texts == 3
