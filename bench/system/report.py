"""What a run records about its black-box systems: every request (``system.parquet``) and,
per system config, the end-to-end latency split into server, network and client time.

The split, per request, on the client's monotonic clock: ``server`` is the sum of the
server's own stage timings the response mapping names (``response.server_timings``);
``client`` the time spent here parsing the body and reading it through the mapping;
``network`` what is left of the end-to-end time (transfer, connection, queueing, and any
server work the service does not report). Without mapped server timings only ``client`` is
measurable and the other two are reported as one (``network + server``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.report.fmt import num
from bench.system.base import OK, STATUSES, SystemRun

if TYPE_CHECKING:
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.view import RunView
    from bench.report.base import StageReport
    from bench.results.records import Comparison

SYSTEM_FILE = "system.parquet"
SYSTEM_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()), pa.field("config_id", pa.string()),
    pa.field("query_id", pa.string()), pa.field("status", pa.string()),
    pa.field("error", pa.string()), pa.field("http_status", pa.int64()),
    pa.field("attempts", pa.int64()), pa.field("e2e_ms", pa.float64()),
    pa.field("ttft_ms", pa.float64()), pa.field("server_ms", pa.float64()),
    pa.field("network_ms", pa.float64()), pa.field("client_ms", pa.float64()),
    pa.field("server_stages_json", pa.string()), pa.field("n_documents", pa.int64()),
])


@dataclass(frozen=True)
class SystemLatency:
    """One system config's requests: counts by status and the median split (ms) over the
    ``ok`` requests (None where not measurable)."""

    config_id: str
    label: str
    n_requests: int
    counts: tuple[tuple[str, int], ...]
    from_cache: int
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    ttft_p50_ms: float | None
    server_p50_ms: float | None
    network_p50_ms: float | None
    client_p50_ms: float | None


def _p(xs: Sequence[float | None], q: float) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(np.percentile(np.asarray(vals, dtype=np.float64), q)) if vals else None


def system_runs(done: RunView) -> list[tuple[str, str, SystemRun]]:
    """(config id, label, responses as the dataset sees them) of each system, once: the
    first kept config whose chain asks it (its answered config shares the requests)."""
    from bench.system.stage import checked

    docs = done.dataset.doc_index()
    out = []
    seen: set[str] = set()
    for c in done.configs:
        r = c.node("system")
        if (c.pool is not None and r is not None and isinstance(r.value, SystemRun)
                and r.node.key not in seen):
            seen.add(r.node.key)
            run = replace(r.value, responses=tuple(checked(x, docs)
                                                   for x in r.value.responses))
            out.append((c.spec.config_id, c.spec.label, run))
    return out


def latency_split(config_id: str, label: str, run: SystemRun) -> SystemLatency:
    ok = [r for r in run.responses if r.status == OK]
    counts = tuple((s, sum(r.status == s for r in run.responses)) for s in STATUSES)
    with_server = [r for r in ok if r.server_total_ms is not None]
    return SystemLatency(
        config_id, label, len(run.responses), counts, run.from_cache,
        _p([r.e2e_ms for r in ok], 50), _p([r.e2e_ms for r in ok], 95),
        _p([r.ttft_ms for r in ok], 50),
        _p([r.server_total_ms for r in with_server], 50) if with_server else None,
        _p([r.network_ms for r in with_server], 50) if with_server else None,
        _p([r.client_ms for r in ok], 50))


def write_system_table(done: RunView, run_dir: Path) -> tuple[SystemLatency, ...]:
    """``system.parquet`` (one row per request of each system config; not written without
    one) and each system config's latency split."""
    import json

    runs = system_runs(done)
    if not runs:
        return ()
    rows = []
    for cid, _, run in runs:
        for r in run.responses:
            rows.append({"run_id": done.run_id, "config_id": cid, "query_id": r.query_id,
                         "status": r.status, "error": r.error, "http_status": r.http_status,
                         "attempts": r.attempts, "e2e_ms": r.e2e_ms, "ttft_ms": r.ttft_ms,
                         "server_ms": r.server_total_ms, "network_ms": r.network_ms,
                         "client_ms": r.client_ms,
                         "server_stages_json": json.dumps(dict(r.server_ms)),
                         "n_documents": len(r.doc_ids)})
    pq.write_table(pa.Table.from_pylist(rows, schema=SYSTEM_SCHEMA), run_dir / SYSTEM_FILE)
    return tuple(latency_split(cid, label, run) for cid, label, run in runs)


def write(done: RunView, run_dir: Path, comparisons: Sequence[Comparison],
          latency: LatencyRun) -> StageReport | None:
    """The system stage's writer (``Stage.writer``): system.parquet and the report's
    black-box section; run.json ``stages.system`` lists the table. None without a system
    config."""
    from bench.report.base import StageReport

    systems = write_system_table(done, run_dir)
    if not systems:
        return None
    return StageReport("system", (SYSTEM_FILE,), tuple(system_section(systems)), {})


def system_section(systems: Sequence[SystemLatency]) -> list[str]:
    """The report's black-box section: requests by status and the latency split."""
    if not systems:
        return []
    lines = ["## Black-box systems", "",
             "Each request timed on the client: server = the stage timings the service "
             "reports (`system.response.server_timings`), client = parsing and mapping its "
             "response here, network = the rest of the end-to-end time. Medians over `ok` "
             "requests (ms); per request in `system.parquet`.", "",
             "| config | requests | ok / failed / timeout / invalid | from cache | e2e p50 | "
             "e2e p95 | TTFT p50 | server p50 | network p50 | client p50 |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in systems:
        c = dict(s.counts)
        net = (num(s.network_p50_ms, 1) if s.server_p50_ms is not None
               else "(with server) " + num(None if s.e2e_p50_ms is None or s.client_p50_ms
                                          is None else s.e2e_p50_ms - s.client_p50_ms, 1))
        lines.append(f"| `{s.config_id}` {s.label} | {s.n_requests} | "
                     + " / ".join(str(c.get(k, 0)) for k in STATUSES)
                     + f" | {s.from_cache} | {num(s.e2e_p50_ms, 1)} | {num(s.e2e_p95_ms, 1)} | "
                     f"{num(s.ttft_p50_ms, 1)} | {num(s.server_p50_ms, 1)} | {net} | "
                     f"{num(s.client_p50_ms, 1)} |")
    lines.append("")
    return lines
