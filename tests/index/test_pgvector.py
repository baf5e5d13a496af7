"""pgvector in a real PostgreSQL server (the pgserver wheel): build once, knobs swept, the
build reused only when complete, filters pushed into SQL, a refused server named in one line.

Each module's server lives in a temporary folder and is stopped at teardown, also on failure.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pgserver")
pytest.importorskip("psycopg")

from bench.config.build import OptionError
from bench.errors import ConfigError
from bench.index.exact import ann_recall_at_k, exact_topk
from bench.index.pgvector import (
    PgvectorIndex,
    copy_binary,
    managed_server,
    stop_managed_server,
)

N, DIM = 1500, 32


def _vectors(n: int = N, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def data_dir() -> Iterator[str]:
    # Not under pytest's basetemp: as root, pgserver runs PostgreSQL as user `pgserver`, and
    # any pytest session (others run at the same time) chmods /tmp/pytest-of-<user> to 0700,
    # locking the server out of its own data folder.
    root = tempfile.mkdtemp(prefix="bench-pgvector-")
    os.chmod(root, 0o755)
    folder = str(Path(root) / "data")
    try:
        yield folder
    finally:
        stop_managed_server(folder)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return _vectors()


@pytest.fixture(scope="module")
def q(x: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(1)
    noisy = x[:40] + 0.3 * rng.standard_normal((40, DIM)).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def test_server_starts_and_reports_itself(data_dir: str) -> None:
    info = managed_server(data_dir)
    assert info.pid > 0 and info.start_s > 0
    assert managed_server(data_dir) is info  # one server per folder per process


def test_hnsw_returns_exact_scores_and_ef_search_buys_recall(
        data_dir: str, x: np.ndarray, q: np.ndarray) -> None:
    idx = PgvectorIndex(method="hnsw", m=8, ef_construction=32, data_dir=data_dir)
    built, info = idx.build(x)
    assert (info.n_vectors, info.dim) == (N, DIM) and info.index_bytes > N * DIM * 4
    exact = exact_topk(x, q, 10)
    low = ann_recall_at_k(built.search(q, 10, {"ef_search": 10}), exact, 10).mean()
    res = built.search(q, 10, {"ef_search": 200})
    high = ann_recall_at_k(res, exact, 10).mean()
    assert high >= 0.95 and high >= low
    # scores are the database's inner products: the exact ones, to float32 rounding
    ok = res.ids[:, 0] == exact.ids[:, 0]
    np.testing.assert_allclose(res.scores[ok, 0], exact.scores[ok, 0], rtol=1e-5)
    # pgvector's HNSW yields at most ef_search rows: a deeper LIMIT comes back short
    short = built.search(q[:3], 50, {"ef_search": 20})
    assert ((short.ids >= 0).sum(axis=1) <= 20).all()
    assert "Index Scan using" in built.plan(q[0], 10, {"ef_search": 40})


def test_ivfflat_probing_every_list_is_exact(data_dir: str, x: np.ndarray,
                                             q: np.ndarray) -> None:
    idx = PgvectorIndex(method="ivfflat", lists=8, data_dir=data_dir)
    assert idx.cache_params() == {"kind": "pgvector", "method": "ivfflat", "lists": 8}
    built, _ = idx.build(x)
    exact = exact_topk(x, q, 10)
    full = ann_recall_at_k(built.search(q, 10, {"probes": 8}), exact, 10)
    assert full.min() == 1.0  # every list probed: an exhaustive scan
    one = ann_recall_at_k(built.search(q, 10, {"probes": 1}), exact, 10).mean()
    assert one < 1.0
    # the auto lists follow faiss ivf_flat's rule: round(4 sqrt(N)) clamped to N // 39
    assert PgvectorIndex(method="ivfflat", data_dir=data_dir).resolve_lists(N) == 38


def test_build_is_reused_only_when_complete(data_dir: str, x: np.ndarray, tmp_path: Path
                                            ) -> None:
    idx = PgvectorIndex(method="hnsw", m=8, ef_construction=32, data_dir=data_dir)
    first, info1 = idx.build(x)
    again, info2 = idx.build(x)
    assert again.reused and again.table == first.table and info2.build_s == info1.build_s
    # a row removed behind bench's back: the marker no longer matches, the table is rebuilt
    again._conn.execute(f'DELETE FROM "{again.table}" WHERE id = 7')
    rebuilt, _ = idx.build(x)
    assert not rebuilt.reused
    assert rebuilt._conn.execute(f'SELECT count(*) FROM "{rebuilt.table}"').fetchone()[0] == N
    # the cached artifact rebuilds a table the server lost
    rebuilt.save(tmp_path)
    rebuilt._conn.execute(f'DROP TABLE "{rebuilt.table}"')
    loaded = idx.load(tmp_path)
    assert not loaded.reused and loaded.table == first.table
    assert (loaded.search(x[:2], 1, {"ef_search": 40}).ids[:, 0] == [0, 1]).all()
    # another build option is another table
    other, _ = PgvectorIndex(method="hnsw", m=12, ef_construction=32,
                             data_dir=data_dir).build(x)
    assert other.table != first.table


def test_filters_run_in_sql(data_dir: str, x: np.ndarray, q: np.ndarray) -> None:
    bucket = (np.arange(N) % 100).astype(np.int32)  # 1 % of the rows per value
    idx = PgvectorIndex(method="hnsw", m=8, ef_construction=32, data_dir=data_dir)
    built, _ = idx.build_with_attributes(x, {"bucket": bucket})
    values = np.full(len(q), 3)
    planner = built.search_where(q, 10, {"ef_search": 40}, column="bucket", values=values)
    forced = built.search_where(q, 10, {"ef_search": 40, "force_index": 1}, column="bucket",
                                values=values)
    for res in (planner, forced):  # never a row outside the filter
        got = res.ids[res.ids >= 0]
        assert (bucket[got] == 3).all()
    # at 1 % the planner scans the 15 matching rows exactly: full lists, the exact top-10
    eligible = np.flatnonzero(bucket == 3)
    ref = exact_topk(x[eligible], q, 10)
    assert (planner.ids == eligible[ref.ids]).all()
    assert "Index Scan using" not in built.plan(q[0], 10, {}, column="bucket", value=3)
    # the ANN index forced: HNSW visits ef_search rows then filters, so lists come back short
    assert (forced.ids >= 0).sum(axis=1).mean() < 5
    assert "_ann" in built.plan(q[0], 10, {"force_index": 1}, column="bucket", value=3)


def test_binary_copy_stream_layout() -> None:
    raw = copy_binary(np.asarray([5], np.int32), np.asarray([[1.5, -2.0]], np.float32),
                      [np.asarray([9], np.int32)])
    body = raw[19:-2]
    # 3 fields; id (4 bytes) 5; vector (4 + 2*4 bytes): dim 2, unused 0, two big-endian floats
    assert body == (b"\x00\x03" + b"\x00\x00\x00\x04\x00\x00\x00\x05"
                    + b"\x00\x00\x00\x0c\x00\x02\x00\x00" + b"\x3f\xc0\x00\x00\xc0\x00\x00\x00"
                    + b"\x00\x00\x00\x04\x00\x00\x00\x09")
    assert raw[:11] == b"PGCOPY\n\xff\r\n\x00" and raw[-2:] == b"\xff\xff"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_dsn_is_one_line_naming_the_key(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.config.build import build

    port = _free_port()  # nothing listens there
    cfg = compose_cfg(["index=pgvector_hnsw",
                       f"index.dsn=postgresql://bench:secret@127.0.0.1:{port}/db",
                       "index.connect_timeout_s=1"])
    with pytest.raises(ConfigError) as err:
        build(cfg.index, "index", device="cpu")
    line = err.value.one_line()
    assert line.startswith("config key index.dsn: cannot use PostgreSQL at ")
    assert f"port={port}" in line and "secret" not in line and "\n" not in line


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"method": "flat"}, "method"),
    ({"m": 1}, "m"),
    ({"m": 40, "ef_construction": 64}, "ef_construction"),
    ({"query_params": [{"probes": 4}]}, "query_params[0].probes"),
    ({"query_params": [{"ef_search": 2000}]}, "query_params[0].ef_search"),
    ({"query_params": [{"force_index": 2}]}, "query_params[0].force_index"),
    ({"query_params": []}, "query_params"),
    ({"method": "ivfflat", "lists": 0}, "lists"),
])
def test_bad_options_name_the_key(kwargs: dict, key: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(OptionError) as err:
        PgvectorIndex(**kwargs)
    assert err.value.option == key


def test_the_server_stops_when_the_process_fails(data_dir: str) -> None:
    """bench's server goes when the process does, also when it ends in an error."""
    import subprocess
    import sys

    import psutil

    folder = str(Path(data_dir).parent / "crash")
    code = ("import sys\nfrom bench.index.pgvector import managed_server\n"
            "print(managed_server(sys.argv[1]).pid, flush=True)\nraise RuntimeError('boom')\n")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "kernels")]))
    out = subprocess.run([sys.executable, "-c", code, folder], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 1 and "boom" in out.stderr
    pid = int(out.stdout.split()[0])
    try:  # gone, or a zombie nobody has reaped yet (dead all the same)
        alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        alive = False
    assert not alive


def test_a_server_lost_mid_run_fails_the_query_and_says_so_once(
        data_dir: str, x: np.ndarray, caplog: pytest.LogCaptureFixture) -> None:
    """A search the server no longer answers is that query's status ``failed`` (the rows
    stay -1), with one warning naming the endpoint; the search goes on (each later query
    tries a fresh connection) instead of stopping the run."""
    folder = str(Path(data_dir).parent / "lost")
    try:
        built, _ = PgvectorIndex(method="hnsw", m=8, ef_construction=32,
                                 data_dir=folder).build(x[:200])
        ok = built.search(x[:2], 5, {"ef_search": 40})
        assert not ok.incomplete and (ok.ids >= 0).all()
        # the server goes away under a live connection; bench's record of it stays (a crash)
        from bench.index import pgvector as pg

        pg._HANDLES[str(Path(folder).resolve())].cleanup()
        with caplog.at_level("WARNING", logger="bench.index.pgvector"):
            res = built.search(x[:3], 5, {"ef_search": 40})
        assert dict(res.incomplete) == {0: "failed", 1: "failed", 2: "failed"}
        assert (res.ids == -1).all()
        # this module's warnings only: once a Hydra run earlier in the session has set the
        # root logger to INFO, the build's INFO lines (ours and pgserver's) are captured too
        lines = [r.getMessage() for r in caplog.records
                 if r.name == "bench.index.pgvector" and r.levelno >= logging.WARNING]
        assert len(lines) == 1 and lines[0].startswith(
            f"index: pgvector at bench's server in {folder}: a query failed (")
    finally:
        stop_managed_server(folder)
