"""A capacity study of one target: ceiling, unloaded baseline, the coordinated-omission
comparison, the knee, a sweep around it, a checked scale-out prediction, faults, cost.

Steps (each level a fresh seeded open-loop schedule unless said otherwise):

1. ``ceiling``: the generator's own ceiling against the backend's null target
   (:mod:`bench.capacity.ceiling`); every later level above it is refused, naming it.
2. ``unloaded``: one closed-loop user asks every query once — the per-query answers and
   service time everything under load is paired against (``unloaded_last``: after step 5,
   so a server cache is not warmed with every query before the load levels).
3. ``closed_vs_open``: ``closed_users`` closed-loop users, then an open-loop Poisson level at
   the closed loop's own achieved rate: the same mean load, the latency each reports.
4. ``knee`` on one replica (:func:`bench.capacity.knee.find_knee`).
5. ``sweep``: levels at ``sweep_shares`` x the knee; quality under load paired per query
   against the unloaded run (mean delta, bootstrap CI).
5b. ``components``: each separately served component's own knee at its own SLO
   (:mod:`bench.capacity.components`: embedder, vector DB, reranker, LLM), the same search
   with ``component_max_levels`` / ``component_max_seconds``; with the chain's knee they
   compose the plan for ``target_rps`` queries/s (workers per component, the ratios, cost).
6. ``scale_out``: linear scale-out predicts ``replicas`` x the knee and, at a fixed rate R
   (the 1-replica knee), the p95 of one replica at R / replicas; both are measured with
   ``replicas`` replicas behind the round-robin client and the prediction errors reported.
7. ``faults`` at ``fault_share`` x the knee (:mod:`bench.capacity.faults`).
8. cost per 1M queries and per 1M correct answers at the knee from ``price_per_hour``.

Queries: every open-loop level draws from one :class:`bench.capacity.schedule.QueryStream`
per target — least-used queries first, so no query repeats within a level while unused ones
remain; each request is flagged when its query was sent to the target before, and the level
reports those repeats and their latency apart (``LevelMetrics.e2el_fresh`` /
``e2el_repeat``).

Resume: every level's metrics are written to ``levels/<key>.json`` as soon as it ends (key:
the study's settings, the step, rate, repeat and replicas); a rerun of the same plan loads
them instead of measuring again, so an interrupted study continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bench.capacity.ceiling import Ceiling, measure_ceiling, refuse
from bench.capacity.components import Component, ComponentCapacity, ComponentPlan, compose_plan
from bench.capacity.driver import RetryPolicy, Target, closed_queries, run_closed
from bench.capacity.faults import Fault, FaultOutcome, run_with_fault
from bench.capacity.knee import Knee, find_knee, quality_knee
from bench.capacity.metrics import Dist, LevelMetrics, Scorer, summarize
from bench.capacity.schedule import QueryStream, gamma_arrivals
from bench.capacity.workers import PooledTarget, send_level
from bench.config.schema import LoadSettings
from bench.results.write import atomic_write_bytes

log = logging.getLogger("bench")


class Replica(Protocol):
    """A served process the study may crash and restart (the restart fault)."""

    restarts: int

    def restart(self) -> None: ...


@dataclass
class FaultRig:
    """What a fault level needs: the target through the fault proxy, the proxy's URL and the
    process behind it."""

    target: Target
    proxy_url: str
    replica: Replica


class Backend(Protocol):
    """Where load goes. ``target(replicas)`` opens a target over that many replicas;
    ``null_target()`` one that does no work (the ceiling); ``fault_rig()`` None when faults
    cannot be injected (an in-process chain has no process to kill)."""

    name: str
    kind: str
    n_queries: int

    def target(self, replicas: int) -> AbstractAsyncContextManager[Target]: ...

    def null_target(self) -> AbstractAsyncContextManager[Target]: ...

    def fault_rig(self) -> AbstractAsyncContextManager[FaultRig] | None: ...


@dataclass(kw_only=True)
class StudySettings(LoadSettings):
    """What a study runs with: the load settings a capacity config shares with it
    (:class:`~bench.config.schema.LoadSettings`, declared once), the SLOs and faults parsed
    from the config (``bench.capacity.run.in_process.study_settings``), and the study's own
    ``ceiling_seconds`` and ``seed``, which have no config key. study.json's ``settings`` and
    the level store's key are :func:`settings_record` of it."""

    slo_ms: dict[str, float]
    faults: tuple[Fault, ...] = ()
    ceiling_seconds: float = 2.0
    seed: int = 0


