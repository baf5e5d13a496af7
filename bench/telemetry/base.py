"""Records and Protocol of telemetry.

``stage_timer`` is the one way stages measure time: it syncs CUDA before reading the clock
when asked (GPU work is asynchronous) and emits ``StageTiming`` records. A ``Telemetry``
implementation samples resources (memory, VRAM, utilisation) while a stage runs.

Adding a backend: implement ``Telemetry`` in a module here, add ``conf/telemetry/<name>.yaml``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class StageTiming:
    """One timing sample. ``sample_kind``: batch | query | total."""

    stage: str
    sample_kind: str
    n_items: int
    wall_ms: float
    device: str = "cpu"
    from_cache: bool = False
    #: the query a per-query sample belongs to (None for batch and total samples)
    query_id: str | None = None


@dataclass(frozen=True)
class ResourceSample:
    """Peak resource use observed while a stage ran.

    ``peak_rss_bytes``: the process's ``ru_maxrss`` when the stage ended (a lifetime
    high-water mark, file pages of memory-mapped files included). ``heap_peak_bytes``: the
    highest RssAnon read while the stage ran (what the process allocated itself);
    ``rss_file_peak_bytes``: the highest RssFile (mapped files' pages, which the kernel may
    evict). Both None where ``/proc/self/status`` is not there (``bench.telemetry.heap``).
    """

    stage: str
    peak_rss_bytes: int
    peak_vram_bytes: int | None = None
    mean_gpu_util_pct: float | None = None
    heap_peak_bytes: int | None = None
    rss_file_peak_bytes: int | None = None


@dataclass
class TimingLog:
    """Collects samples of one stage (mutable while the stage runs, frozen records out)."""

    stage: str
    device: str = "cpu"
    samples: list[StageTiming] = field(default_factory=list)

    def add(self, sample_kind: str, n_items: int, wall_ms: float,
            query_id: str | None = None) -> None:
        self.samples.append(StageTiming(self.stage, sample_kind, n_items, wall_ms, self.device,
                                        query_id=query_id))

    @contextmanager
    def measure(self, sample_kind: str, n_items: int, *, sync_cuda: bool = False,
                query_id: str | None = None) -> Iterator[None]:
        with stage_timer(sync_cuda=sync_cuda) as elapsed:
            yield
        self.add(sample_kind, n_items, elapsed(), query_id)


class _Elapsed:
    def __init__(self) -> None:
        self.ms: float | None = None

    def __call__(self) -> float:
        if self.ms is None:
            raise RuntimeError("elapsed time read inside the timed block")
        return self.ms


def cuda_sync() -> None:
    import torch  # only when timing GPU work

    if torch.cuda.is_available():
        torch.cuda.synchronize()


@contextmanager
def stage_timer(*, sync_cuda: bool = False) -> Iterator[_Elapsed]:
    """Time a block with perf_counter; ``elapsed()`` gives milliseconds after the block."""
    out = _Elapsed()
    if sync_cuda:
        cuda_sync()
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        if sync_cuda:
            cuda_sync()
        out.ms = (time.perf_counter() - t0) * 1000.0


class Telemetry(Protocol):
    """Samples resources while a stage runs."""

    def watch(self, stage: str) -> AbstractContextManager[None]:
        """Context manager: sample while the block runs, record a ``ResourceSample``."""
        ...

    @property
    def samples(self) -> list[ResourceSample]: ...


class VramRecord(Protocol):
    """What a per-stage telemetry record says of VRAM (``bench.telemetry.sampler``)."""

    @property
    def stage(self) -> str: ...

    @property
    def torch_peak_allocated_bytes(self) -> int | None: ...

    @property
    def gpu_used_peak_bytes(self) -> int | None: ...


@runtime_checkable
class RecordingTelemetry(Telemetry, Protocol):
    """Optional capability: one typed record per stage, a run.json manifest, a sampler thread
    to stop at the end of the run."""

    @property
    def records(self) -> Sequence[VramRecord]: ...

    def manifest(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def stage_records(telemetry: Telemetry) -> list[VramRecord]:
    """The per-stage records of a recording telemetry (none otherwise)."""
    return list(telemetry.records) if isinstance(telemetry, RecordingTelemetry) else []


def peak_vram(records: Iterable[VramRecord]) -> tuple[int, str] | None:
    """Peak VRAM over ``records`` and which figure it is: torch's peak allocated bytes (what
    the work needed) where read, else NVML's card-wide used bytes; None without a GPU
    reading."""
    recs = list(records)
    torch_peaks = [r.torch_peak_allocated_bytes for r in recs
                   if r.torch_peak_allocated_bytes is not None]
    if torch_peaks:
        return int(max(torch_peaks)), "torch_peak_allocated"
    nvml = [r.gpu_used_peak_bytes for r in recs if r.gpu_used_peak_bytes is not None]
    return (int(max(nvml)), "nvml_used") if nvml else None
