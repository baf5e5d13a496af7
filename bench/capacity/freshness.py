"""Freshness under ingest: insert documents into a served vector database while queries run
open loop, and measure how soon a new document can be found, how soon it is indexed, and
what ingest does to query latency, recall and answers.

Corpus (synthetic, seeded): ``n_base + n_ingest`` unit vectors of dimension ``dim`` drawn
around ``clusters`` random centres (so ANN recall is not trivially 1); the first ``n_base``
are built into the database before the run (:mod:`bench.capacity.live_stores`), the other
``n_ingest`` are inserted during it. Queries: ``n_queries`` noisy copies of corpus vectors
drawn from base and ingest alike, so some queries' exact answers change when the ingest
documents arrive.

Three phases, each one open-loop level of the same length ``n_ingest / ingest_rps`` seconds
at ``query_rps`` (Poisson arrivals from :func:`bench.capacity.schedule.gamma_arrivals`, every
query asked once per phase; latency counted from the intended send, so a stalled database
shows as latency, not as fewer requests):

1. ``idle``: the base only, nothing written.
2. ``ingest``: a writer inserts ``insert_batch`` documents per call at ``ingest_rps``
   documents/s on a fixed schedule; the queries run as in ``idle``.
3. ``after``: everything inserted, nothing written (the same queries in the same order as
   ``idle``, so the two are paired per query).

Per inserted document (``DocRecord``):

- ``insert_ms``: from its intended insert time to the database's acknowledgement.
- time-to-searchable: its probe query is the document's own vector; probes are sent from
  the acknowledgement on, every ``poll_ms``, while their send time is within
  ``searchable_timeout_s`` of the intended insert time. ``searchable_ms`` = from the
  intended insert time to the reply of the first probe whose top-``k`` holds the document;
  a document no such probe returned is ``never_searchable`` (counted, never dropped); an
  insert the database refused is ``insert_failed``. The resolution is one poll interval plus
  a probe's latency.
- time-to-indexed: every ``poll_ms`` the study reads how many rows the database's ANN index
  covers (:class:`bench.capacity.live_stores.IndexProgress`); ingest document ``j`` counts as
  indexed at the first reading >= ``n_base + j + 1`` (databases index in insertion order:
  an assumption, stated in the report); ``indexed_ms`` = that reading's time minus the
  intended insert time; none by ``searchable_timeout_s`` after the last insert:
  ``not_indexed``.

Per query (``QueryRecord``): status ``ok`` or ``failed`` (the error's last line), latency
from the intended send, and recall@k against exact brute force over the vectors present at
the query's send time: the base plus every ingest document whose insert was acknowledged
before the query was sent (``bench.index.exact.exact_topk`` over those rows). Recall is the
tie-tolerant ``bench.index.exact.ann_recall_at_k`` on exact rescored scores, so a document
whose insert was still in flight while the query ran counts as a hit when its score reaches
the k-th present score (it was a legitimate answer at reply time); such replies are counted
(``inflight_hits``).

Answers changed by the new documents: each query's ``after`` ranking against its ``idle``
ranking: ``changed`` (a different ordered top-k), ``changed_new`` (changed, holding at
least one ingest document), ``changed_old`` (changed without one: the index moved under
the old documents), ``should_change`` (its exact top-k over everything holds an ingest
document) and ``missed_new`` (should change, but the served ranking holds no ingest
document).

Files: ``freshness.json`` (settings, every document and request record, the summaries) and
``freshness.md`` (the tables) under the output folder.
"""

from __future__ import annotations

import heapq
import importlib.util
import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.capacity.live_stores import (
    STORES,
    IndexProgress,
    LiveStore,
    Maintained,
    Session,
)
from bench.capacity.schedule import gamma_arrivals
from bench.config.build import OptionError
from bench.errors import MissingDependencyError
from bench.results.write import atomic_write_bytes

log = logging.getLogger("bench")

PHASES = ("idle", "ingest", "after")
#: untimed searches per session before the idle phase
WARMUP = 3
SCHEMA_VERSION = 1


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:300]


# ------------------------------------------------------------------ records