#: study.json's ``settings`` and the level store's key (:func:`study_key`) name three settings
#: as the study did before it shared the config's declaration: the config's
#: ``level_min_requests``, ``level_max_requests`` and ``target_rps``. Kept, so that published
#: study.json files read the same and levels measured under the old key are reused.
RECORD_NAMES = {"level_min_requests": "min_requests", "level_max_requests": "max_requests",
                "target_rps": "plan_rps"}
#: the order of study.json's ``settings`` (as written before)
RECORD_ORDER = (
    "slo_ms", "attainment", "level_seconds", "min_requests", "max_requests", "burstiness",
    "max_concurrency", "timeout_s", "retries", "quality_threshold", "knee_start_rps",
    "knee_repeats", "knee_max_repeats", "knee_ci_width", "knee_max_levels", "knee_max_seconds",
    "ceiling_limit_ms", "ceiling_seconds", "ceiling_max_rps", "ceiling_min_requests",
    "closed_users", "sweep_shares", "replicas", "scale_knee_max_levels", "faults",
    "fault_share", "price_per_hour", "worker_kind", "unloaded_queries", "unloaded_last",
    "component_max_levels", "component_max_seconds", "plan_rps", "seed")


def settings_record(s: StudySettings) -> dict[str, Any]:
    """``s`` as study.json's ``settings``: every field once, under its recorded name."""
    d = {RECORD_NAMES.get(k, k): v for k, v in asdict(s).items()}
    return {k: d[k] for k in RECORD_ORDER}


def study_record(st: Study) -> dict[str, Any]:
    """``st`` as study.json (and run.json's ``capacity.study``) hold it."""
    return {**asdict(st), "settings": settings_record(st.settings)}


@dataclass(frozen=True)
class QualityUnderLoad:
    """One sweep level's delivered quality against the unloaded run, paired per query."""

    offered_rps: float
    quality_mean: float | None
    #: the paired means over the queries both runs asked
    paired_unloaded: float | None
    paired_loaded: float | None
    delta_vs_unloaded: float | None
    ci_low: float | None
    ci_high: float | None
    n_queries: int
    timeouts: int
    failed: int
    rate_limited: int


@dataclass(frozen=True)
class ScaleOut:
    replicas: int
    knee_1: float | None
    knee_predicted: float | None
    knee_measured: float | None
    knee_error: float | None
    fixed_rps: float | None
    p95_predicted_ms: float | None
    p95_measured_ms: float | None
    p95_error: float | None
    knee_n: Knee | None = None


@dataclass(frozen=True)
class Study:
    backend: str
    kind: str
    settings: StudySettings
    ceiling: Ceiling | None
    unloaded: LevelMetrics
    closed: LevelMetrics
    open_same_load: LevelMetrics | None
    knee: Knee
    sweep: tuple[LevelMetrics, ...]
    quality: tuple[QualityUnderLoad, ...]
    scale_out: ScaleOut | None
    faults: tuple[FaultOutcome, ...]
    refused: tuple[str, ...]
    cost: dict[str, float | None]
    sizing: str
    wall_s: float
    resumed_levels: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: step 5b: each measured component's knee (the chain's is the study's) and the plan
    components: tuple[ComponentCapacity, ...] = ()
    plan: ComponentPlan | None = None
    #: the knee of the quality-goodput share, from the same level runs (None: no metric)
    quality_knee: Knee | None = None


def level_from_json(d: dict[str, Any]) -> LevelMetrics:
    dists = ("ttft", "tpot", "itl", "e2el", "send_lag", "e2el_fresh", "e2el_repeat")
    rest: dict[str, Any] = {k: (Dist(**v) if k in dists else v) for k, v in d.items()}
    if rest.get("quality_goodput_ci") is not None:
        rest["quality_goodput_ci"] = tuple(rest["quality_goodput_ci"])
    rest["quality_by_query"] = {int(k): float(v) for k, v in rest.get("quality_by_query",
                                                                       {}).items()}
    return LevelMetrics(**rest)


