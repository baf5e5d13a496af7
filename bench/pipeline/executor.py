"""One generic executor: resolve plan nodes through the artifact store, each key once.

Every stage goes through ``Executor.value``; no stage has its own resolve closure. A cached
op's timing samples are stored next to its artifact (``timings.parquet``) and come back with
``from_cache=True`` on later runs, so a report always says which figures this run measured.

Incomplete work is never stored: an op whose ``write`` marks its artifact incomplete
(``bench.pipeline.node.mark_incomplete``: some queries' requests to a served backend failed)
is used for this run from a scratch folder, and so is every cached node computed from an
incomplete input (its key would claim complete inputs); a rerun computes them again (the
work that was answered is kept where the backend keeps it: the embedder's batch memo, the
system's per-query responses). A backend that fails a node outright (``ServiceError``) fails
that node once: every config reading it gets the same error without asking again.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.cache.store import ArtifactStore
from bench.errors import ServiceError
from bench.pipeline.node import INCOMPLETE_FILE, CachedOp, EphemeralOp, Node
from bench.telemetry.base import StageTiming, Telemetry, TimingLog

log = logging.getLogger("bench")

TIMINGS_FILE = "timings.parquet"

_SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string()),
        pa.field("sample_kind", pa.string()),
        pa.field("n_items", pa.int64()),
        pa.field("wall_ms", pa.float64()),
        pa.field("device", pa.string()),
        pa.field("query_id", pa.string()),
    ]
)


def save_timings(samples: list[StageTiming], path: Path) -> None:
    cols = {f.name: [getattr(s, f.name) for s in samples] for f in _SAMPLE_SCHEMA}
    pq.write_table(pa.table(cols, schema=_SAMPLE_SCHEMA), path)


def load_timings(path: Path, *, from_cache: bool) -> list[StageTiming]:
    table = pq.read_table(path)
    if "query_id" not in table.column_names:  # artifacts written before samples had query ids
        table = table.append_column("query_id", pa.nulls(table.num_rows, pa.string()))
    rows = table.select(_SAMPLE_SCHEMA.names).cast(_SAMPLE_SCHEMA).to_pylist()
    return [StageTiming(**r, from_cache=from_cache) for r in rows]


@dataclass(frozen=True)
class Resolved:
    """What resolving a node gave: its value, whether it came from the cache, its samples."""

    node: Node
    value: Any
    hit: bool
    timings: tuple[StageTiming, ...]
    #: computed with some queries' work missing (or from such an input): not stored
    incomplete: bool = False


class _Unstored(Exception):
    """Stops the store from publishing an incomplete artifact (its files were moved aside)."""


class Executor:
    def __init__(self, store: ArtifactStore, telemetry: Telemetry, device: str) -> None:
        self.store = store
        self.telemetry = telemetry
        self.device = device
        self._done: dict[str, Resolved] = {}
        self._failed: dict[str, ServiceError] = {}
        self._scratch: Path | None = None

    def resolved(self, node: Node) -> Resolved:
        """Resolve ``node`` (and, first, its inputs); each key is computed or loaded once.
        A ``ServiceError`` is raised again, unasked, for every later use of a failed node."""
        done = self._done.get(node.key)
        if done is not None:
            return done
        failed = self._failed.get(node.key)
        if failed is not None:
            raise failed
        try:
            ins = [self.resolved(i) for i in node.inputs]
            inputs = node.bind({r.node.key: r.value for r in ins})
            tainted = any(r.incomplete for r in ins)
            with self.telemetry.watch(node.stage):
                if isinstance(node.op, CachedOp):
                    out = self._cached(node, node.op, inputs, tainted)
                elif isinstance(node.op, EphemeralOp):
                    timing = TimingLog(node.stage, device=self.device)
                    value = node.op.run(inputs, timing)
                    out = Resolved(node, value, False, tuple(timing.samples), tainted)
                else:
                    raise TypeError(f"node {node.label!r}: {type(node.op).__name__} has "
                                    "neither write/load nor run")
        except ServiceError as exc:
            self._failed[node.key] = exc
            raise
        self._done[node.key] = out
        return out

    def failure(self, node: Node) -> ServiceError | None:
        """The error a node failed with in this run (None: not failed)."""
        return self._failed.get(node.key)

    def _scratch_dir(self, node: Node) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="bench-incomplete-"))
            atexit.register(shutil.rmtree, self._scratch, True)
        out = self._scratch / f"{node.stage}-{node.key[:16]}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        return out

    def value(self, node: Node) -> Any:
        return self.resolved(node).value

    def _cached(self, node: Node, op: CachedOp, inputs: Any, tainted: bool) -> Resolved:
        aside: list[Path] = []

        def write(tmp: Path) -> None:
            timing = TimingLog(node.stage, device=self.device)
            op.write(inputs, tmp, timing)
            save_timings(timing.samples, tmp / TIMINGS_FILE)
            if tainted or (tmp / INCOMPLETE_FILE).is_file():
                # used by this run, never published under a key that claims complete work
                dest = self._scratch_dir(node)
                for f in tmp.iterdir():
                    shutil.move(str(f), dest / f.name)
                aside.append(dest)
                raise _Unstored

        def load(d: Path) -> tuple[Any, list[StageTiming]]:
            return op.load(d, inputs), load_timings(d / TIMINGS_FILE, from_cache=True)

        try:
            (value, timings), key, hit = self.store.resolve(
                node.stage, version=op.version, params=dict(op.params()),
                upstream=[i.key for i in node.keyed_inputs], compute=write, load=load)
        except _Unstored:
            value, timings = load(aside[0])
            log.warning("stage %-10s %s: incomplete (%s), used for this run and not cached; "
                        "a rerun computes it again", node.stage, node.label,
                        "some queries failed" if (aside[0] / INCOMPLETE_FILE).is_file()
                        else "an input is incomplete")
            return Resolved(node, value, False,
                            tuple(replace(t, from_cache=False) for t in timings), True)
        assert key == node.key, "a plan node's key must equal its artifact key"
        if not hit:  # loaded right after computing: this run's own measurements
            timings = [replace(t, from_cache=False) for t in timings]
        return Resolved(node, value, hit, tuple(timings))

    def is_cached(self, node: Node) -> bool:
        """Whether the node's artifact is in the store already (ephemeral nodes: never)."""
        return node.cached and self.store.lookup(node.stage, node.key) is not None

    @property
    def resolutions(self) -> list[Resolved]:
        return list(self._done.values())
