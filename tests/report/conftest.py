"""Fixtures of the report tests (the run dir writer is in report_fixture.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixture import write_run


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run")