class LevelStore:
    """``levels/<key>.json``: a level's metrics, written atomically when it ends."""

    def __init__(self, root: Path, study_key: str) -> None:
        self.root = root
        self.study_key = study_key
        self.loaded = 0
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, *parts: object) -> Path:
        h = hashlib.sha256(json.dumps([self.study_key, *map(str, parts)]).encode()).hexdigest()
        return self.root / f"{h[:16]}.json"

    def get(self, *parts: object) -> LevelMetrics | None:
        p = self._path(*parts)
        if not p.exists():
            return None
        self.loaded += 1
        return level_from_json(json.loads(p.read_text()))

    def put(self, m: LevelMetrics, *parts: object) -> LevelMetrics:
        atomic_write_bytes(self._path(*parts), json.dumps(asdict(m)).encode())
        return m


def study_key(backend: str, s: StudySettings) -> str:
    return hashlib.sha256(json.dumps([backend, settings_record(s)], sort_keys=True, default=str)
                          .encode()).hexdigest()[:16]


async def run_study(backend: Backend, s: StudySettings, *, score: Scorer | None,
                    store: LevelStore, components: Sequence[Component] = (),
                    chain_what: str = "the whole chain",
                    records_dir: Path | None = None) -> Study:
    """``records_dir``: each open-loop level measured here (not one resumed from the store)
    also writes its requests as AIPerf's per-request export
    (``<records_dir>/<level>.jsonl``, :mod:`bench.capacity.interop`)."""
    t_start = time.perf_counter()
    # httpx logs every request at INFO: thousands of lines that bury the study's own
    logging.getLogger("httpx").setLevel(logging.WARNING)
    retry = RetryPolicy(retries=s.retries)
    refused: list[str] = []
    notes: list[str] = []

    def n_for(rate: float) -> int:
        return int(min(s.level_max_requests,
                       max(s.level_min_requests, round(rate * s.level_seconds))))

    def summary(run: Any, label: str, slo_ms: dict[str, float] | None = None,
                scored: bool = True) -> LevelMetrics:
        return summarize(run, slo_ms=s.slo_ms if slo_ms is None else slo_ms, label=label,
                         score=score if scored else None, threshold=s.quality_threshold)

    # 1. ceiling
    log.info("capacity: measuring the generator's ceiling against %s's null target",
             backend.name)
    async with backend.null_target() as null:
        ceiling = await measure_ceiling(
            null, limit_ms=s.ceiling_limit_ms, seconds=s.ceiling_seconds,
            max_rps=s.ceiling_max_rps, min_requests=s.ceiling_min_requests,
            runner=None if not isinstance(null, PooledTarget) else (
                lambda sched, timeout: null.run_open(sched, timeout_s=timeout)))
    log.info("capacity: %s", ceiling.text)

    # each level asks the least-used queries first (fresh while unused ones remain); drawn
    # before a stored level is loaded, so a resumed study draws the same queries
    stream = QueryStream(backend.n_queries, seed=s.seed)

    async def open_level(t: Target, rate: float, repeat: int, step: str,
                         replicas: int = 1, slo_ms: dict[str, float] | None = None,
                         key: str = "", queries: QueryStream | None = None
                         ) -> LevelMetrics | None:
        why = refuse(rate, ceiling)
        if why is not None:
            refused.append(f"{step}: {why}")
            return None
        src = queries or stream
        sched = src.fresh(gamma_arrivals(rate_rps=rate, n=n_for(rate),
                                         n_queries=src.n_queries, burstiness=s.burstiness,
                                         seed=s.seed + 1000 * repeat + replicas))
        parts = (step + key, f"{rate:.6g}", repeat, replicas)
        got = store.get(*parts)
        if got is not None:
            return got
        run = await send_level(sched, t, timeout_s=s.timeout_s, retry=retry,
                               max_concurrency=s.max_concurrency)
        # a component's reply is no answer to score: only the whole chain's is
        m = summary(run, f"{step} {rate:.3g} req/s" + (f" x{replicas}" if replicas > 1 else ""),
                    slo_ms, scored=slo_ms is None)
        if records_dir is not None:
            from bench.capacity.interop import write_aiperf

            name = "".join(c if c.isalnum() or c in "._-" else "_" for c in
                           f"{m.label} r{repeat}")[:100]
            write_aiperf(run, records_dir / f"{name}.jsonl",
                         float(run.meta.get("start_epoch_s", "0")))
        log.info("capacity: %s: achieved %.2f req/s, goodput %.0f %%, e2el p95 %s ms", m.label,
                 m.achieved_rps, 100 * m.goodput_fraction, _ms(m.e2el.percentiles["p95"]))
        return store.put(m, *parts)

    async with backend.target(1) as one:
        # 2. unloaded
        n_unloaded = min(backend.n_queries, s.unloaded_queries)

        async def unloaded_pass() -> LevelMetrics:
            got = store.get("unloaded")
            if got is None:
                run = await run_closed(one, users=1, n=n_unloaded, n_queries=backend.n_queries,
                                       seed=s.seed, timeout_s=s.timeout_s, retry=retry)
                got = store.put(summary(run, "unloaded (1 closed-loop user)"), "unloaded")
            stream.mark(closed_queries(n_unloaded, backend.n_queries, s.seed))
            return got

        first = None if s.unloaded_last else await unloaded_pass()
        # 3. closed loop vs open loop at the same mean load
        closed = store.get("closed", s.closed_users)
        n_closed = s.level_min_requests if first is None else n_for(
            s.closed_users / max(first.e2el.mean or 1.0, 1.0) * 1000)
        if closed is None:
            run = await run_closed(one, users=s.closed_users, n=n_closed,
                                   n_queries=backend.n_queries, seed=s.seed,
                                   timeout_s=s.timeout_s, retry=retry)
            closed = store.put(summary(run, f"closed loop, {s.closed_users} users"), "closed",
                               s.closed_users)
        stream.mark(closed_queries(n_closed, backend.n_queries, s.seed))
        open_same = await open_level(one, closed.achieved_rps, 0, "open at the closed load")

        # 4. knee
        async def measure(rate: float, repeat: int) -> LevelMetrics:
            m = await open_level(one, rate, repeat, "knee")
            assert m is not None  # the search never goes past max_rps = the ceiling
            return m

        if ceiling.rate_rps > 0:
            knee = await _find_knee_async(measure, s, max_rps=ceiling.rate_rps)
        else:
            refused.append(f"knee: every rate is beyond the generator's ceiling ({ceiling.text})")
            knee = Knee(None, None, None, s.attainment, (), "ceiling", 0, 0.0)
        log.info("capacity: %s", knee.text)

        # 5. sweep around the knee
        sweep: list[LevelMetrics] = []
        base = knee.rate_rps or (knee.probes[0].rate_rps if knee.probes else s.knee_start_rps)
        for share in s.sweep_shares:
            m = await open_level(one, base * share, 0, "sweep")
            if m is not None:
                sweep.append(m)
        unloaded = first if first is not None else await unloaded_pass()
        quality = tuple(_paired(unloaded, m, seed=s.seed) for m in sweep)

    # 5b. each separately served component's own knee, and the plan composed from them
    caps: list[ComponentCapacity] = []
    for comp in components:
        caps.append(await _component_knee(comp, s, open_level, ceiling,
                                          start_rps=2 * (knee.rate_rps or s.knee_start_rps),
                                          n_queries=backend.n_queries))
        log.info("capacity: component %s: %s", comp.name, caps[-1].knee.text)
    plan = None
    if caps:
        caps.append(ComponentCapacity("chain", chain_what, dict(s.slo_ms), knee))
        plan = compose_plan(caps, target_rps=s.target_rps, worker_kind=s.worker_kind,
                            price_per_hour=s.price_per_hour,
                            correct_share=_correct_share(knee, sweep))
        log.info("capacity: plan: %s", plan.text)

    # 6. scale-out, checked
    scale = None
    if s.replicas > 1 and knee.rate_rps is not None:
        async with backend.target(1) as one:
            half = await open_level(one, knee.rate_rps / s.replicas, 0, "scale fixed-rate",
                                    replicas=1)
        async with backend.target(s.replicas) as many:
            full = await open_level(many, knee.rate_rps, 0, "scale fixed-rate",
                                    replicas=s.replicas)

            async def measure_n(rate: float, repeat: int) -> LevelMetrics:
                m = await open_level(many, rate, repeat, "knee", replicas=s.replicas)
                assert m is not None
                return m

            knee_n = await _find_knee_async(
                measure_n, s, max_rps=ceiling.rate_rps,
                start_rps=knee.rate_rps * s.replicas / 2, max_levels=s.scale_knee_max_levels)
        pred = knee.rate_rps * s.replicas
        p95p = None if half is None else half.e2el.percentiles["p95"]
        p95m = None if full is None else full.e2el.percentiles["p95"]
        scale = ScaleOut(s.replicas, knee.rate_rps, pred, knee_n.rate_rps,
                         None if knee_n.rate_rps is None else (knee_n.rate_rps - pred) / pred,
                         knee.rate_rps, p95p, p95m,
                         None if p95p is None or p95m is None else (p95m - p95p) / p95p, knee_n)

    # 7. faults
    faults: list[FaultOutcome] = []
    if s.faults:
        rig_cm = backend.fault_rig()
        if rig_cm is None:
            notes.append(f"faults not injected: {backend.kind} target has no process or proxy "
                         "to fault (serve the config: capacity.target=serve)")
        else:
            rate = (knee.rate_rps or s.knee_start_rps) * s.fault_share
            async with rig_cm as rig:
                for i, fault in enumerate(s.faults):
                    sched = gamma_arrivals(rate_rps=rate, n=n_for(rate),
                                           n_queries=backend.n_queries, seed=s.seed + 7 + i)
                    _, _, out = await run_with_fault(
                        sched, rig.target, fault, proxy_url=rig.proxy_url, served=rig.replica,
                        slo_ms=s.slo_ms, timeout_s=s.timeout_s, retry=retry)
                    log.info("capacity: fault %s: %s, %d retries, lost %d", fault.kind,
                             out.statuses, out.retries, out.lost)
                    faults.append(out)

    cost = _cost(knee, sweep, s)
    return Study(backend.name, backend.kind, s, ceiling, unloaded, closed, open_same, knee,
                 tuple(sweep), quality, scale, tuple(faults), tuple(refused), cost,
                 _sizing(knee, s, scale), time.perf_counter() - t_start, store.loaded,
                 tuple(notes), tuple(caps), plan, quality_knee(knee))


