"""The null server the generator's ceiling is measured against: real HTTP/1.1 over a socket,
keep-alive, pipelined requests answered in order, ``connection: close`` honoured."""

from __future__ import annotations

import asyncio
import json
import socket

from bench.capacity.http import HttpTarget
from bench.capacity.servers import null_server


def _post(body: bytes, *, close: bool = False) -> bytes:
    return (b"POST /v1/answer HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            + (b"connection: close\r\n" if close else b"")
            + b"content-length: %d\r\n\r\n" % len(body) + body)


def _read_replies(sock: socket.socket, n: int) -> list[bytes]:
    buf, out = b"", []
    while len(out) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buf[:end].lower()
            size = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            if len(buf) < end + 4 + size:
                break
            out.append(buf[end + 4:end + 4 + size])
            buf = buf[end + 4 + size:]
    return out


def test_null_server_keep_alive_pipelining_and_close(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with null_server(log_path=tmp_path / "null.log") as null:
        with socket.create_connection(("127.0.0.1", null.port), timeout=5) as s:
            # three requests in one write (pipelined): three replies, in order
            s.sendall(_post(b'{"query": 1}') + _post(b'{"query": 22}') + _post(b"{}"))
            assert [json.loads(b) for b in _read_replies(s, 3)] == [{"answer": "null"}] * 3
            s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
            assert json.loads(_read_replies(s, 1)[0]) == {"status": "ok"}
            body = b'{"query": 3}'
            s.sendall(_post(body)[:-5])
            s.sendall(_post(body)[-5:])
            assert _read_replies(s, 1) == [b'{"answer":"null"}']
            s.sendall(_post(b"{}", close=True))
            assert _read_replies(s, 1) == [b'{"answer":"null"}']
            assert s.recv(10) == b""  # the server closed the connection

        async def go():  # type: ignore[no-untyped-def]
            async with HttpTarget([null.url], path="/v1/answer",
                                  body=lambda q: {"query": q}) as t:
                return await asyncio.gather(*(t.send(q) for q in range(50)))

        replies = asyncio.run(go())
    assert [r.status for r in replies] == ["ok"] * 50
    assert {r.answer for r in replies} == {"null"}
