"""GPU telemetry through NVML (pynvml from nvidia-ml-py), sampled on a background thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.config.build import OptionError
from bench.errors import DeviceError, MissingDependencyError
from bench.telemetry.base import ResourceSample
from bench.telemetry.basic import peak_rss_bytes
from bench.telemetry.heap import HeapWatch


class NvmlTelemetry:
    """Samples used VRAM and GPU utilisation of one device every ``interval_ms``.

    VRAM is device-wide (NVML cannot attribute it to a process on every driver), so the peak
    includes other processes on the card; the report says so.
    """

    def __init__(self, *, gpu_index: int = 0, interval_ms: int = 50,
                 heap_period_ms: float = 500.0) -> None:
        if interval_ms < 1:
            raise OptionError("interval_ms", f"must be >= 1, got {interval_ms}")
        try:
            import pynvml
        except ImportError:
            raise MissingDependencyError("nvidia-ml-py", "gpu", "NVML telemetry") from None
        try:
            pynvml.nvmlInit()
            self._handle: Any = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
        except pynvml.NVMLError as exc:
            raise DeviceError(f"telemetry: NVML cannot open GPU {gpu_index}: {exc}") from None
        self._nvml = pynvml
        self._interval_s = interval_ms / 1000.0
        self._samples: list[ResourceSample] = []
        self._heap = HeapWatch(period_ms=heap_period_ms)

    @contextmanager
    def watch(self, stage: str) -> Iterator[None]:
        stop = threading.Event()
        peak = [0]
        utils: list[int] = []

        def poll() -> None:
            while True:
                mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
                peak[0] = max(peak[0], int(mem.used))
                utils.append(int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
                if stop.wait(self._interval_s):
                    return

        thread = threading.Thread(target=poll, name=f"nvml-{stage}", daemon=True)
        self._heap.start_stage(stage)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            heap = self._heap.stop_stage(stage)
            mean_util = sum(utils) / len(utils) if utils else None
            self._samples.append(ResourceSample(stage, peak_rss_bytes(), peak[0], mean_util,
                                                heap.heap_peak_bytes, heap.rss_file_peak_bytes))

    @property
    def samples(self) -> list[ResourceSample]:
        return list(self._samples)