async def _component_knee(comp: Component, s: StudySettings, open_level: Any,
                          ceiling: Ceiling, *, start_rps: float,
                          n_queries: int) -> ComponentCapacity:
    """One component's knee at its own SLO: the chain's search, on the component's target,
    with the component budgets. Its levels are stored under their own step (resume)."""
    step, key = f"component {comp.name}", json.dumps(comp.slo_ms, sort_keys=True)
    if ceiling.rate_rps <= 0:
        return ComponentCapacity(comp.name, comp.what, dict(comp.slo_ms),
                                 Knee(None, None, None, s.attainment, (), "ceiling", 0, 0.0))
    queries = QueryStream(n_queries, seed=s.seed)
    async with comp.target() as t:
        async def measure(rate: float, repeat: int) -> LevelMetrics:
            m = await open_level(t, rate, repeat, step, slo_ms=dict(comp.slo_ms), key=key,
                                 queries=queries)
            assert m is not None  # the search never goes past max_rps = the ceiling
            return m

        knee = await _find_knee_async(measure, s, max_rps=ceiling.rate_rps,
                                      start_rps=start_rps, max_levels=s.component_max_levels,
                                      max_seconds=s.component_max_seconds)
    return ComponentCapacity(comp.name, comp.what, dict(comp.slo_ms), knee)


