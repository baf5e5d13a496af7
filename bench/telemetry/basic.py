"""CPU telemetry: peak resident memory of this process per stage (no GPU needed)."""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bench.telemetry.base import ResourceSample


def peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


class BasicTelemetry:
    """Records the process's peak RSS after each stage (ru_maxrss is a high-water mark)."""

    def __init__(self) -> None:
        self._samples: list[ResourceSample] = []

    @contextmanager
    def watch(self, stage: str) -> Iterator[None]:
        try:
            yield
        finally:
            self._samples.append(ResourceSample(stage, peak_rss_bytes()))

    @property
    def samples(self) -> list[ResourceSample]:
        return list(self._samples)
