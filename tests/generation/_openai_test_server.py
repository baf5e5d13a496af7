"""A scripted OpenAI-compatible chat server for the HTTP client's tests.

Runs in a thread (``serve_in_thread``) or as a subprocess (``python _openai_test_server.py
--port N``, the managed-server test). The last user message, when it is a JSON object, scripts
the answer: ``tokens`` (content chunks), ``ttft_ms`` (sleep before the first chunk),
``itl_ms`` (sleep between chunks), ``fail`` (HTTP statuses answered to the first attempts of
this same request), ``usage`` (send the usage chunk), ``prompt_tokens``. Every request is
recorded (path, headers, body) and served back by ``GET /_requests``.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedServer

    def setup(self) -> None:
        super().setup()
        # Without it Nagle's algorithm may hold a small chunk back for tens of ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write("test-server: " + format % args + "\n")

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._json(200, {})
        elif self.path == "/v1/models":
            self._json(200, {"data": [{"id": self.server.model}]})
        elif self.path == "/_requests":
            with self.server.lock:
                self._json(200, list(self.server.received))
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        record: dict[str, Any] = {
            "path": self.path,
            "headers": dict(self.headers.items()),
            "body": body,
            "received_s": time.perf_counter(),  # CLOCK_MONOTONIC: comparable across threads
        }
        with self.server.lock:
            self.server.received.append(record)
        if self.path == "/tokenize":
            self._json(200, {"count": len(body["prompt"].split()), "max_model_len": 2048})
            return
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": "not found"})
            return
        last = body["messages"][-1]["content"]
        script = json.loads(last) if last.startswith("{") else {}
        with self.server.lock:
            attempt = self.server.attempts.get(last, 0)
            self.server.attempts[last] = attempt + 1
        fails = script.get("fail", [])
        if attempt < len(fails):
            self._json(fails[attempt], {"error": {"message": f"scripted {fails[attempt]}"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        tokens = script.get("tokens", ["Hello", " world"])
        try:
            self._event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
            time.sleep(script.get("ttft_ms", 0) / 1000.0)
            for i, tok in enumerate(tokens):
                if i:
                    time.sleep(script.get("itl_ms", 0) / 1000.0)
                last_tok = i == len(tokens) - 1
                choice = {"index": 0, "delta": {"content": tok},
                          "finish_reason": "stop" if last_tok else None}
                self._event({"choices": [choice]})
                record.setdefault("content_sent_s", []).append(time.perf_counter())
            if script.get("usage", True):
                usage = {"prompt_tokens": script.get("prompt_tokens", 7),
                         "completion_tokens": len(tokens)}
                self._event({"choices": [], "usage": usage})
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def _event(self, obj: Any) -> None:
        self._chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, model: str = "test-model") -> None:
        super().__init__((host, port), Handler)
        self.model = model
        self.lock = threading.Lock()
        self.received: list[dict[str, Any]] = []
        self.attempts: dict[str, int] = {}


def serve_in_thread(host: str = "127.0.0.1") -> ScriptedServer:
    server = ScriptedServer(host, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="test-model")
    parser.add_argument("--startup-delay-s", type=float, default=0.0)
    parser.add_argument("--ignore-sigterm", action="store_true")
    args = parser.parse_args()
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"test-server starting on port {args.port}", flush=True)
    time.sleep(args.startup_delay_s)  # the client must wait for /health, not assume
    server = ScriptedServer(args.host, args.port, args.model)
    print("test-server ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
