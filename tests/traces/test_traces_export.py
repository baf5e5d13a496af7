"""Evaluation events sent to an OTLP/HTTP endpoint: a receiver in a thread decodes the real
protobuf requests (opentelemetry-proto) and answers like a collector (200, 401 without the
token, 503 when told to); what it decoded must be what was written to the file."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench.traces.__main__ import main
from bench.traces.evaluations import read_events

TOKEN = "s3cret-token-value"


class _Receiver:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.fail_with: int | None = None


@pytest.fixture
def receiver() -> Iterator[tuple[str, _Receiver]]:
    state = _Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.requests.append((self.path, dict(self.headers), body))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                code, text = 401, f"bad token {self.headers.get('Authorization')}"
            elif state.fail_with is not None:  # echoes the header, as some proxies do
                code, text = state.fail_with, f"overloaded ({self.headers['Authorization']})"
            else:
                code, text = 200, ""
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, *a: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", state
    srv.shutdown()
    srv.server_close()


def _scores(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({
        "trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}", "name": "faithfulness",
        "value": i / 10, "label": "ok" if i % 2 else "bad", "explanation": f"row {i}"}) + "\n"
        for i in range(n)))
    return path


def _decoded(body: bytes) -> list[tuple[str, str, dict[str, Any]]]:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    req = ExportLogsServiceRequest()
    req.ParseFromString(body)
    out = []
    for rl in req.resource_logs:
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                attrs = {kv.key: getattr(kv.value, kv.value.WhichOneof("value"))
                         for kv in rec.attributes}
                assert rec.event_name == "gen_ai.evaluation.result"
                out.append((rec.trace_id.hex(), rec.span_id.hex(), attrs))
    return out


def test_events_reach_the_receiver_as_written(tmp_path: Path, receiver: Any,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    url, state = receiver
    monkeypatch.setenv("OTLP_TOKEN", f"Bearer {TOKEN}")
    out, delivery = tmp_path / "evals.jsonl", tmp_path / "delivery.jsonl"
    rc = main(["writeback", str(_scores(tmp_path / "s.jsonl", 5)), "--out", str(out),
               "--endpoint", url, "--header", "Authorization=OTLP_TOKEN", "--batch", "2",
               "--delivery", str(delivery)])
    assert rc == 0
    # an empty probe first (settings checked before work), then 5 events, 2 per request
    assert [(p, len(b) > 0) for p, _, b in state.requests] == \
        [("/v1/logs", False)] + [("/v1/logs", True)] * 3
    assert all(h["Content-Type"] == "application/x-protobuf" for _, h, _ in state.requests)
    got = [e for _, _, b in state.requests[1:] for e in _decoded(b)]
    written = read_events(out)
    assert [(t, s) for t, s, _ in got] == [(e.trace_id, e.span_id) for e in written]
    assert [a["gen_ai.evaluation.score.value"] for _, _, a in got] == \
        [e.value for e in written] == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert [a["gen_ai.evaluation.score.label"] for _, _, a in got] == \
        ["bad", "ok", "bad", "ok", "bad"]
    rows = [json.loads(x) for x in delivery.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["sent"] * 5


def test_a_failing_receiver_is_a_status_per_event_and_nothing_is_lost(
        tmp_path: Path, receiver: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    url, state = receiver
    monkeypatch.setenv("OTLP_TOKEN", f"Bearer {TOKEN}")
    state.fail_with = 503
    out, delivery = tmp_path / "evals.jsonl", tmp_path / "delivery.jsonl"
    rc = main(["writeback", str(_scores(tmp_path / "s.jsonl", 3)), "--out", str(out),
               "--endpoint", url, "--header", "Authorization=OTLP_TOKEN",
               "--delivery", str(delivery)])
    assert rc == 3
    assert len(read_events(out)) == 3  # kept in the file
    assert [json.loads(x)["status"] for x in delivery.read_text().splitlines()] == \
        ["http_503"] * 3
    err = capsys.readouterr().err
    assert "3 of 3 events not delivered" in err
    assert TOKEN not in err and "<Authorization from $OTLP_TOKEN>" in err
    # sent again from the file once the receiver is back
    state.fail_with = None
    assert main(["send", str(out), "--endpoint", url, "--header",
                 "Authorization=OTLP_TOKEN"]) == 0
    assert len(_decoded(state.requests[-1][2])) == 3


def test_a_wrong_token_is_refused_before_work_without_the_token(
        tmp_path: Path, receiver: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    url, state = receiver
    monkeypatch.setenv("OTLP_TOKEN", "Bearer wrong-secret-value")
    out = tmp_path / "e.jsonl"
    rc = main(["writeback", str(_scores(tmp_path / "s.jsonl", 1)), "--out", str(out),
               "--endpoint", url, "--header", "Authorization=OTLP_TOKEN"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("config key --header:") and "answered 401" in err
    assert len(err.splitlines()) == 1 and not out.exists()
    assert "wrong-secret-value" not in err  # the receiver echoed it; redacted
    assert "<Authorization from $OTLP_TOKEN>" in err
    assert [len(b) for _, _, b in state.requests] == [0]  # only the empty probe went out


def test_bad_endpoint_settings_are_one_line_before_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench.http.client import free_port

    scores = _scores(tmp_path / "s.jsonl", 1)
    out = tmp_path / "e.jsonl"
    refused = f"http://127.0.0.1:{free_port()}"
    assert main(["writeback", str(scores), "--out", str(out), "--endpoint", refused]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("config key --endpoint:") and "refused" in err.lower()
    assert len(err.splitlines()) == 1 and not out.exists()
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    assert main(["writeback", str(scores), "--out", str(out), "--endpoint", refused,
                 "--header", "Authorization=NO_SUCH_TOKEN_VAR"]) == 2
    assert "NO_SUCH_TOKEN_VAR is not set" in capsys.readouterr().err
    assert main(["writeback", str(scores), "--out", str(out), "--endpoint", "ftp://x"]) == 2
    assert capsys.readouterr().err.startswith("config key --endpoint:")
    assert not out.exists()