async def _find_knee_async(measure: Callable[[float, int], Any], s: StudySettings, *,
                           max_rps: float, start_rps: float | None = None,
                           max_levels: int | None = None,
                           max_seconds: float | None = None) -> Knee:
    """find_knee drives a synchronous measure; the levels are coroutines on this loop, so
    the search runs in a worker thread that submits each level back to the loop."""
    import asyncio

    loop = asyncio.get_running_loop()

    def sync_measure(rate: float, repeat: int) -> LevelMetrics:
        return asyncio.run_coroutine_threadsafe(measure(rate, repeat), loop).result()

    # below this rate one level of level_min_requests would take more than a quarter of the
    # search's time budget: searching lower cannot finish
    seconds = max_seconds or s.knee_max_seconds
    floor = 4 * s.level_min_requests / seconds
    start = min(start_rps or s.knee_start_rps, max_rps)
    return await asyncio.to_thread(
        find_knee, sync_measure, start_rps=start, min_rps=min(floor, start),
        attainment=s.attainment, repeats=s.knee_repeats, max_repeats=s.knee_max_repeats,
        ci_width=s.knee_ci_width, max_levels=max_levels or s.knee_max_levels,
        max_seconds=seconds, max_rps=max_rps)


def _paired(unloaded: LevelMetrics, m: LevelMetrics, *, seed: int) -> QualityUnderLoad:
    from bench.metrics.stats import paired_compare

    qs = sorted(set(unloaded.quality_by_query) & set(m.quality_by_query))
    delta = lo = hi = ma = mb = None
    if len(qs) >= 2:
        c = paired_compare(np.asarray([unloaded.quality_by_query[q] for q in qs]),
                           np.asarray([m.quality_by_query[q] for q in qs]), seed=seed)
        delta, lo, hi, ma, mb = c.delta, c.ci_low, c.ci_high, c.mean_a, c.mean_b
    st = m.statuses
    return QualityUnderLoad(m.offered_rps, m.quality_mean, ma, mb, delta, lo, hi, len(qs),
                            st.get("timeout", 0), st.get("failed", 0), st.get("rate_limited", 0))


