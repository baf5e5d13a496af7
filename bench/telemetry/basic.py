"""CPU telemetry: peak resident memory and heap of this process per stage (no GPU needed)."""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bench.telemetry.base import ResourceSample
from bench.telemetry.heap import HeapWatch


def peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


class BasicTelemetry:
    """Records the process's peak RSS after each stage (ru_maxrss is a high-water mark) and
    the stage's peak heap and file pages (RssAnon / RssFile, read at its marks and every
    ``heap_period_ms`` while it runs: ``bench.telemetry.heap``)."""

    def __init__(self, *, heap_period_ms: float = 500.0) -> None:
        self._samples: list[ResourceSample] = []
        self._heap = HeapWatch(period_ms=heap_period_ms)

    @contextmanager
    def watch(self, stage: str) -> Iterator[None]:
        self._heap.start_stage(stage)
        try:
            yield
        finally:
            heap = self._heap.stop_stage(stage)
            self._samples.append(ResourceSample(
                stage, peak_rss_bytes(), heap_peak_bytes=heap.heap_peak_bytes,
                rss_file_peak_bytes=heap.rss_file_peak_bytes))

    @property
    def samples(self) -> list[ResourceSample]:
        return list(self._samples)
