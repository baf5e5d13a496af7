"""bench.serve's own listening socket: its accepted connections must have TCP_NODELAY (with
Nagle's algorithm on, every response waited ~40 ms for the client's delayed ACK)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from bench.errors import ConfigError
from bench.serve.cli import bind


def test_accepted_connections_send_without_delay() -> None:
    sock = bind("127.0.0.1", 0)
    nodelay: list[int] = []

    async def main() -> None:
        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            s = writer.get_extra_info("socket")
            nodelay.append(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        port = sock.getsockname()[1]
        _, w = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if nodelay:
                break
            await asyncio.sleep(0.01)
        w.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())
    assert sock.proto == socket.IPPROTO_TCP
    assert nodelay and nodelay[0] != 0


def test_busy_port_is_a_config_error() -> None:
    held = bind("127.0.0.1", 0)
    held.listen()  # a serving port (SO_REUSEADDR lets a second bind share an idle one)
    try:
        with pytest.raises(ConfigError, match=r"serve\.port"):
            bind("127.0.0.1", held.getsockname()[1])
    finally:
        held.close()
