"""``embedder.replicas``: a corpus pass fanned out over several real servers (uvicorn, in
threads of this process) gives the single server's vectors; a replica that dies mid-pass is
left out and its batches are answered by the others (counted); only when every replica is down
does the pass fail, in one line."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.embedding.openai_http import OpenAIHTTPEmbedder
from bench.http.client import RemoteError, free_port
from tests.pipeline.dying_server import DIM, DyingServer

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

TEXTS = [f"passage {i} about {'kernels' if i % 3 else 'routers'} and {i % 7} caches"
         for i in range(200)]
BATCH = 8


def embedder(url: str, *replicas: str) -> OpenAIHTTPEmbedder:
    return OpenAIHTTPEmbedder(base_url=url, model="m", dimensions=DIM, batch_size=BATCH,
                              max_concurrency=2, max_retries=1, backoff_s=0.0, timeout_s=10,
                              replicas=list(replicas))


def encode(emb: OpenAIHTTPEmbedder) -> tuple[np.ndarray, object]:
    out = np.zeros((len(TEXTS), DIM), dtype=np.float32)
    stats = emb.encode(TEXTS, kind="document", out=out)
    return out, stats


def test_replicas_share_the_pass_and_give_the_single_servers_vectors() -> None:
    with DyingServer(free_port()) as one:
        single, stats1 = encode(embedder(one.url))
    with DyingServer(free_port()) as a, DyingServer(free_port()) as b:
        fanned, stats = encode(embedder(a.url, b.url))
    assert np.array_equal(fanned, single)  # bit for bit: the same batches, the same model
    assert a.seen and b.seen  # both replicas answered batches
    assert len(a.seen) + len(b.seen) == len(TEXTS) // BATCH
    assert sorted(map(tuple, a.seen + b.seen)) == sorted(map(tuple, one.seen))
    assert (stats.workers, stats.shards, stats.shards_redone) == (2, 25, 0)  # type: ignore[attr-defined]
    assert stats1.workers is None  # type: ignore[attr-defined]  # one server: no fan-out


def test_a_replica_that_dies_is_left_out_and_its_batches_redone(
        caplog: pytest.LogCaptureFixture) -> None:
    with DyingServer(free_port()) as one:
        single, _ = encode(embedder(one.url))
    with DyingServer(free_port()) as a, DyingServer(free_port(), die_after=3) as b:
        emb = embedder(a.url, b.url)
        with caplog.at_level(logging.INFO, logger="bench"):
            fanned, stats = encode(emb)
        records = emb.take_records()
    assert np.array_equal(fanned, single)  # nothing lost, nothing double-counted
    assert len(b.seen) == 3 and len(a.seen) == len(TEXTS) // BATCH - 3
    assert stats.shards_redone >= 1  # type: ignore[attr-defined]
    assert any(r.status != "ok" for r in records)  # the failed attempts are kept
    assert sum(r.status == "ok" for r in records) == len(TEXTS) // BATCH
    said = caplog.text
    assert f"replica {b.url} left out for this pass" in said
    assert "batches sent again to another replica" in said


def test_every_replica_down_fails_the_pass_in_one_line() -> None:
    with DyingServer(free_port(), die_after=2) as a, \
            DyingServer(free_port(), die_after=2) as b, pytest.raises(RemoteError) as exc:
        encode(embedder(a.url, b.url))
    assert "\n" not in exc.value.one_line() and "embedder" in str(exc.value)


@pytest.mark.parametrize(("replicas", "key"), [
    (["http://127.0.0.1:9/v1"], "replicas[0]"),  # the base_url itself again
    (["ftp://h/v1"], "replicas[0]"),
])
def test_bad_replicas_name_their_key(replicas: list[str], key: str) -> None:
    with pytest.raises(OptionError) as exc:
        embedder("http://127.0.0.1:9/v1", *replicas)
    assert exc.value.option == key
