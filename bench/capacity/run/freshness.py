"""``capacity.freshness``: the freshness-under-ingest study (:mod:`bench.capacity.freshness`)
after the run's capacity study, or alone (``+experiment=freshness``).

Its files go to ``<run>/freshness/`` (``freshness.json``, ``freshness.md``); with a capacity
study, its tables are appended to that study's report lines (so the run's report shows them)
and its folder to the study's files; alone, the tables are logged.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.capacity.base import CapacityRun
from bench.capacity.freshness import run_configured

log = logging.getLogger("bench")


def with_freshness(capacity: CapacityRun | None, node: Any, run_dir: Path
                   ) -> CapacityRun | None:
    out = run_dir / "freshness"
    _, lines = run_configured(node, out)
    if capacity is None:
        for line in lines:
            log.info("freshness: %s", line)
        return None
    return replace(capacity, lines=(*capacity.lines, *lines),
                   files=(*capacity.files, str(out.relative_to(run_dir))))
