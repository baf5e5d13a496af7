"""Stage telemetry: one background sampler thread, stage marks, typed records per stage.

What each figure means (kept apart on purpose — "VRAM needed" is not "VRAM reserved"):

- ``gpu_used_peak_bytes``: device-wide memory in use (NVML), max over the stage's samples.
  Includes the CUDA context, allocator caches, vLLM's pre-reserved KV cache and other
  processes on the card: what the card had to hold, not what the stage needed.
- ``torch_peak_allocated_bytes``: ``torch.cuda.max_memory_allocated`` over the stage (reset at
  its start): the tensors the stage really needed in this process.
- ``kv_cache_reserved_bytes``: what a serving engine (vLLM) reserved for its KV cache, from a
  hook the generation backend registers (:meth:`StageSampler.set_kv_cache_probe`).
- ``gpu_util_mean_pct``, ``power_mean_w``: mean over the stage's samples;
  ``energy_j``: the board's energy counter difference between the stage's start and stop
  marks when the driver has one, else power integrated over the samples (trapezoid).
- ``cpu_time_s`` (user + system of this process), ``rss_start_bytes``/``rss_end_bytes``
  (/proc/self/statm) and ``process_peak_rss_bytes`` (``ru_maxrss``: a process-lifetime
  high-water mark, not resettable per stage) are always recorded, GPU or not.
- ``heap_peak_bytes`` / ``rss_file_peak_bytes``: the highest RssAnon / RssFile of this
  process while the stage ran (``bench.telemetry.heap``: read at the marks and every
  ``heap_period_ms`` on a thread of its own, GPU or not); None off Linux.

Without a GPU (or without nvidia-ml-py) the sampler is off and every record says so:
``sampler="off"`` with ``sampler_off_reason``; GPU fields are None, never 0.

Attribution: a sample taken at time t belongs to every stage open at t (stages may nest:
``embed`` inside ``index``); the start and stop marks take a reading themselves, so a stage
shorter than the period still has two samples.
"""

from __future__ import annotations

import itertools
import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from bench.config.build import OptionError
from bench.telemetry.base import ResourceSample
from bench.telemetry.heap import HeapWatch


@dataclass(frozen=True)
class GpuReading:
    """One NVML reading. ``energy_mj``: the board's cumulative energy counter (None when the
    driver does not expose it)."""

    vram_used_bytes: int
    gpu_util_pct: float
    power_w: float
    energy_mj: float | None = None


@dataclass(frozen=True)
class StageTelemetry:
    """Resource use of one stage (one start/stop pair). Units in the field names."""

    stage: str
    wall_ms: float
    cpu_time_s: float
    rss_start_bytes: int
    rss_end_bytes: int
    process_peak_rss_bytes: int
    #: "nvml" | "off"
    sampler: str
    sampler_off_reason: str | None
    sample_period_ms: float | None
    n_gpu_samples: int
    gpu_used_peak_bytes: int | None
    gpu_util_mean_pct: float | None
    power_mean_w: float | None
    energy_j: float | None
    torch_peak_allocated_bytes: int | None
    kv_cache_reserved_bytes: int | None
    heap_peak_bytes: int | None = None
    rss_file_peak_bytes: int | None = None
    n_heap_samples: int = 0

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


Reader = Callable[[], GpuReading]


def rss_bytes() -> int:
    """Current resident set size of this process (Linux /proc; ru_maxrss elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return process_peak_rss_bytes()


def process_peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def cpu_time_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def nvml_reader(gpu_index: int = 0) -> tuple[Reader | None, str | None]:
    """(reader, None) for a working NVML device, else (None, why the sampler is off)."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py not installed (extra: gpu)"
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
    except pynvml.NVMLError as exc:
        return None, f"no NVML GPU {gpu_index}: {exc}"
    try:
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        has_energy = True
    except pynvml.NVMLError:
        has_energy = False

    def read() -> GpuReading:
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        energy = float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)) if has_energy else None
        return GpuReading(int(mem.used), float(util.gpu), float(power), energy)

    return read, None


