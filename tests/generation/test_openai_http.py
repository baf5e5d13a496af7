"""The streaming HTTP client against a real scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _openai_test_server import ScriptedServer, serve_in_thread

from bench.config.build import OptionError
from bench.generation.base import ChatMessage, GenerationRequest, SamplingParams
from bench.generation.openai_http import (
    ManagedServer,
    OpenAIHTTPGenerator,
    ServerError,
    iter_sse_data,
)

SERVER_SCRIPT = str(Path(__file__).with_name("_openai_test_server.py"))
TOLERANCE_MS = 5.0


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = serve_in_thread()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv: ScriptedServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def req(script: dict[str, object] | str, rid: str = "q1", schema: str | None = None
        ) -> GenerationRequest:
    content = script if isinstance(script, str) else json.dumps(script)
    return GenerationRequest(rid, (ChatMessage("user", content),), SamplingParams(), schema)


def test_sse_parser_joins_multiline_data_and_skips_comments() -> None:
    lines = [": keep-alive", "data: a", "data: b", "", "event: x", "data:c", "", "data: [DONE]"]
    assert list(iter_sse_data(iter(lines))) == ["a\nb", "c", "[DONE]"]


def test_ttft_and_itl_match_the_server_delays(tmp_path: Path) -> None:
    # The server sleeps ttft_ms before its first content chunk and itl_ms between chunks,
    # and records when it really sent each one (a sleep on a loaded machine overshoots, so the
    # delay it really produced is the reference; perf_counter is CLOCK_MONOTONIC, one clock
    # for all processes). It runs in its own process, as a real server would: in this one it
    # would queue for our GIL. Scheduling on a shared machine only ever ADDS delay, so the
    # smallest TTFT error over several requests estimates the systematic error (counting the
    # role-only chunk as the first token, a buffered stream, a clock started late or early);
    # ITL errors are two-sided (both ends can be delayed): their median is checked.
    import httpx

    srv = ManagedServer([sys.executable, SERVER_SCRIPT, "--port", "{port}"], model="m",
                        log_path=tmp_path / "server.log", startup_timeout_s=60)
    gen = OpenAIHTTPGenerator(model="test-model", base_url=srv.root + "/v1", backoff_s=0.0)
    out = []
    try:
        gen.generate([req({"tokens": ["w"]}, "warm")])  # connection set-up off the clock
        for i in range(9):
            script = {"tokens": ["a", "b", "c", "d"], "ttft_ms": 150, "itl_ms": 40,
                      "prompt_tokens": 11, "n": i}
            out.extend(gen.generate([req(script)]))
        received = httpx.get(srv.root + "/_requests").json()[1:]
    finally:
        gen.close()
        srv.stop()
    ttft_err, itl_err = [], []
    for g, sent in zip(out, received, strict=True):
        assert g.status == "ok" and g.finish_reason == "stop" and g.error is None
        assert g.text == "abcd"
        assert (g.prompt_tokens, g.output_tokens) == (11, 4)
        assert len(g.itl_ms) == 4 - 1
        assert g.ttft_ms is not None
        assert g.tpot_ms == pytest.approx((g.e2e_ms - g.ttft_ms) / (4 - 1))
        assert g.e2e_ms >= 150 + 3 * 40
        real_ttft = (sent["content_sent_s"][0] - sent["received_s"]) * 1000.0
        real_itl = [(b - a) * 1000.0 for a, b in
                    zip(sent["content_sent_s"], sent["content_sent_s"][1:], strict=False)]
        assert g.ttft_ms >= real_ttft >= 150
        ttft_err.append(g.ttft_ms - real_ttft)
        itl_err.extend(m - r for m, r in zip(g.itl_ms, real_itl, strict=True))
    assert min(ttft_err) < TOLERANCE_MS
    assert min(g.ttft_ms or 0 for g in out) - 150 < TOLERANCE_MS  # against the script itself
    assert abs(statistics.median(itl_err)) < TOLERANCE_MS


def test_requests_run_concurrently_up_to_the_limit(server: ScriptedServer) -> None:
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server), max_concurrency=4)
    reqs = [req({"tokens": ["x"], "ttft_ms": 300, "n": i}, f"r{i}") for i in range(4)]
    try:
        import time

        t0 = time.perf_counter()
        out = gen.generate(reqs)
        wall = time.perf_counter() - t0
    finally:
        gen.close()
    assert [g.request_id for g in out] == ["r0", "r1", "r2", "r3"]
    assert all(g.status == "ok" for g in out)
    assert wall < 4 * 0.300  # serial would take 1.2 s


def test_timeout_becomes_a_timeout_record(server: ScriptedServer) -> None:
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server), timeout_s=0.3, backoff_s=0.0)
    try:
        [g] = gen.generate([req({"tokens": ["late"], "ttft_ms": 2000})])
    finally:
        gen.close()
    assert (g.status, g.finish_reason, g.text) == ("timeout", "timeout", "")
    assert g.ttft_ms is None and g.error
    assert 300 <= g.e2e_ms < 2000


def test_500_then_200_is_retried(server: ScriptedServer) -> None:
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server), backoff_s=0.01, max_retries=3)
    try:
        [g] = gen.generate([req({"tokens": ["ok"], "fail": [500, 503]})])
    finally:
        gen.close()
    assert g.status == "ok" and g.text == "ok" and g.attempts == 2 + 1
    posts = [r for r in server.received if r["path"] == "/v1/chat/completions"]
    assert len(posts) == 2 + 1


def test_retries_are_bounded(server: ScriptedServer) -> None:
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server), backoff_s=0.0, max_retries=2)
    try:
        [g] = gen.generate([req({"fail": [429, 500, 502, 503]})])
    finally:
        gen.close()
    assert g.status == "error" and "HTTP 502" in (g.error or "") and g.attempts == 2 + 1
    assert len(server.received) == 2 + 1


def test_400_is_an_error_without_retry(server: ScriptedServer) -> None:
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server), backoff_s=0.0)
    try:
        [g] = gen.generate([req({"fail": [400]})])
    finally:
        gen.close()
    assert (g.status, g.finish_reason) == ("error", "error")
    assert "HTTP 400" in (g.error or "") and g.attempts == 1
    assert len(server.received) == 1


def test_api_key_is_sent_but_never_exposed(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-test-" + "7" * 20
    monkeypatch.setenv("BENCH_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server), api_key_env="BENCH_TEST_KEY",
                              backoff_s=0.0)
    try:
        [g] = gen.generate([req({"tokens": ["hi"], "fail": [500]})])
    finally:
        gen.close()
    assert g.status == "ok"
    assert server.received[-1]["headers"]["Authorization"] == f"Bearer {secret}"
    exposed = [json.dumps(gen.cache_params()), repr(gen), str(vars(gen)), caplog.text]
    assert not any(secret in text for text in exposed)


def test_missing_key_variable_is_an_option_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_ABSENT_KEY", raising=False)
    with pytest.raises(OptionError) as err:
        OpenAIHTTPGenerator(model="m", base_url="http://127.0.0.1:1/v1",
                            api_key_env="BENCH_ABSENT_KEY")
    assert err.value.option == "api_key_env"


def test_json_schema_goes_out_as_response_format(server: ScriptedServer) -> None:
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server))
    try:
        gen.generate([req({"tokens": ['{"a": 1}']}, schema=schema)])
    finally:
        gen.close()
    body = server.received[-1]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == json.loads(schema)
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (256, 0.0, 0)


def test_usage_missing_falls_back_to_counting(server: ScriptedServer) -> None:
    gen = OpenAIHTTPGenerator(model="m", base_url=url(server))
    try:
        [g] = gen.generate([req({"tokens": ["one", " two", " three"], "usage": False})])
        assert gen.count_tokens("a b c") == 3  # the server's /tokenize
    finally:
        gen.close()
    assert g.status == "ok" and g.output_tokens == 3  # "one two three" by /tokenize


def test_unreachable_server_is_an_error_after_retries() -> None:
    from bench.generation.openai_http import free_port

    gen = OpenAIHTTPGenerator(model="m", base_url=f"http://127.0.0.1:{free_port()}/v1",
                              backoff_s=0.0, max_retries=1)
    try:
        [g] = gen.generate([req("hello")])
    finally:
        gen.close()
    assert g.status == "error" and "ConnectError" in (g.error or "")


def test_managed_server_is_health_checked_logged_and_stopped(tmp_path: Path) -> None:
    log_path = tmp_path / "run" / "server.log"
    command = [sys.executable, SERVER_SCRIPT, "--port", "{port}", "--model", "{model}",
               "--startup-delay-s", "1.0"]
    gen = OpenAIHTTPGenerator(model="served", serve_command=command, server_log=str(log_path),
                              startup_timeout_s=60)
    assert gen.cache_params() == {"backend": "openai_http", "model": "served",
                                  "serve_command": [sys.executable]}
    try:
        [g] = gen.generate([req({"tokens": ["up"]})])  # first use starts the server
        server = gen._server
        assert server is not None
        proc = server.proc
        assert g.status == "ok" and g.text == "up"
    finally:
        gen.close()
    assert proc.poll() is not None  # stopped
    text = log_path.read_text()
    assert "test-server ready" in text and "POST /v1/chat/completions" in text
    gen.close()  # idempotent


def test_managed_server_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    command = [sys.executable, SERVER_SCRIPT, "--port", "{port}", "--ignore-sigterm"]
    srv = ManagedServer(command, model="m", log_path=tmp_path / "s.log", startup_timeout_s=60,
                        stop_timeout_s=0.5)
    srv.stop()
    assert srv.proc.returncode == -9


def test_managed_server_that_dies_is_one_error(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)", "{port}"]
    with pytest.raises(ServerError) as err:
        ManagedServer(command, model="m", log_path=tmp_path / "s.log", startup_timeout_s=30)
    assert "code 3" in str(err.value) and str(tmp_path / "s.log") in str(err.value)
    assert "boom" in (tmp_path / "s.log").read_text()


def test_missing_vllm_cli_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    from bench.errors import MissingDependencyError

    monkeypatch.setenv("PATH", str(tmp_path))  # no `vllm` on it
    gen = OpenAIHTTPGenerator(model="m", server_log=str(tmp_path / "s.log"))
    with pytest.raises(MissingDependencyError) as err:
        gen.generate([req("hi")])
    assert "[vllm]" in err.value.one_line()
    gen.close()


def test_bad_options() -> None:
    with pytest.raises(OptionError):
        OpenAIHTTPGenerator(model="m", max_concurrency=0)
    with pytest.raises(OptionError):
        OpenAIHTTPGenerator(model="m", base_url="localhost:8000")
    with pytest.raises(OptionError):
        OpenAIHTTPGenerator(model="m", serve_command=["srv", "--no-port"])


def test_managed_server_is_stopped_at_interpreter_exit(tmp_path: Path) -> None:
    import os
    import time

    # A run that never calls close(): the server (in its own session, so not taken down with
    # its parent) must still be stopped by the atexit hook.
    script = f"""
import json, sys
from bench.generation.openai_http import OpenAIHTTPGenerator
from bench.generation.base import ChatMessage, GenerationRequest
gen = OpenAIHTTPGenerator(model="m", serve_command=[sys.executable, {SERVER_SCRIPT!r},
                          "--port", "{{port}}"], server_log={str(tmp_path / "s.log")!r})
[g] = gen.generate([GenerationRequest("q", (ChatMessage("user", "hi"),))])
print(json.dumps({{"pid": gen._server.proc.pid, "status": g.status}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["status"] == "ok"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(info["pid"], 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(info["pid"], 9)
    pytest.fail("the managed server outlived the interpreter that started it")
