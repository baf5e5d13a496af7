"""Real servers for the load generator's tests: uvicorn subprocesses on free ports, waited for
with a bounded timeout and always stopped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.capacity.servers import Served, fault_proxy, synthetic

#: the synthetic service: 2 slots, 40 ms each, 4 streamed chunks -> capacity 50 req/s
SLOTS, SERVICE_MS, TOKENS = 2, 40.0, 4


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("servers") / "synthetic.log"
    with synthetic(slots=SLOTS, service_ms=SERVICE_MS, tokens=TOKENS, log_path=log) as s:
        yield s


@pytest.fixture
def fresh_service(tmp_path: Path) -> Iterator[Served]:
    """One the test may kill and restart."""
    with synthetic(slots=SLOTS, service_ms=SERVICE_MS, tokens=TOKENS,
                   log_path=tmp_path / "synthetic.log") as s:
        yield s


@pytest.fixture
def proxy(fresh_service: Served, tmp_path: Path) -> Iterator[Served]:
    with fault_proxy(fresh_service.url, log_path=tmp_path / "proxy.log") as p:
        yield p
