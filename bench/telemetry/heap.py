"""The heap of this process per stage: RssAnon (and RssFile) from ``/proc/self/status``.

Peak RSS (``ru_maxrss``) counts the page cache of every memory-mapped file the process touched
(vectors, the chunk table's Arrow twin, on-disk IVF lists); the kernel takes those pages back
under pressure and caps them at the machine's memory, so RSS at one size says little about
another. RssAnon is what the process itself allocated: the memory a run must have.

:class:`HeapWatch` reads it at each stage's start and stop marks and every ``period_s`` on one
daemon thread, which runs only while a stage is open (nothing to close at the end of a run).
A reading belongs to every stage open at that moment (stages may nest). Without
``/proc/self/status`` (macOS, Windows) every figure is None, never 0.

Cost: one read of a ~1.5 kB procfs file per tick (tens of microseconds), twice a second by
default.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from bench.config.build import OptionError

STATUS = "/proc/self/status"


@dataclass(frozen=True)
class MemReading:
    """Anonymous and file-backed resident bytes of this process at one moment."""

    anon_bytes: int
    file_bytes: int


@dataclass(frozen=True)
class HeapPeak:
    """The peaks of one stage (None: no reading, off Linux)."""

    heap_peak_bytes: int | None
    rss_file_peak_bytes: int | None
    n_heap_samples: int


def read_status(path: str = STATUS) -> MemReading | None:
    """RssAnon and RssFile of this process (kB in the file); None where there is no such file
    or it lacks them (a kernel before 4.5)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            found[key] = int(rest.split()[0]) * 1024
    if len(found) < 2:
        return None
    return MemReading(found["RssAnon"], found["RssFile"])


Reader = Callable[[], MemReading | None]


@dataclass
class _Open:
    stage: str
    anon: int | None = None
    file: int | None = None
    n: int = 0

    def add(self, r: MemReading) -> None:
        self.anon = r.anon_bytes if self.anon is None else max(self.anon, r.anon_bytes)
        self.file = r.file_bytes if self.file is None else max(self.file, r.file_bytes)
        self.n += 1


class HeapWatch:
    """Peak RssAnon / RssFile per stage: marks read at start and stop, a daemon thread reads
    every ``period_ms`` while any stage is open. ``reader``: tests inject a scripted one."""

    def __init__(self, *, period_ms: float = 500.0, reader: Reader = read_status) -> None:
        if not period_ms > 0:
            raise OptionError("heap_period_ms", f"must be > 0, got {period_ms}")
        self.period_ms = float(period_ms)
        self._reader = reader
        self._lock = threading.Lock()
        #: serialises starting and stopping the thread (the marks may come from two threads)
        self._thread_lock = threading.Lock()
        self._open: list[_Open] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: False once a reading came back None (no /proc): the thread is then not started
        self.available = True

    def sample(self) -> None:
        """Take one reading now and attribute it to every open stage (the thread's tick;
        public so tests can drive it)."""
        r = self._reader() if self.available else None
        if r is None:
            self.available = False
            return
        with self._lock:
            for o in self._open:
                o.add(r)

    def start_stage(self, stage: str) -> None:
        with self._lock:
            self._open.append(_Open(stage))
        self.sample()
        with self._thread_lock:
            if self.available and self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._loop, name="bench-heap",
                                                daemon=True)
                self._thread.start()

    def stop_stage(self, stage: str) -> HeapPeak:
        self.sample()
        with self._lock:
            idx = max((i for i, o in enumerate(self._open) if o.stage == stage), default=None)
            if idx is None:
                raise RuntimeError(f"telemetry: stage {stage!r} stopped but never started")
            o = self._open.pop(idx)
        with self._thread_lock:
            with self._lock:
                idle = not self._open
            if idle and self._thread is not None:  # no stage open: nothing to sample for
                self._stop.set()
                self._thread.join()
                self._thread = None
        return HeapPeak(o.anon, o.file, o.n)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_ms / 1000.0):
            self.sample()
