"""Records of capacity planning: what one request took, what one concurrency level measured,
the SLO, and the sizing answer.

A capacity run drives one chosen config's whole chain per request (``request(i)``, any
callable returning :class:`RequestTiming`) with a closed-loop load generator
(``bench.capacity.loadgen``): ``U`` users each send a request, wait for it, send the next.
Adding a driver (e.g. an HTTP client against vLLM's server): write a callable
``request(i) -> RequestTiming``; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class RequestTiming:
    """One request. ``ttft_ms``: time to first token (None when nothing streams, e.g.
    retrieval only); ``ok``: False for a failed request (counted, never timed into the
    percentiles)."""

    e2e_ms: float
    ttft_ms: float | None = None
    ok: bool = True


@dataclass(frozen=True)
class LevelResult:
    """One concurrency level. Percentiles over successful requests; ``throughput_rps`` =
    successful requests / wall seconds of the level."""

    concurrency: int
    n_requests: int
    n_failed: int
    wall_s: float
    throughput_rps: float
    e2e_p50_ms: float
    e2e_p95_ms: float
    e2e_p99_ms: float
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    #: share of successful requests whose SLO latency (TTFT, else e2e) was within the budget
    within_budget: float
    #: why the level stopped: request count or time bound
    stopped_by: Literal["count", "time"]


@dataclass(frozen=True)
class Slo:
    """Meets the SLO when at least ``attainment`` of requests have their latency (TTFT when
    measured, else end-to-end) <= ``budget_ms`` and failures are at most ``max_failed``."""

    budget_ms: float
    attainment: float = 0.9
    max_failed: float = 0.0

    def __post_init__(self) -> None:
        if self.budget_ms <= 0:
            raise ValueError(f"budget_ms must be > 0, got {self.budget_ms}")
        if not 0.0 < self.attainment <= 1.0:
            raise ValueError(f"attainment must be in (0, 1], got {self.attainment}")


@dataclass(frozen=True)
class CapacityAnswer:
    """"N workers for T queries/s at p95 <= S ms", and what it rests on."""

    workers: int | None
    target_rps: float
    p95_budget_ms: float
    #: the level the answer uses: the highest-throughput level whose e2e p95 <= the budget
    level: LevelResult | None
    #: the most concurrent users meeting the SLO (None when no level meets it)
    slo_concurrency: int | None
    worker_kind: str
    assumption: str
    text: str


@dataclass(frozen=True)
class StudySummary:
    """The headline figures of an open-loop capacity study (bench.capacity.study); the
    whole study is ``capacity/study.json``."""

    ceiling_rps: float | None
    knee_rps: float | None
    knee_ci_low_rps: float | None
    knee_ci_high_rps: float | None
    closed_rps: float
    closed_e2el_p99_ms: float | None
    open_e2el_p99_ms: float | None
    scale_knee_error: float | None
    scale_p95_error: float | None
    faults: tuple[str, ...]
    faults_survived: bool
    wall_s: float


@dataclass(frozen=True)
class CapacityRun:
    """What a capacity run of one config measured (run.json ``capacity``, the report)."""

    config_id: str
    label: str
    #: what one request is: the config's chain, stage by stage
    request: str
    slo: Slo
    answer: CapacityAnswer
    levels: tuple[LevelResult, ...]
    #: capacity.json / .md / .png, relative to the run dir
    files: tuple[str, ...]
    #: ``closed`` (the levels above) or ``open`` (the study: its summary and report lines)
    load: Literal["closed", "open"] = "closed"
    study: StudySummary | None = None
    lines: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        from dataclasses import asdict

        return {"config_id": self.config_id, "label": self.label, "request": self.request,
                "answer": self.answer.text, "workers": self.answer.workers,
                "levels": [asdict(lv) for lv in self.levels], "files": list(self.files),
                "load": self.load, "study": None if self.study is None else asdict(self.study)}
