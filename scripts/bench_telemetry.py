"""Overhead of stage telemetry (timers + marks + sampler thread) against the same stage bare.

Interleaved paired rounds: each round runs the stage bare and instrumented back to back (order
alternating), and the overhead is the per-round relative difference; the script prints the
median and the 25-75 % range over rounds for each workload and mode. Target: <= 1 % of stage
time.

Modes:
- ``marks``: ``StageSampler`` with the GPU sampler off (what a CPU box runs): perf_counter,
  getrusage and /proc/self/statm at the start and stop marks;
- ``sampler``: the same plus the sampler thread ticking every ``--period-ms`` with a stand-in
  reader that holds the GIL for ``--reader-us`` µs per tick (pessimistic: NVML's ctypes calls
  release the GIL). On a GPU box ``--nvml`` uses the real reader instead.

Workloads: ``numpy`` (float32 matrix products, like a flat search or an encoder's matmuls;
releases the GIL) and ``python`` (a pure-Python loop, the worst case for a thread that wants
the GIL).

    python scripts/bench_telemetry.py --rounds 20 --stage-ms 200
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from bench.telemetry.sampler import GpuReading, StageSampler, nvml_reader


def spin_reader(us: float) -> Callable[[], GpuReading]:
    def read() -> GpuReading:
        end = time.perf_counter() + us / 1e6
        while time.perf_counter() < end:
            pass
        return GpuReading(0, 0.0, 0.0, None)

    return read


def calibrate(work: Callable[[int], None], target_ms: float) -> int:
    n = 1
    while True:
        t0 = time.perf_counter()
        work(n)
        ms = (time.perf_counter() - t0) * 1000
        if ms >= target_ms / 4:
            return max(1, int(n * target_ms / ms))
        n *= 2


def numpy_work() -> Callable[[int], None]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 384), dtype=np.float32)
    b = rng.standard_normal((384, 4096), dtype=np.float32)

    def work(n: int) -> None:
        for _ in range(n):
            (a @ b).max()

    return work


def python_work(n: int) -> None:
    s = 0
    for i in range(n * 1000):
        s += i * i
    if s < 0:
        raise AssertionError


def direct_costs(reader: Callable[[], GpuReading], period_ms: float) -> tuple[float, float]:
    """(µs per start+stop mark pair, % of one core the sampler thread uses while idle-waiting).

    These do not drown in scheduler noise on a loaded machine, unlike a wall-time difference.
    """
    s = StageSampler(reader=None, off_reason="bench")
    for _ in range(200):
        with s.stage("w"):
            pass
    t0 = time.perf_counter()
    n = 5000
    for _ in range(n):
        with s.stage("w"):
            pass
    mark_us = (time.perf_counter() - t0) / n * 1e6
    on = StageSampler(reader=reader, period_ms=period_ms)
    c0, w0 = time.process_time(), time.perf_counter()
    with on:
        time.sleep(2.0)
    duty = (time.process_time() - c0) / (time.perf_counter() - w0) * 100
    return mark_us, duty


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--stage-ms", type=float, default=200.0)
    p.add_argument("--period-ms", type=float, default=50.0)
    p.add_argument("--reader-us", type=float, default=200.0)
    p.add_argument("--nvml", action="store_true", help="real NVML reader (GPU box)")
    a = p.parse_args()
    if a.nvml:
        reader, why = nvml_reader(0)
        if reader is None:
            raise SystemExit(f"--nvml: {why}")
    else:
        reader = spin_reader(a.reader_us)
    samplers = {"marks": lambda: StageSampler(reader=None, off_reason="bench"),
                "sampler": lambda: StageSampler(reader=reader, period_ms=a.period_ms)}
    print(f"stage ~{a.stage_ms:g} ms, {a.rounds} paired rounds per mode, period "
          f"{a.period_ms:g} ms, reader {'NVML' if a.nvml else f'spin {a.reader_us:g} us'}")
    mark_us, duty = direct_costs(reader, a.period_ms)
    print(f"direct: one stage's start+stop marks cost {mark_us:.1f} us "
          f"({mark_us / 1000 / a.stage_ms * 100:.4f} % of a {a.stage_ms:g} ms stage); the "
          f"sampler thread uses {duty:.3f} % of a core (CPU time / wall while sampling)")
    for wname, work in (("numpy", numpy_work()), ("python", python_work)):
        n = calibrate(work, a.stage_ms)
        work(n)  # warm-up
        for mode, make in samplers.items():
            rel, bare_ms = [], []
            for r in range(a.rounds):
                s = make()
                s.start()
                try:
                    def instrumented(s: StageSampler = s, work: Callable[[int], None] = work,
                                     n: int = n) -> float:
                        t0 = time.perf_counter()
                        with s.stage("work"):
                            work(n)
                        return (time.perf_counter() - t0) * 1000

                    def bare(work: Callable[[int], None] = work, n: int = n) -> float:
                        t0 = time.perf_counter()
                        work(n)
                        return (time.perf_counter() - t0) * 1000

                    if r % 2:
                        ti, tb = instrumented(), bare()
                    else:
                        tb, ti = bare(), instrumented()
                finally:
                    s.close()
                rel.append((ti - tb) / tb * 100)
                bare_ms.append(tb)
            q1, med, q3 = np.percentile(rel, [25, 50, 75])
            print(f"{wname:6s} {mode:7s}: bare median {statistics.median(bare_ms):7.1f} ms; "
                  f"overhead median {med:+.2f} % (IQR {q1:+.2f} .. {q3:+.2f} %)")


if __name__ == "__main__":
    main()
