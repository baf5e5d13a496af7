"""The scale planner's records: measured sizes in, predictions and their errors out.

A **profile** is what ``scripts/bench_scale.py`` measured at a few corpus sizes on one machine
(``scale.json``, or the folder holding it and its ``size-*.json``), or ``python -m bench`` runs
(``bench.scaling.profile``): per stage its wall seconds and peak VmRSS / RssAnon (the heap),
per artifact its bytes on disk. ``bench.scaling.planner`` fits each
figure against the chunk count and predicts another size; ``validate`` predicts each measured
size from the sizes at least ``ratio`` times smaller and reports the error.

Adding a figure: give ``ScalePoint`` the field, read it in ``bench.scaling.profile``, fit it in
``planner.predict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the stages of bench_scale.py's path in order (``generate``, writing its corpus, is set-up)
PATH_STAGES = ("chunk", "embed", "embed_queries", "index", "search", "search_ann", "metrics")
#: what a stage's work is proportional to (``bench.scaling.planner.work_model``), for the
#: scale script's stages and the pipeline's (``timings.parquet`` of ``python -m bench``);
#: a stage not listed (``rest``: the run's untimed work) is fitted by a power law in chunks
ROLES = {
    "chunk": "chunks", "embed": "chunks", "data": "chunks", "corpus": "chunks",
    "chunk_stats": "chunks", "embed_docs": "chunks",
    "embed_queries": "queries", "embed_query": "queries", "metrics": "queries",
    "search": "exact", "exact_topk": "exact",
    "index": "index",
    "search_ann": "ann", "retrieve": "ann", "fold": "queries",
    "retrieve.latency": "ann", "embed_query.latency": "queries",
}
#: a pipeline run's latency pass (one query at a time) as a stage of its own: ``retrieve``
#: + LATENCY
LATENCY = ".latency"
#: the roles whose work grows with the queries
QUERY_ROLES = ("queries", "exact", "ann")
#: a pipeline run's wall time outside its timed stages (scoring, CIs, writers, start-up)
REST = "rest"


@dataclass(frozen=True)
class StagePoint:
    """One stage at one size: wall seconds and the peaks seen while it ran."""

    seconds: float
    peak_rss_bytes: int
    peak_anon_bytes: int


@dataclass(frozen=True)
class ScalePoint:
    """One measured corpus size (one fresh process of ``bench_scale.py``)."""

    n_chunks: int
    n_docs: int
    n_queries: int
    dim: int
    stages: dict[str, StagePoint]
    #: the process's VmHWM over the whole path
    peak_rss_bytes: int
    #: bytes each artifact left on disk (chunks, vectors, index)
    disk_bytes: dict[str, int]
    #: the corpus' characters (None in profiles written before it was recorded)
    n_chars: int | None = None
    #: the load average at the end of the size (how busy the machine was)
    loadavg: float | None = None


@dataclass(frozen=True)
class Profile:
    """Sizes measured with one set of stage options on one machine."""

    source: str
    #: embedder, chunker, ann (a conf/index option name, or a resolved index config), k, ...
    settings: dict[str, object]
    points: tuple[ScalePoint, ...]  # ascending chunk counts
    cpus: int | None = None
    #: the stages measured at every size, in the order they ran
    stages: tuple[str, ...] = PATH_STAGES
    #: whether the heap (RssAnon) was measured at every size; runs recorded before their
    #: run.json had ``heap_peak_bytes`` give their peak RSS instead (``notes`` says so)
    heap_measured: bool = True
    #: one line each, shown with every plan and check of the profile
    notes: tuple[str, ...] = ()

    @property
    def chars_per_chunk(self) -> float | None:
        with_chars = [p for p in self.points if p.n_chars]
        if not with_chars:
            return None
        p = with_chars[-1]
        return p.n_chars / p.n_chunks if p.n_chars else None


@dataclass(frozen=True)
class Fit:
    """``y(n) = y_ref * (n / n_ref) ** exponent`` (power) or ``base + slope * n`` (affine),
    and the sizes it was fitted on."""

    kind: str  # "power" | "affine" | "stated"
    exponent: float = 0.0
    n_ref: float = 1.0
    y_ref: float = 0.0
    base: float = 0.0
    slope: float = 0.0
    fitted_on: tuple[int, ...] = ()
    #: what ``n`` counts for an affine fit (chunks; a stage's work units for its seconds)
    unit: str = "chunk"
    #: what ``y`` is: "bytes" or "seconds"
    of: str = "bytes"

    def __call__(self, n: float) -> float:
        if self.kind == "power":
            return self.y_ref * (n / self.n_ref) ** self.exponent
        return self.base + self.slope * n

    def describe(self) -> str:
        sizes = " and ".join(f"{s:,}" for s in self.fitted_on[-2:])
        if self.kind == "power":
            return f"chunks^{self.exponent:.2f} through {sizes}"
        if self.kind == "stated":
            return f"stated: {1 / self.slope:,.4g} {self.unit} per s"
        if self.of == "bytes":
            return f"{self.base / 2**20:,.0f} MiB + {self.slope:,.1f} B per {self.unit}, " \
                   f"through {sizes}"
        return f"{self.base:.2f} s + {self.slope:.3g} s per {self.unit}, through {sizes}"


@dataclass(frozen=True)
class StagePrediction:
    stage: str
    seconds: float
    peak_rss_bytes: float
    peak_anon_bytes: float
    #: how the seconds were predicted
    seconds_fit: Fit


@dataclass(frozen=True)
class Prediction:
    """A target size's predicted wall time, peak memory and disk, stage by stage."""

    n_chunks: int
    n_queries: int
    stages: tuple[StagePrediction, ...]
    peak_rss_bytes: float
    disk_bytes: dict[str, float]
    #: where each stage's seconds come from: "this machine" or the stated figures' label
    machine: str
    #: False when the profile measured no heap (peak_anon is then the RSS)
    heap_measured: bool = True
    #: the memory math of the index at the target (bench.index.memory), when it is known
    index_memory: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default=())
    #: the artifacts of ``disk_bytes`` the run reads memory-mapped (the vectors; the index
    #: when its lists are on disk): their pages are page cache, not heap
    mapped: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    @property
    def peak_anon_bytes(self) -> float:
        """The heap: what must be resident (an in-memory index is in it)."""
        return max((s.peak_anon_bytes for s in self.stages), default=0.0)

    @property
    def mapped_bytes(self) -> float:
        return sum(self.disk_bytes.get(name, 0.0) for name in self.mapped)

    @property
    def memory_need_bytes(self) -> float:
        """Heap + the mapped files the run reads: the memory that holds the run without
        reading a file page twice (RSS is capped by the machine; this is not)."""
        return self.peak_anon_bytes + self.mapped_bytes

    @property
    def disk_total_bytes(self) -> float:
        return sum(self.disk_bytes.values())


@dataclass(frozen=True)
class Check:
    """One measured size predicted from smaller ones: predicted vs measured."""

    n_chunks: int
    fitted_on: tuple[int, ...]
    #: figure -> (predicted, measured); figures: seconds.<stage>, seconds.total,
    #: peak_rss (ru_maxrss), peak_anon (the heap), peak_anon.<stage>, disk.<artifact>,
    #: disk.total
    figures: dict[str, tuple[float, float]]

    @property
    def ratio(self) -> float:
        """How far the prediction reached: target size / largest size fitted on."""
        return self.n_chunks / max(self.fitted_on)

    def error(self, figure: str) -> float | None:
        """(predicted - measured) / measured; None when nothing was measured."""
        pred, meas = self.figures[figure]
        return None if meas == 0 else (pred - meas) / meas