def _torch_cuda() -> Any:
    """torch.cuda when torch is already imported and CUDA initialised; never imports torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cuda = torch.cuda
    return cuda if cuda.is_available() and cuda.is_initialized() else None


@dataclass
class _Open:
    stage: str
    t0: float
    cpu0: float
    rss0: int
    samples: list[tuple[float, GpuReading]]


class StageSampler:
    """Samples the GPU every ``period_ms`` on one daemon thread; ``stage(name)`` marks a stage.

    ``reader``: a function returning a :class:`GpuReading` (NVML's by default; tests inject a
    fake). ``reader=None`` with ``off_reason`` turns the sampler off (CPU-only records).
    ``clock``: seconds, monotonic (perf_counter by default). ``heap``: the per-stage heap
    watch (its own thread, on with or without a GPU).
    """

    def __init__(self, *, reader: Reader | None, period_ms: float = 50.0,
                 off_reason: str | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 heap: HeapWatch | None = None) -> None:
        if period_ms <= 0:
            raise OptionError("period_ms", f"must be > 0, got {period_ms}")
        self._reader = reader
        self.period_ms = float(period_ms)
        self.off_reason = off_reason if reader is None else None
        if reader is None and not off_reason:
            self.off_reason = "no GPU reader"
        self._clock = clock
        self._lock = threading.Lock()
        self._open: list[_Open] = []
        self._records: list[StageTelemetry] = []
        self._kv_probe: Callable[[], int | None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._heap = heap if heap is not None else HeapWatch()

    @classmethod
    def for_device(cls, device: str, *, period_ms: float = 50.0,
                   gpu_index: int = 0) -> StageSampler:
        """NVML sampler on ``cuda``; off (saying why) on ``cpu`` or when NVML is unusable."""
        if device != "cuda":
            return cls(reader=None, period_ms=period_ms, off_reason=f"device is {device}")
        reader, why = nvml_reader(gpu_index)
        return cls(reader=reader, period_ms=period_ms, off_reason=why)

    @property
    def on(self) -> bool:
        return self._reader is not None

    def set_kv_cache_probe(self, probe: Callable[[], int | None] | None) -> None:
        """Register how to read the serving engine's reserved KV-cache bytes (read at stop)."""
        self._kv_probe = probe

    # -- thread -----------------------------------------------------------------------------
    def start(self) -> None:
        if self._reader is None or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="bench-telemetry", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def __enter__(self) -> StageSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _loop(self) -> None:
        period = self.period_ms / 1000.0
        while not self._stop.wait(period):
            self.sample()

    def sample(self) -> None:
        """Take one reading now and attribute it to every open stage (the thread's tick;
        public so tests can drive it deterministically)."""
        if self._reader is None:
            return
        reading = self._reader()
        t = self._clock()
        with self._lock:
            for o in self._open:
                o.samples.append((t, reading))

    def _mark_reading(self) -> tuple[float, GpuReading] | None:
        return (self._clock(), self._reader()) if self._reader is not None else None

    # -- marks ------------------------------------------------------------------------------
    def start_stage(self, stage: str, *, sync_cuda: bool = False) -> None:
        cuda = _torch_cuda()
        if cuda is not None:
            if sync_cuda:
                cuda.synchronize()
            cuda.reset_peak_memory_stats()
        self._heap.start_stage(stage)
        first = self._mark_reading()
        o = _Open(stage, self._clock(), cpu_time_s(), rss_bytes(), [])
        with self._lock:
            self._open.append(o)
            if first is not None:
                # a mark's reading belongs to every stage open at that moment, like a tick's
                for each in self._open:
                    each.samples.append(first)

    def stop_stage(self, stage: str, *, sync_cuda: bool = False) -> StageTelemetry:
        cuda = _torch_cuda()
        if cuda is not None and sync_cuda:
            # GPU work is asynchronous: the stage ends when its kernels do
            cuda.synchronize()
        last = self._mark_reading()
        t1, cpu1 = self._clock(), cpu_time_s()
        with self._lock:
            idx = max((i for i, o in enumerate(self._open) if o.stage == stage), default=None)
            if idx is None:
                raise RuntimeError(f"telemetry: stage {stage!r} stopped but never started")
            if last is not None:
                for each in self._open:
                    each.samples.append(last)
            o = self._open.pop(idx)
        heap = self._heap.stop_stage(stage)
        rec = StageTelemetry(
            stage=stage, wall_ms=(t1 - o.t0) * 1000.0, cpu_time_s=cpu1 - o.cpu0,
            rss_start_bytes=o.rss0, rss_end_bytes=rss_bytes(),
            process_peak_rss_bytes=process_peak_rss_bytes(),
            sampler="nvml" if self.on else "off", sampler_off_reason=self.off_reason,
            sample_period_ms=self.period_ms if self.on else None,
            **_gpu_figures(o.samples),
            torch_peak_allocated_bytes=(int(cuda.max_memory_allocated())
                                        if cuda is not None else None),
            kv_cache_reserved_bytes=self._kv_probe() if self._kv_probe is not None else None,
            heap_peak_bytes=heap.heap_peak_bytes, rss_file_peak_bytes=heap.rss_file_peak_bytes,
            n_heap_samples=heap.n_heap_samples)
        with self._lock:
            self._records.append(rec)
        return rec

    @contextmanager
    def stage(self, name: str, *, sync_cuda: bool = False) -> Iterator[None]:
        self.start_stage(name, sync_cuda=sync_cuda)
        try:
            yield
        finally:
            self.stop_stage(name, sync_cuda=sync_cuda)

    def manifest(self) -> dict[str, Any]:
        """The ``telemetry`` entry of run.json: what sampled, and one row per stage."""
        how = (f"nvml every {self.period_ms:g} ms" if self.on
               else f"off ({self.off_reason})")
        heap = (f"RssAnon/RssFile every {self._heap.period_ms:g} ms" if self._heap.available
                else "off (no /proc/self/status)")
        return {"sampler": how, "heap": heap, "stages": [r.as_row() for r in self.records]}

    @property
    def records(self) -> list[StageTelemetry]:
        with self._lock:
            return list(self._records)