@dataclass(frozen=True)
class QueryRecord:
    """One timed request. ``send_s``: intended send, seconds from the phase start;
    ``latency_ms`` from it to the reply (NaN when failed); ``recall`` NaN when failed;
    ``n_present``: ingest documents acknowledged before the send."""

    phase: str
    query: int
    send_s: float
    latency_ms: float
    status: str
    recall: float
    n_present: int
    inflight_hit: bool
    error: str = ""


@dataclass(frozen=True)
class DocRecord:
    """One inserted document (see the module docstring for each time)."""

    doc: int
    insert_s: float
    insert_ms: float
    status: str  # searchable | never_searchable | insert_failed
    searchable_ms: float | None
    #: from the acknowledgement to the reply of the probe that found it
    after_ack_ms: float | None
    probes: int
    probe_failures: int
    indexed_ms: float | None
    error: str = ""


@dataclass(frozen=True)
class PhaseSummary:
    phase: str
    queries: int
    failed: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    recall: float | None
    inflight_hits: int


@dataclass(frozen=True)
class Changed:
    paired: int
    changed: int
    changed_new: int
    changed_old: int
    should_change: int
    missed_new: int


@dataclass(frozen=True)
class FreshnessResult:
    database: str
    index: str
    build_s: float
    docs: tuple[DocRecord, ...]
    queries: tuple[QueryRecord, ...]
    phases: tuple[PhaseSummary, ...]
    changed: Changed
    #: how many rows the index covered at the first reading (None: not reported)
    indexed_at_start: int | None
    maintenance_runs: int
    maintenance_errors: int
    wall_s: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.docs)


# ------------------------------------------------------------------ the corpus


