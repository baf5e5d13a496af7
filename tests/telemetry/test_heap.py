"""The per-stage heap (RssAnon / RssFile): attribution to open stages driven by a scripted
reader, a real allocation seen by the real reader, and None (never 0) without /proc."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.telemetry.basic import BasicTelemetry
from bench.telemetry.heap import HeapWatch, MemReading, read_status
from bench.telemetry.sampler import SampledTelemetry, StageSampler

MIB = 2**20
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")


class Script:
    """The i-th reading (1-based): anon i * 10 MiB, file (10 - i) MiB."""

    def __init__(self) -> None:
        self.calls = 0

    def read(self) -> MemReading:
        self.calls += 1
        return MemReading(self.calls * 10 * MIB, (10 - self.calls) * MIB)


def test_readings_go_to_every_open_stage_marks_included() -> None:
    f = Script()
    w = HeapWatch(period_ms=60_000, reader=f.read)  # the thread never ticks in this test
    w.start_stage("a")  # 1 -> a
    w.sample()          # 2 -> a
    w.start_stage("b")  # 3 -> a, b
    b = w.stop_stage("b")  # 4 -> a, b
    w.sample()          # 5 -> a
    a = w.stop_stage("a")  # 6 -> a
    assert (a.heap_peak_bytes, a.rss_file_peak_bytes, a.n_heap_samples) == (
        6 * 10 * MIB, (10 - 1) * MIB, 6)
    assert (b.heap_peak_bytes, b.rss_file_peak_bytes, b.n_heap_samples) == (
        4 * 10 * MIB, (10 - 3) * MIB, 2)
    with pytest.raises(RuntimeError, match="never started"):
        w.stop_stage("a")


def test_without_proc_every_figure_is_none_and_no_thread_runs() -> None:
    w = HeapWatch(reader=lambda: None)
    w.start_stage("x")
    assert w._thread is None and not w.available
    peak = w.stop_stage("x")
    assert (peak.heap_peak_bytes, peak.rss_file_peak_bytes, peak.n_heap_samples) == (
        None, None, 0)
    assert read_status("/nonexistent/status") is None
    s = StageSampler(reader=None, off_reason="test", heap=HeapWatch(reader=lambda: None))
    with s.stage("x"):
        pass
    assert s.records[0].heap_peak_bytes is None and s.records[0].rss_file_peak_bytes is None
    assert s.manifest()["heap"] == "off (no /proc/self/status)"


def test_a_bad_period_names_its_key() -> None:
    with pytest.raises(OptionError, match="heap_period_ms"):
        BasicTelemetry(heap_period_ms=0)
    with pytest.raises(OptionError, match="heap_period_ms"):
        SampledTelemetry(gpu="off", heap_period_ms=-1)


@linux
def test_a_known_array_raises_the_stage_heap_by_its_size() -> None:
    """256 MiB of numpy allocated and written inside the stage (alive at its stop mark): the
    stage's heap peak is about 256 MiB above an empty stage's; file pages are not heap."""
    tel = BasicTelemetry()
    with tel.watch("empty"):
        pass
    with tel.watch("alloc"):
        x = np.ones(256 * MIB // 8)  # written: its pages are resident
    del x
    empty, alloc = tel.samples
    assert alloc.heap_peak_bytes is not None and empty.heap_peak_bytes is not None
    rise = alloc.heap_peak_bytes - empty.heap_peak_bytes
    assert 256 * MIB * 0.95 <= rise <= 256 * MIB + 64 * MIB
    assert alloc.rss_file_peak_bytes is not None and alloc.rss_file_peak_bytes > 0
    # ru_maxrss is the process' high-water mark: at least this stage's heap
    assert alloc.peak_rss_bytes >= alloc.heap_peak_bytes


def test_the_thread_reads_while_a_stage_runs_and_stops_after_it() -> None:
    f = Script()
    w = HeapWatch(period_ms=1, reader=f.read)
    w.start_stage("wait")
    for _ in range(10_000):  # until the thread has read 3 times after the start mark
        if f.calls >= 4:
            break
        threading.Event().wait(0.001)
    peak = w.stop_stage("wait")
    assert peak.n_heap_samples >= 5  # the start mark, 3 ticks, the stop mark
    assert peak.heap_peak_bytes == peak.n_heap_samples * 10 * MIB
    assert w._thread is None  # no stage open: the thread is gone


@linux
def test_the_sampler_records_the_heap_without_a_gpu() -> None:
    s = SampledTelemetry(gpu="off", heap_period_ms=10)
    with s.watch("alloc"):
        x = np.ones(64 * MIB // 8)
        assert x.sum() == 64 * MIB // 8
        del x
    (rec,) = s.records
    assert rec.sampler == "off" and rec.n_gpu_samples == 0
    assert rec.heap_peak_bytes is not None and rec.heap_peak_bytes >= 64 * MIB
    assert rec.n_heap_samples >= 2  # the start and stop marks at least
    (res,) = s.samples
    assert (res.heap_peak_bytes, res.rss_file_peak_bytes) == (rec.heap_peak_bytes,
                                                              rec.rss_file_peak_bytes)
    assert s.manifest()["heap"] == "RssAnon/RssFile every 10 ms"
    s.close()