def _gpu_figures(samples: list[tuple[float, GpuReading]]) -> dict[str, Any]:
    if not samples:
        return {"n_gpu_samples": 0, "gpu_used_peak_bytes": None, "gpu_util_mean_pct": None,
                "power_mean_w": None, "energy_j": None}
    samples = sorted(samples, key=lambda s: s[0])
    rs = [r for _, r in samples]
    first, last = rs[0].energy_mj, rs[-1].energy_mj
    if first is not None and last is not None:
        energy: float | None = (last - first) / 1000.0
    elif len(samples) > 1:
        energy = sum((t1 - t0) * (a.power_w + b.power_w) / 2.0
                     for (t0, a), (t1, b) in itertools.pairwise(samples))
    else:
        energy = None
    return {"n_gpu_samples": len(rs),
            "gpu_used_peak_bytes": max(r.vram_used_bytes for r in rs),
            "gpu_util_mean_pct": sum(r.gpu_util_pct for r in rs) / len(rs),
            "power_mean_w": sum(r.power_w for r in rs) / len(rs), "energy_j": energy}


class SampledTelemetry(StageSampler):
    """The ``Telemetry`` protocol (``watch``/``samples``) on top of :class:`StageSampler`, built
    from config (``conf/telemetry/sampled.yaml``).

    gpu: ``auto`` samples through NVML when a GPU answers and is off (saying why) otherwise;
    ``off`` never samples the GPU. CPU time and RSS are recorded either way.
    """

    def __init__(self, *, period_ms: float = 50.0, gpu_index: int = 0,
                 gpu: str = "auto", heap_period_ms: float = 500.0) -> None:
        if gpu not in ("auto", "off"):
            raise OptionError("gpu", f"must be auto or off, got {gpu!r}")
        if gpu_index < 0:
            raise OptionError("gpu_index", f"must be >= 0, got {gpu_index}")
        reader, why = nvml_reader(gpu_index) if gpu == "auto" else (None, "gpu=off")
        super().__init__(reader=reader, period_ms=period_ms, off_reason=why,
                         heap=HeapWatch(period_ms=heap_period_ms))

    def watch(self, stage: str) -> AbstractContextManager[None]:
        self.start()  # idempotent: one thread for the whole run
        return self.stage(stage)

    @property
    def samples(self) -> list[ResourceSample]:
        return [ResourceSample(r.stage, r.process_peak_rss_bytes, r.gpu_used_peak_bytes,
                               r.gpu_util_mean_pct, r.heap_peak_bytes, r.rss_file_peak_bytes)
                for r in self.records]