def _cost(knee: Knee, sweep: list[LevelMetrics], s: StudySettings) -> dict[str, float | None]:
    """Cost at the knee on one replica: price / (knee * 3600) per query; per correct answer,
    divided by the share of correct answers at the sweep level nearest the knee."""
    if s.price_per_hour is None or not knee.rate_rps:
        return {"price_per_hour": s.price_per_hour, "per_1m_queries": None,
                "per_1m_correct": None}
    per_q = s.price_per_hour / (knee.rate_rps * 3600.0)
    share = _correct_share(knee, sweep)
    return {"price_per_hour": s.price_per_hour, "per_1m_queries": per_q * 1e6,
            "per_1m_correct": None if not share else per_q * 1e6 / share}


def _correct_share(knee: Knee, sweep: Sequence[LevelMetrics]) -> float | None:
    """The share of correct answers at the sweep level nearest the knee (None: no metric)."""
    k = knee.rate_rps
    if k is None:
        return None
    near = min(sweep, key=lambda m: abs(m.offered_rps - k), default=None)
    return None if near is None or near.correct is None or not near.n_requests else (
        near.correct / near.n_requests)


def _sizing(knee: Knee, s: StudySettings, scale: ScaleOut | None) -> str:
    if knee.rate_rps is None:
        return "no sizing: the SLO was not met at the lowest rate probed"
    slo = ", ".join(f"{k} <= {v:g} ms" for k, v in s.slo_ms.items())
    txt = (f"one {s.worker_kind} sustains {knee.rate_rps:.2f} req/s (CI "
           f"{knee.ci_low_rps:.2f} - "
           f"{'beyond' if knee.ci_high_rps is None else f'{knee.ci_high_rps:.2f}'}) with >= "
           f"{s.attainment:.0%} of requests within {slo}")
    if scale is not None and scale.knee_error is not None:
        capped = scale.knee_n is not None and scale.knee_n.stopped_by == "ceiling"
        txt += (f"; {scale.replicas} replicas measured {'at least ' if capped else ''}"
                f"{scale.knee_measured:.2f} req/s against {scale.knee_predicted:.2f} predicted "
                f"by linear scale-out ({scale.knee_error:+.0%}"
                + (", a bound: the search reached the generator's ceiling)" if capped else ")"))
    return txt + ". N replicas for T req/s: N = ceil(T / knee)" + (
        ", corrected by the measured scale-out error" if scale is not None else "")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"