def synthetic_corpus(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    """``n`` unit vectors around ``clusters`` random unit centres (float32 [n, dim])."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    # noise of norm ~1.2 around a unit centre: clusters overlap, neighbours are not obvious
    x = centres[rng.integers(0, clusters, n)] + 1.2 / math.sqrt(dim) * rng.standard_normal(
        (n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def query_vectors(corpus: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` noisy copies of corpus rows drawn uniformly (base and ingest alike)."""
    rng = np.random.default_rng(seed + 17)
    picked = corpus[rng.integers(0, len(corpus), n)]
    q = picked + 0.4 / math.sqrt(corpus.shape[1]) * rng.standard_normal(picked.shape)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.astype(np.float32)


# ------------------------------------------------------------------ exact truth


def recall_present(ids: np.ndarray, queries: np.ndarray, vectors: np.ndarray, n_base: int,
                   present: np.ndarray, acked: np.ndarray, k: int) -> np.ndarray:
    """Tie-tolerant recall@k of each query's returned ``ids`` [n_q, k] against exact top-k
    over the base rows plus the ingest rows acknowledged before its send: ``present[i]`` is
    that count of acknowledged inserts, in acknowledgement order ``acked`` (ingest row
    numbers, 0-based). Rows a query returned that were not present are rescored like any."""
    from bench.index.base import SearchResult
    from bench.index.exact import ann_recall_at_k, exact_topk

    out = np.full(len(ids), np.nan)
    for m in np.unique(present):
        rows = np.flatnonzero(present == m)
        keep = np.concatenate([np.arange(n_base), n_base + acked[:m]]).astype(np.int64)
        kk = min(k, len(keep))
        ex = exact_topk(vectors[keep], queries[rows], kk)
        exact = SearchResult(ids=keep[ex.ids], scores=ex.scores)
        got = SearchResult(ids=ids[rows, :kk], scores=np.zeros((len(rows), kk), np.float32))
        out[rows] = ann_recall_at_k(got, exact, kk, vectors=vectors, queries=queries[rows])
    return out


def changed_answers(before: dict[int, np.ndarray], after: dict[int, np.ndarray],
                    should: dict[int, bool], n_base: int) -> Changed:
    """Per query asked in both phases (ok both times): see the module docstring."""
    paired = sorted(set(before) & set(after))
    changed = changed_new = changed_old = should_n = missed = 0
    for q in paired:
        b, a = before[q], after[q]
        new = bool((a >= n_base).any())
        if not np.array_equal(a, b):
            changed += 1
            changed_new += new
            changed_old += not new
        if should[q]:
            should_n += 1
            missed += not new
    return Changed(len(paired), changed, changed_new, changed_old, should_n, missed)


# ------------------------------------------------------------------ the study


@dataclass(frozen=True)
class _Options:
    data_dir: str
    m: int
    ef_construction: int
    ef_search: int
    nprobe: int
    lancedb_optimize_every_s: float


class FreshnessStudy:
    """``capacity.freshness`` (conf/capacity/freshness/<option>.yaml,
    docs/experiments/freshness.md).

    databases: any of pgvector, milvus_lite, lancedb, faiss_hnsw, measured one after the
    other. n_base / n_ingest / dim / clusters: the synthetic corpus. n_queries: distinct
    queries (null: ``query_rps`` x the ingest duration, so each phase asks each once).
    query_rps: the open-loop query rate of every phase; ingest_rps: documents/s inserted,
    ``insert_batch`` per insert call. k: top-k of queries and probes. poll_ms: the probe and
    index-progress interval; searchable_timeout_s: a document not found by then is
    ``never_searchable``. query_workers: threads (pgvector: connections) sending queries.
    m / ef_construction / ef_search: the HNSW indexes' (pgvector, LanceDB, faiss);
    nprobe: Milvus IVF_FLAT's. lancedb_optimize_every_s: LanceDB's ``optimize()`` period
    during and after ingest (0: never, new rows then stay unindexed). data_dir: where the
    databases keep their files. seed: corpus, queries and arrivals."""

    def __init__(self, *, databases: list[str], n_base: int = 2000, n_ingest: int = 200,
                 dim: int = 64, clusters: int = 32, n_queries: int | None = None,
                 query_rps: float = 20.0, ingest_rps: float = 10.0, insert_batch: int = 1,
                 k: int = 10, poll_ms: float = 20.0, searchable_timeout_s: float = 5.0,
                 query_workers: int = 2, m: int = 16, ef_construction: int = 64,
                 ef_search: int = 40, nprobe: int = 8, lancedb_optimize_every_s: float = 2.0,
                 data_dir: str = ".cache/bench/freshness", seed: int = 0) -> None:
        if not databases:
            raise OptionError("databases", f"list at least one of {', '.join(STORES)}")
        for d in databases:
            if d not in STORES:
                raise OptionError("databases", f"unknown {d!r}; known: {', '.join(STORES)}")
        if len(set(databases)) != len(databases):
            raise OptionError("databases", "a database is listed twice")
        ints = {"n_base": (n_base, 1), "n_ingest": (n_ingest, 1), "dim": (dim, 2),
                "clusters": (clusters, 1), "insert_batch": (insert_batch, 1), "k": (k, 1),
                "query_workers": (query_workers, 1), "m": (m, 2),
                "ef_construction": (ef_construction, 4), "ef_search": (ef_search, 1),
                "nprobe": (nprobe, 1)}
        for name, (v, lo) in ints.items():
            if v < lo:
                raise OptionError(name, f"must be >= {lo}, got {v}")
        if k > n_base:
            raise OptionError("k", f"must be <= n_base ({n_base}), got {k}")
        if n_queries is not None and n_queries < 1:
            raise OptionError("n_queries", f"must be >= 1 or null, got {n_queries}")
        for name, fv in (("query_rps", query_rps), ("ingest_rps", ingest_rps),
                         ("poll_ms", poll_ms), ("searchable_timeout_s", searchable_timeout_s)):
            if not (math.isfinite(fv) and fv > 0):
                raise OptionError(name, f"must be a finite number > 0, got {fv}")
        if not (math.isfinite(lancedb_optimize_every_s) and lancedb_optimize_every_s >= 0):
            raise OptionError("lancedb_optimize_every_s", f"must be >= 0 (0: never), got "
                                                          f"{lancedb_optimize_every_s}")
        if insert_batch > n_ingest:
            raise OptionError("insert_batch", f"must be <= n_ingest ({n_ingest})")
        if not str(data_dir).strip():
            raise OptionError("data_dir", "must be a folder path")
        for d in databases:  # a missing package: one line naming the extra, before work
            package = STORES[d][0]
            if importlib.util.find_spec(package) is None:
                raise MissingDependencyError(package, "vectordb", f"capacity.freshness "
                                                                  f"database {d}")
        self.databases = tuple(databases)
        self.n_base, self.n_ingest, self.dim, self.clusters = n_base, n_ingest, dim, clusters
        self.duration_s = n_ingest / ingest_rps
        self.n_queries = n_queries or max(1, round(query_rps * self.duration_s))
        self.query_rps, self.ingest_rps, self.insert_batch = query_rps, ingest_rps, insert_batch
        self.k, self.poll_s, self.timeout_s = k, poll_ms / 1000.0, searchable_timeout_s
        self.query_workers = query_workers
        self.options = _Options(str(data_dir), m, ef_construction, ef_search, nprobe,
                                lancedb_optimize_every_s)
        self.seed = seed

    def settings(self) -> dict[str, Any]:
        return {"databases": list(self.databases), "n_base": self.n_base,
                "n_ingest": self.n_ingest, "dim": self.dim, "clusters": self.clusters,
                "n_queries": self.n_queries, "query_rps": self.query_rps,
                "ingest_rps": self.ingest_rps, "insert_batch": self.insert_batch, "k": self.k,
                "poll_ms": self.poll_s * 1000.0, "searchable_timeout_s": self.timeout_s,
                "query_workers": self.query_workers, "phase_s": self.duration_s,
                **asdict(self.options), "seed": self.seed}

    def run(self, out_dir: Path) -> list[FreshnessResult]:
        """Every database in turn; writes freshness.json and freshness.md in ``out_dir``."""
        corpus = synthetic_corpus(self.n_base + self.n_ingest, self.dim, self.clusters,
                                  self.seed)
        qv = query_vectors(corpus, self.n_queries, self.seed)
        results = []
        for name in self.databases:
            log.info("freshness: %s: building the base (%d x %d)", name, self.n_base, self.dim)
            store = STORES[name][1](corpus[:self.n_base], self.options)
            try:
                results.append(run_one(store, corpus, qv, self))
            finally:
                store.close()
            r = results[-1]
            log.info("freshness: %s: %d/%d searchable, %d never, p50 %s ms", name,
                     r.count("searchable"), len(r.docs), r.count("never_searchable"),
                     _fmt(_pct([d.searchable_ms for d in r.docs], 50)))
        write(results, self, out_dir)
        return results


# ------------------------------------------------------------------ one database


class _Clock:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def sleep_until(self, t: float) -> None:
        d = t - self.now()
        if d > 0:
            time.sleep(d)


@dataclass
class _Ingest:
    """The writer's and prober's shared state (one lock)."""

    n: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    insert_s: np.ndarray = field(init=False)
    ack_s: np.ndarray = field(init=False)
    ok: np.ndarray = field(init=False)
    errors: dict[int, str] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # acknowledged ingest rows, in order
    writer_done: bool = False

    def __post_init__(self) -> None:
        self.insert_s = np.full(self.n, np.nan)
        self.ack_s = np.full(self.n, np.inf)
        self.ok = np.zeros(self.n, dtype=bool)


def _open_loop(phase: str, send_s: np.ndarray, qidx: np.ndarray, qv: np.ndarray,
               sessions: Sequence[Session], k: int, clock: _Clock, start: float,
               ingest: _Ingest | None, sink: list[tuple[Any, ...]]) -> None:
    """Send query ``qidx[i]`` at ``start + send_s[i]`` (the dispatcher never waits for a
    reply); a free session answers it. Appends (i, intended, reply, ids | error, n_present),
    times from the clock's origin."""
    pool: queue.Queue[Session] = queue.Queue()
    for s in sessions:
        pool.put(s)
    lock = threading.Lock()

    def one(i: int) -> None:
        s = pool.get()
        try:
            n_present = 0
            if ingest is not None:
                with ingest.lock:
                    n_present = len(ingest.order)
            try:
                got: Any = s.search(qv[qidx[i]], k)
            except Exception as exc:  # a failed request is a status, not a crash
                got = _last_line(exc)
            reply = clock.now()
        finally:
            pool.put(s)
        with lock:
            sink.append((i, start + float(send_s[i]), reply, got, n_present))

    with ThreadPoolExecutor(max_workers=len(sessions),
                            thread_name_prefix=f"fresh-{phase}") as ex:
        for i in range(len(send_s)):
            clock.sleep_until(start + float(send_s[i]))
            ex.submit(one, i)


def _writer(store: LiveStore, corpus: np.ndarray, n_base: int, study: FreshnessStudy,
            clock: _Clock, start: float, st: _Ingest, on_ack: Callable[[int, float], None]
            ) -> None:
    b = study.insert_batch
    for c, lo in enumerate(range(0, st.n, b)):
        rows = np.arange(lo, min(lo + b, st.n))
        intended = start + c * b / study.ingest_rps
        clock.sleep_until(intended)
        with st.lock:
            st.insert_s[rows] = intended
        try:
            store.insert(n_base + rows, corpus[n_base + rows])
        except Exception as exc:  # a refused insert is its documents' status
            with st.lock:
                for r in rows:
                    st.errors[int(r)] = _last_line(exc)
            continue
        t = clock.now()
        with st.lock:
            st.ack_s[rows] = t
            st.ok[rows] = True
            st.order.extend(int(r) for r in rows)
        for r in rows:
            on_ack(int(r), t)
    with st.lock:
        st.writer_done = True


class _Prober:
    """Probes every acknowledged document with its own vector until found or out of time."""

    def __init__(self, session: Session, corpus: np.ndarray, n_base: int, study: FreshnessStudy,
                 clock: _Clock, st: _Ingest) -> None:
        self.s, self.corpus, self.n_base, self.study, self.clock, self.st = (
            session, corpus, n_base, study, clock, st)
        self.heap: list[tuple[float, int]] = []
        self.cv = threading.Condition()
        self.found: dict[int, tuple[float, float]] = {}  # row -> (searchable, after ack) ms
        self.probes = np.zeros(st.n, dtype=np.int64)
        self.failures = np.zeros(st.n, dtype=np.int64)

    def on_ack(self, row: int, t: float) -> None:
        with self.cv:
            heapq.heappush(self.heap, (t, row))
            self.cv.notify()

    def run(self) -> None:
        st, poll, timeout = self.st, self.study.poll_s, self.study.timeout_s
        while True:
            with self.cv:  # the earliest due probe; a new acknowledgement may come first
                while True:
                    if self.heap:
                        wait = self.heap[0][0] - self.clock.now()
                        if wait <= 0:
                            due, row = heapq.heappop(self.heap)
                            break
                        self.cv.wait(wait)
                        continue
                    with st.lock:
                        if st.writer_done:
                            return
                    self.cv.wait(0.05)
            sent = self.clock.now()
            deadline = float(st.insert_s[row]) + timeout
            if sent > deadline:
                continue  # out of time: never_searchable
            self.probes[row] += 1
            try:
                ids = self.s.search(self.corpus[self.n_base + row], self.study.k)
                hit = bool((ids == self.n_base + row).any())
            except Exception:  # counted; the next probe tries again
                self.failures[row] += 1
                hit = False
            reply = self.clock.now()
            if hit:
                self.found[row] = ((reply - float(st.insert_s[row])) * 1000.0,
                                   (reply - float(st.ack_s[row])) * 1000.0)
                continue
            with self.cv:
                heapq.heappush(self.heap, (due + poll * max(1, math.ceil(
                    (reply - due) / poll)), row))


def _monitor(store: LiveStore, n_base: int, clock: _Clock, st: _Ingest, poll: float,
             timeout: float, stop: threading.Event, out: dict[str, Any]) -> None:
    """Reads the indexed-row count every ``poll`` s; ingest row j is indexed at the first
    reading >= n_base + j + 1."""
    if not isinstance(store, IndexProgress):
        return
    indexed = np.full(st.n, np.nan)
    first = None
    try:
        while not stop.is_set():
            try:
                n: int | None = store.indexed_rows()
            except Exception:  # a failed reading: the next one counts
                n = None
            t = clock.now()
            with st.lock:
                if n is not None:
                    first = n if first is None else first
                    newly = np.flatnonzero(np.isnan(indexed) & st.ok
                                           & (n_base + np.arange(st.n) + 1 <= n))
                    indexed[newly] = (t - st.insert_s[newly]) * 1000.0
                done = st.writer_done
                pending = bool((np.isnan(indexed) & st.ok).any())
                started = st.insert_s[~np.isnan(st.insert_s)]
                last = float(started.max()) if started.size else 0.0
            if done and (not pending or t > last + timeout):
                break
            time.sleep(poll)
    finally:
        out["indexed_ms"], out["first"] = indexed, first


def _maintainer(store: LiveStore, stop: threading.Event, out: dict[str, int]) -> None:
    if not isinstance(store, Maintained) or store.maintain_every_s <= 0:
        return
    while not stop.wait(store.maintain_every_s):
        try:
            store.maintain()
            out["runs"] = out.get("runs", 0) + 1
        except Exception as exc:
            out["errors"] = out.get("errors", 0) + 1
            log.warning("freshness: maintenance failed: %s", _last_line(exc))


def run_one(store: LiveStore, corpus: np.ndarray, qv: np.ndarray,
            study: FreshnessStudy) -> FreshnessResult:
    t_wall = time.perf_counter()
    n_base, n = study.n_base, study.n_ingest
    sessions = store.sessions(study.query_workers + 1)
    qs, probe_s = sessions[:-1], sessions[-1]
    n_req = max(1, round(study.query_rps * study.duration_s))

    def schedule(phase: int) -> tuple[np.ndarray, np.ndarray]:
        # idle and after share a seed: the same queries in the same order, paired per query
        seed = study.seed + (1 if phase == 1 else 0)
        sch = gamma_arrivals(rate_rps=study.query_rps, n=n_req, n_queries=study.n_queries,
                             seed=seed)
        return sch.send_s, sch.query

    # untimed warm-up: each session's first searches (connection setup, a cold cache)
    for sess in sessions:
        for q in qv[:WARMUP]:
            try:
                sess.search(q, study.k)
            except Exception:  # the timed requests record what fails
                break
    clock = _Clock()
    raw: dict[str, list[tuple[Any, ...]]] = {p: [] for p in PHASES}
    sched = {p: schedule(i) for i, p in enumerate(PHASES)}
    # 1. idle
    start = clock.now()
    _open_loop("idle", *sched["idle"], qv, qs, study.k, clock, start, None, raw["idle"])
    # 2. ingest: writer, prober, index monitor and maintenance alongside the queries
    st = _Ingest(n)
    prober = _Prober(probe_s, corpus, n_base, study, clock, st)
    stop = threading.Event()
    mon: dict[str, Any] = {}
    maint: dict[str, int] = {}
    start = clock.now() + 0.05
    threads = [
        threading.Thread(target=_writer, args=(store, corpus, n_base, study, clock, start, st,
                                               prober.on_ack), name="fresh-writer"),
        threading.Thread(target=prober.run, name="fresh-prober"),
        threading.Thread(target=_monitor, args=(store, n_base, clock, st, study.poll_s,
                                                study.timeout_s, stop, mon),
                         name="fresh-monitor"),
        threading.Thread(target=_maintainer, args=(store, stop, maint), name="fresh-maintain"),
    ]
    for t in threads:
        t.start()
    _open_loop("ingest", *sched["ingest"], qv, qs, study.k, clock, start, st, raw["ingest"])
    threads[0].join()
    threads[1].join()  # every acknowledged document found or out of time
    # 3. after: everything inserted; the monitor and maintenance keep running through it
    start = clock.now()
    _open_loop("after", *sched["after"], qv, qs, study.k, clock, start, None, raw["after"])
    threads[2].join(timeout=study.timeout_s + 5.0)
    stop.set()
    for t in threads[2:]:
        t.join()
    indexed = mon.get("indexed_ms", np.full(n, np.nan))

    docs = []
    for j in range(n):
        err = st.errors.get(j, "")
        found = prober.found.get(j)
        status = ("insert_failed" if err else "searchable" if found else "never_searchable")
        docs.append(DocRecord(
            j, float(st.insert_s[j]) if not math.isnan(st.insert_s[j]) else math.nan,
            (float(st.ack_s[j] - st.insert_s[j]) * 1000.0) if st.ok[j] else math.nan, status,
            found[0] if found else None, found[1] if found else None, int(prober.probes[j]),
            int(prober.failures[j]),
            None if math.isnan(indexed[j]) else float(indexed[j]), err))

    acked = np.asarray(st.order, dtype=np.int64)
    ack_rank = np.full(n, np.iinfo(np.int64).max)
    ack_rank[acked] = np.arange(len(acked))
    n_all = int(st.ok.sum())
    queries: list[QueryRecord] = []
    by_phase: dict[str, dict[int, np.ndarray]] = {}
    for phase in PHASES:
        send_s, qidx = sched[phase]
        rows = sorted(raw[phase], key=lambda r: r[0])
        ok = [r for r in rows if not isinstance(r[3], str)]
        present = np.asarray([0 if phase == "idle" else n_all if phase == "after" else r[4]
                              for r in ok], dtype=np.int64)
        ids = np.full((len(ok), study.k), -1, dtype=np.int64)
        for i, r in enumerate(ok):
            got = np.asarray(r[3])[:study.k]
            ids[i, :len(got)] = got
        rec = (recall_present(ids, qv[qidx[[r[0] for r in ok]]], corpus, n_base, present,
                              acked, study.k) if ok else np.zeros(0))
        ok_i = 0
        by_phase[phase] = {}
        for r in rows:
            i, intended, reply, got, n_present = r
            lat = (reply - intended) * 1000.0
            if isinstance(got, str):
                queries.append(QueryRecord(phase, int(qidx[i]), float(send_s[i]), math.nan,
                                           "failed", math.nan, int(n_present), False, got))
                continue
            new = ids[ok_i][ids[ok_i] >= n_base] - n_base
            inflight = bool((ack_rank[new] >= present[ok_i]).any())
            queries.append(QueryRecord(phase, int(qidx[i]), float(send_s[i]), lat, "ok",
                                       float(rec[ok_i]), int(present[ok_i]), inflight))
            by_phase[phase][int(qidx[i])] = ids[ok_i]
            ok_i += 1
    # an exact top-k over everything inserted holding an ingest row: the answer should change
    allrows = np.concatenate([np.arange(n_base), n_base + acked]).astype(np.int64)
    from bench.index.exact import exact_topk

    ex = exact_topk(corpus[allrows], qv, min(study.k, len(allrows)))
    should = {q: bool((allrows[ex.ids[q]] >= n_base).any()) for q in range(len(qv))}
    changed = changed_answers(by_phase["idle"], by_phase["after"], should, n_base)
    phases = tuple(_summary(p, [q for q in queries if q.phase == p]) for p in PHASES)
    notes = []
    if not isinstance(store, IndexProgress):
        notes.append("the database reports no index progress: time-to-indexed not measured")
    return FreshnessResult(store.name, store.index, float(store.build_s), tuple(docs),
                           tuple(queries), phases, changed, mon.get("first"),
                           maint.get("runs", 0), maint.get("errors", 0),
                           time.perf_counter() - t_wall, tuple(notes))



# ------------------------------------------------------------------ summaries and files


def _pct(values: Sequence[float | None], q: float) -> float | None:
    v = [x for x in values if x is not None and not math.isnan(x)]
    return float(np.percentile(v, q)) if v else None


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _summary(phase: str, rows: list[QueryRecord]) -> PhaseSummary:
    ok = [r for r in rows if r.status == "ok"]
    lat = [r.latency_ms for r in ok]
    return PhaseSummary(phase, len(rows), len(rows) - len(ok), _pct(lat, 50), _pct(lat, 95),
                        _pct(lat, 99), float(np.mean([r.recall for r in ok])) if ok else None,
                        sum(r.inflight_hit for r in ok))


def freshness_lines(results: Sequence[FreshnessResult], study: FreshnessStudy) -> list[str]:
    """The three tables (freshness, queries idle vs ingest, changed answers) and how they
    were measured."""
    s = study
    out = ["### Freshness under ingest", "",
           f"Synthetic corpus: {s.n_base} base + {s.n_ingest} ingest unit vectors (dim {s.dim}, "
           f"{s.clusters} clusters, seed {s.seed}); ingest {s.ingest_rps:g} docs/s in calls of "
           f"{s.insert_batch}; queries open loop (Poisson) at {s.query_rps:g} req/s over "
           f"{s.query_workers} sessions, {s.duration_s:g} s per phase, latency from the "
           f"intended send; probe = the document's own vector, top-{s.k}, every "
           f"{s.poll_s * 1000:g} ms, never_searchable after {s.timeout_s:g} s; time-to-indexed "
           "from the database's indexed-row count read every poll (insertion order assumed); "
           f"recall@{s.k} against exact search over the rows acknowledged before each query's "
           "send (tie-tolerant, in-flight rows rescored).", "",
           "| database | index | insert ack p50 / p99 ms | time-to-searchable p50 / p95 / p99 "
           "/ max ms | after ack p50 ms | searchable | never searchable | insert failed | "
           "time-to-indexed p50 / p95 ms | not indexed |",
           "|---|---|---|---|---:|---:|---:|---:|---|---:|"]
    for r in results:
        ins = [d.insert_ms for d in r.docs]
        tts = [d.searchable_ms for d in r.docs]
        tti = [d.indexed_ms for d in r.docs]
        ok = [d for d in r.docs if d.status != "insert_failed"]
        not_idx = sum(d.indexed_ms is None for d in ok)
        out.append(
            f"| {r.database} | {r.index} | {_fmt(_pct(ins, 50))} / {_fmt(_pct(ins, 99))} | "
            f"{_fmt(_pct(tts, 50))} / {_fmt(_pct(tts, 95))} / {_fmt(_pct(tts, 99))} / "
            f"{_fmt(_pct(tts, 100))} | {_fmt(_pct([d.after_ack_ms for d in r.docs], 50))} | "
            f"{r.count('searchable')} | {r.count('never_searchable')} | "
            f"{r.count('insert_failed')} | {_fmt(_pct(tti, 50))} / {_fmt(_pct(tti, 95))} | "
            f"{not_idx}{' (not reported)' if r.indexed_at_start in (None, 0) else ''} |")
    out += ["", f"| database | phase | queries | failed | latency p50 / p95 / p99 ms | "
                f"recall@{s.k} | in-flight hits |", "|---|---|---:|---:|---|---:|---:|"]
    for r in results:
        for p in r.phases:
            out.append(f"| {r.database} | {p.phase} | {p.queries} | {p.failed} | "
                       f"{_fmt(p.p50_ms)} / {_fmt(p.p95_ms)} / {_fmt(p.p99_ms)} | "
                       f"{_fmt(p.recall, 3)} | {p.inflight_hits} |")
    out += ["", "Answers after ingest vs idle, paired per query (ordered top-k):", "",
            "| database | queries paired | changed | changed with a new doc | changed, no new "
            "doc | exact top-k gained a new doc | served missed it |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        c = r.changed
        out.append(f"| {r.database} | {c.paired} | {c.changed} | {c.changed_new} | "
                   f"{c.changed_old} | {c.should_change} | {c.missed_new} |")
    notes = [f"- {r.database}: build {r.build_s:.2f} s, study {r.wall_s:.1f} s"
             + (f", {r.maintenance_runs} optimize() runs" if r.maintenance_runs else "")
             + (f", {r.maintenance_errors} failed" if r.maintenance_errors else "")
             + "".join(f"; {n}" for n in r.notes) for r in results]
    return [*out, "", *notes, ""]


def _plain(v: Any) -> Any:
    """JSON values: NaN (a failed request's latency) as null, numpy scalars as Python's."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def write(results: Sequence[FreshnessResult], study: FreshnessStudy, out_dir: Path
          ) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / "freshness.json"
    atomic_write_bytes(js, json.dumps(_plain({
        "schema_version": SCHEMA_VERSION, "settings": study.settings(),
        "results": [asdict(r) for r in results]}), indent=1, allow_nan=False).encode())
    md = out_dir / "freshness.md"
    atomic_write_bytes(md, "\n".join(["# Freshness under ingest", "",
                                      *freshness_lines(results, study)[2:]]).encode())
    return [js, md]


# ------------------------------------------------------------------ the config


def build_study(node: Any) -> FreshnessStudy:
    """``capacity.freshness`` built and checked (a bad option: ConfigError naming
    ``capacity.freshness.<option>``, exit 2, before any work)."""
    from bench.config.build import build

    study = build(node, "capacity.freshness", FreshnessStudy)
    if study is None:
        from bench.errors import ConfigError

        raise ConfigError("capacity.freshness._target_", "null: leave capacity.freshness "
                                                         "empty ({}) to turn the study off")
    return study


def run_configured(node: Any, out_dir: Path) -> tuple[list[FreshnessResult], list[str]]:
    study = build_study(node)
    results = study.run(out_dir)
    return results, freshness_lines(results, study)
