"""A data folder for database servers the tests start (PostgreSQL via pgserver, Milvus
Lite), outside pytest's basetemp: pytest makes its basetemp 0700, and pgserver runs
PostgreSQL as the user ``pgserver`` when the tests run as root, which could not enter it
(tests/index/test_pgvector.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def server_data_dir(prefix: str, *, postgres: tuple[str, ...] = (),
                    milvus_lite: bool = False) -> Iterator[Path]:
    """A fresh folder (mode 0755); on exit the managed PostgreSQL servers whose data dirs
    are ``postgres`` (relative to it) are stopped, Milvus Lite too when asked, and the folder
    removed."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        if postgres:
            from bench.index.pgvector import stop_managed_server

            for sub in postgres:
                stop_managed_server(str(root / sub))
        if milvus_lite:
            from bench.index.milvus import stop_lite

            stop_lite()
        shutil.rmtree(root, ignore_errors=True)
