"""Stage attribution of the telemetry sampler, driven by a scripted fake NVML reader."""

from __future__ import annotations

import time

import pytest

from bench.telemetry.sampler import GpuReading, StageSampler

MIB = 2**20


class Script:
    """Fake reader: the i-th call (1-based) reads i * 100 MiB, util 10*i %, power 50 W and an
    energy counter of 10_000 * i mJ; the clock is set by the test."""

    def __init__(self, energy: bool = True) -> None:
        self.calls = 0
        self.energy = energy
        self.now = 0.0

    def read(self) -> GpuReading:
        self.calls += 1
        i = self.calls
        return GpuReading(i * 100 * MIB, 10.0 * i, 50.0, 10_000.0 * i if self.energy else None)

    def clock(self) -> float:
        return self.now


def test_samples_go_to_every_open_stage_and_marks_read_too() -> None:
    f = Script()
    s = StageSampler(reader=f.read, period_ms=50, clock=f.clock)
    s.start_stage("a")   # reading 1 -> a
    s.sample()           # 2 -> a
    s.sample()           # 3 -> a
    s.start_stage("b")   # 4 -> a, b
    s.sample()           # 5 -> a, b
    b = s.stop_stage("b")  # 6 -> a, b
    s.sample()           # 7 -> a
    a = s.stop_stage("a")  # 8 -> a
    assert (a.n_gpu_samples, b.n_gpu_samples) == (8, 3)
    assert a.gpu_used_peak_bytes == 800 * MIB
    assert b.gpu_used_peak_bytes == 600 * MIB
    assert b.gpu_util_mean_pct == pytest.approx((40 + 50 + 60) / 3)
    assert a.gpu_util_mean_pct == pytest.approx(10 * sum(range(1, 9)) / 8)
    # energy counter difference between the stage's first and last reading, mJ -> J
    assert a.energy_j == pytest.approx(10_000 * (8 - 1) / 1000)
    assert b.energy_j == pytest.approx(10_000 * (6 - 4) / 1000)
    assert (a.sampler, a.sampler_off_reason, a.sample_period_ms) == ("nvml", None, 50.0)
    assert [r.stage for r in s.records] == ["b", "a"]


def test_energy_integrates_power_without_a_counter() -> None:
    f = Script(energy=False)
    s = StageSampler(reader=f.read, clock=f.clock)
    s.start_stage("x")     # t = 0
    f.now = 1.0
    s.sample()
    f.now = 2.0
    rec = s.stop_stage("x")
    # 50 W constant over 2 s, trapezoid over samples at 0, 1, 2 s
    assert rec.energy_j == pytest.approx(50.0 * 2.0)
    assert rec.wall_ms == pytest.approx(2000.0)


def test_sampler_off_says_so_and_cpu_figures_remain() -> None:
    s = StageSampler.for_device("cpu")
    assert not s.on
    with s.stage("busy"):
        total = sum(i * i for i in range(300_000))
    rec = s.records[0]
    assert total > 0
    assert (rec.sampler, rec.sampler_off_reason) == ("off", "device is cpu")
    assert rec.n_gpu_samples == 0
    for name in ("gpu_used_peak_bytes", "gpu_util_mean_pct", "power_mean_w", "energy_j",
                 "torch_peak_allocated_bytes", "sample_period_ms"):
        assert getattr(rec, name) is None, name
    assert rec.cpu_time_s > 0
    assert rec.rss_end_bytes > 0 and rec.process_peak_rss_bytes >= rec.rss_end_bytes // 2
    assert s.manifest()["sampler"] == "off (device is cpu)"
    assert s.manifest()["stages"][0]["stage"] == "busy"


def test_thread_samples_at_its_period() -> None:
    f = Script()
    with StageSampler(reader=f.read, period_ms=5) as s, s.stage("sleep"):
        time.sleep(0.2)
    rec = s.records[0]
    # 200 ms / 5 ms = 40 ticks on an idle machine; a loaded one still gets several
    assert 2 + 5 <= rec.n_gpu_samples <= 2 + 200 / 5 + 2
    assert rec.sample_period_ms == 5


def test_kv_cache_probe_and_unbalanced_stop() -> None:
    s = StageSampler(reader=None, off_reason="test")
    s.set_kv_cache_probe(lambda: 3 * 2**30)
    with s.stage("generate"):
        pass
    assert s.records[0].kv_cache_reserved_bytes == 3 * 2**30
    with pytest.raises(RuntimeError, match="never started"):
        s.stop_stage("nope")


@pytest.mark.gpu
def test_real_nvml_separates_needed_from_used() -> None:
    import torch

    torch.zeros(1, device="cuda")  # initialise the context before the stage
    s = StageSampler.for_device("cuda", period_ms=10)
    assert s.on, s.off_reason
    with s, s.stage("alloc", sync_cuda=True):
        x = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        time.sleep(0.1)
    rec = s.records[0]
    assert rec.torch_peak_allocated_bytes is not None
    assert rec.torch_peak_allocated_bytes >= 256 * MIB
    assert rec.gpu_used_peak_bytes is not None
    assert rec.gpu_used_peak_bytes >= rec.torch_peak_allocated_bytes
    assert rec.n_gpu_samples >= 3 and rec.power_mean_w is not None and rec.power_mean_w > 0
