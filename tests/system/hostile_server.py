"""A hostile HTTP service on 127.0.0.1 (the standard library's ``http.server`` in a thread:
real sockets, real HTTP/1.1), for the served surfaces' hostile-input tests.

``behave`` maps a request to what the server does. A behaviour is chosen by the request
path's first segment, else by the ``query`` / ``input`` field of the JSON body (a query text
or an embedder input naming one):

- ``ok``: 200 with ``body`` (JSON);
- ``raw``: 200 with these bytes as the body (invalid UTF-8, ``NaN``);
- ``trickle``: 200 with a Content-Length body sent one byte every ``gap_s`` (endless for a
  huge length: a server that never stops);
- ``sse_cut``: a ``text/event-stream`` whose ``events`` are sent, then one ``data:`` line
  without its blank line, then the connection closes;
- ``echo``: ``status`` with a body that echoes the request's ``Authorization`` and
  ``X-Api-Key`` headers back (JSON, and raw ``Name: value`` lines, and the SSE ``error``
  event for a streamed request).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = dict[str, Any]


def _handler(choose: Callable[[str, Any], Behaviour]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # health
            self._send(200, b'{"ok": true}')

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            b = choose(self.path, body)
            kind = b.get("kind", "ok")
            try:
                getattr(self, f"_{kind}")(b)
            except OSError:  # the client hung up (a deadline): nothing more to send
                self.close_connection = True

        def _ok(self, b: Behaviour) -> None:
            self._send(b.get("status", 200), json.dumps(b.get("body", {})).encode())

        def _raw(self, b: Behaviour) -> None:
            self._send(200, b["bytes"])

        def _trickle(self, b: Behaviour) -> None:
            size = int(b.get("size", 10**9))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.wfile.write(b"{")
            self.wfile.flush()
            for _ in range(size - 1):
                time.sleep(b.get("gap_s", 0.5))
                self.wfile.write(b" ")
                self.wfile.flush()

        def _sse_cut(self, b: Behaviour) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for e in b.get("events", []):
                self.wfile.write(f"data: {json.dumps(e)}\n\n".encode())
            self.wfile.write(f"data: {json.dumps(b['cut'])}\n".encode())
            self.wfile.flush()
            self.close_connection = True

        def _echo(self, b: Behaviour) -> None:
            auth = self.headers.get("Authorization", "")
            key = self.headers.get("X-Api-Key", "")
            text = (json.dumps({"error": "denied", "you_sent": {"Authorization": auth,
                                                                 "X-Api-Key": key}})
                    + f"\nAuthorization: {auth}\nX-Api-Key: {key}\nyour token was {auth[7:]}\n")
            if b.get("sse"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(b"event: error\ndata: " + json.dumps(text).encode() + b"\n\n")
                self.close_connection = True
                return
            self._send(b.get("status", 401), text.encode(), "text/plain")

    return Handler


@contextmanager
def hostile(choose: Callable[[str, Any], Behaviour]) -> Iterator[str]:
    """Serve ``choose(path, json body) -> behaviour`` on a free port; yields the root URL."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(choose))
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
