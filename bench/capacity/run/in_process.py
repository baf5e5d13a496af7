"""``capacity.load=open``: the capacity study of one config (``bench.capacity.study``),
against its chain in a worker pool or against ``bench.serve`` processes of it.

A request of query q: in process, the config's whole request for q on the chain
``/v1/answer`` runs (``QueryChain(whole_request=True)``: a retrieval config's query-time chain,
its answer the ranked doc ids; a generated config's retrieval, context and generation, its
answer the generated text); served, ``POST /v1/retrieve {"query_id"}`` (a retrieval config) or
``POST /v1/answer {"query_id", "stream": true}`` (a generated config, read as SSE). The
served processes are started with the run's own overrides plus ``serve.config=<config_id>``
(so they load the same cached index), on free ports, waited for with a bounded timeout and
always stopped. Levels are kept under ``<cache_dir>/capacity-levels/<study key>/``: a rerun
of the same plan resumes (``capacity.resume=false`` measures everything afresh).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import fields, replace
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import numpy as np

from bench.capacity.backends import HttpBackend, PoolBackend
from bench.capacity.base import CapacityAnswer, CapacityRun, Slo, StudySummary
from bench.capacity.components import COMPONENTS, Component
from bench.capacity.driver import Target
from bench.capacity.faults import FAULTS, Fault
from bench.capacity.metrics import check_slo
from bench.capacity.quality import answer_scorer
from bench.capacity.report import lines, write_study
from bench.capacity.study import LevelStore, Study, StudySettings, run_study, study_key
from bench.config.schema import CapacityConfig, LoadSettings
from bench.errors import ConfigError
from bench.generation.base import Generation
from bench.pipeline.outcome import Executed
from bench.pipeline.request import QueryChain
from bench.retrieval.base import Pool, order_key
from bench.retrieval.search import DenseSearch

log = logging.getLogger("bench")

TARGETS = ("in_process", "serve", "http")


BEST = "best_under_budget"


def choose_config(done: Executed, wanted: str) -> int:
    """Index in ``done.configs`` of the config to drive."""
    if wanted == BEST:
        metric = done.settings.primary_metric
        best, best_v = None, float("-inf")
        for i, (c, s) in enumerate(zip(done.configs, done.scores, strict=True)):
            if c.pool is None:
                continue
            row = next((r for r in s.summary if r.metric == metric and r.scope == "all"), None)
            if row is not None and row.mean is not None and row.mean > best_v:
                best, best_v = i, row.mean
        if best is None:
            raise ConfigError("capacity.config", "no config was kept by the budget: nothing "
                                                 "to drive")
        return best
    for i, c in enumerate(done.configs):
        if c.spec.config_id == wanted:
            if c.pool is None:
                raise ConfigError("capacity.config", f"config {wanted} was pruned by the "
                                                     f"budget ({c.pruned_reason})")
            return i
    ids = ", ".join(f"{c.spec.config_id} ({c.spec.label})" for c in done.configs)
    raise ConfigError("capacity.config", f"no config {wanted!r} in this run; configs: {ids}, "
                                         f"or {BEST}")


def slo_of(cap: CapacityConfig) -> dict[str, float]:
    slo = {k: v for k, v in (("ttft", cap.slo_ttft_ms), ("tpot", cap.slo_tpot_ms),
                             ("e2el", cap.slo_e2el_ms)) if v is not None}
    if not slo:
        raise ConfigError("capacity.slo_e2el_ms", "goodput needs at least one SLO: set "
                                                  "slo_ttft_ms, slo_tpot_ms or slo_e2el_ms")
    for k, v in slo.items():
        if not float(v) > 0:
            raise ConfigError(f"capacity.slo_{k}_ms", f"must be > 0 ms, got {v}")
    return check_slo(slo)


def study_settings(cap: CapacityConfig) -> StudySettings:
    """The study's settings; a bad value is a ConfigError naming its key."""
    if cap.target not in TARGETS:
        raise ConfigError("capacity.target", f"{cap.target!r}: {' or '.join(TARGETS)}")
    measurable = [c for c in COMPONENTS if c != "chain"]
    bad_c = [c for c in cap.components if c not in measurable]
    if bad_c:
        raise ConfigError("capacity.components", f"unknown {bad_c}; use "
                                                 f"{', '.join(measurable)}")
    bad_c = [c for c in cap.component_slo_ms if c not in measurable]
    if bad_c:
        raise ConfigError("capacity.component_slo_ms", f"unknown {bad_c}; use "
                                                       f"{', '.join(measurable)}")
    for c, v in cap.component_slo_ms.items():
        if not float(v) > 0:
            raise ConfigError(f"capacity.component_slo_ms.{c}", f"must be > 0 ms, got {v}")
    bad = [f for f in cap.faults if f not in FAULTS]
    if bad:
        raise ConfigError("capacity.faults", f"unknown {bad}; use {', '.join(FAULTS)}")
    if cap.target == "http" and cap.faults and not cap.allow_faults:
        raise ConfigError("capacity.faults", "target=http loads a service bench does not own: "
                                             "no fault is injected unless "
                                             "capacity.allow_faults=true")
    if cap.target == "http" and "restart" in cap.faults:
        raise ConfigError("capacity.faults", "restart: bench has no process of a target=http "
                                             "service to kill (status_429, status_503, slow, "
                                             "close go through the fault proxy)")
    checks = {"capacity.level_seconds": cap.level_seconds > 0,
              "capacity.level_min_requests": cap.level_min_requests >= 1,
              "capacity.level_max_requests": cap.level_max_requests >= cap.level_min_requests,
              "capacity.burstiness": cap.burstiness > 0,
              "capacity.timeout_s": cap.timeout_s > 0, "capacity.retries": cap.retries >= 0,
              "capacity.attainment": 0 < cap.attainment <= 1,
              "capacity.knee_start_rps": cap.knee_start_rps > 0,
              "capacity.knee_repeats": 1 <= cap.knee_repeats <= cap.knee_max_repeats,
              "capacity.knee_ci_width": cap.knee_ci_width > 0,
              "capacity.knee_max_levels": cap.knee_max_levels >= 1,
              "capacity.ceiling_limit_ms": cap.ceiling_limit_ms > 0,
              "capacity.ceiling_max_rps": cap.ceiling_max_rps > 0,
              "capacity.ceiling_min_requests": cap.ceiling_min_requests >= 1,
              "capacity.closed_users": cap.closed_users >= 1,
              "capacity.sweep_shares": all(x > 0 for x in cap.sweep_shares),
              "capacity.fault_share": cap.fault_share > 0,
              "capacity.workers": cap.workers >= 1,
              "capacity.component_max_levels": cap.component_max_levels >= 1,
              "capacity.component_max_seconds": cap.component_max_seconds > 0,
              "capacity.component_passages": cap.component_passages >= 1,
              "capacity.target_rps": cap.target_rps > 0,
              "capacity.unloaded_queries": cap.unloaded_queries >= 1,
              "capacity.generator_processes": cap.generator_processes >= 1,
              "capacity.max_concurrency": cap.max_concurrency is None or cap.max_concurrency >= 1}
    for key, ok in checks.items():
        if not ok:
            raise ConfigError(key, f"out of range: {getattr(cap, key.split('.', 1)[1])!r}")
    return StudySettings(slo_ms=slo_of(cap), faults=tuple(Fault(f) for f in cap.faults),  # type: ignore[arg-type]
                         **copied_settings(cap))


def copied_settings(cap: CapacityConfig) -> dict[str, Any]:
    """The load settings of ``cap`` (every :class:`LoadSettings` field), each as the field's
    type (a YAML ``10`` for a float setting is ``10.0``: study.json and the level store's key
    see the same value)."""
    hints = get_type_hints(LoadSettings)
    return {f.name: _as(hints[f.name], getattr(cap, f.name)) for f in fields(LoadSettings)}


def _as(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if get_origin(hint) in (Union, UnionType):  # ``X | None``: X
        hint = next(a for a in get_args(hint) if a is not type(None))
    if get_origin(hint) in (tuple, list):  # each item as the item type
        return get_origin(hint)(get_args(hint)[0](x) for x in value)
    return hint(value)


class ServeReplica:
    """One ``bench.serve`` process of the config (``bench.serve.launch.ServedProcess``) with
    the restart the fault needs: SIGKILL, then the same command on the same port."""

    def __init__(self, overrides: list[str], log_path: Path) -> None:
        from bench.serve.launch import ServedProcess

        self.proc = ServedProcess(overrides, log_path=log_path)
        self.restarts = 0

    @property
    def url(self) -> str:
        return self.proc.base_url

    def start(self) -> ServeReplica:
        self.proc.start()
        try:
            self.proc.wait_ready()
        except BaseException:
            self.proc.stop()
            raise
        return self

    def restart(self) -> None:
        self.proc.kill()
        self.restarts += 1
        self.start()

    def stop(self) -> None:
        self.proc.stop()


def served_overrides(config_id: str) -> list[str]:
    """The run's own command-line overrides (so a served process composes the same plan and
    loads its cached artifacts), serving ``config_id``."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        raise ConfigError("capacity.target", "serve starts bench.serve with the run's "
                                             "overrides: run it through python -m bench")
    task = [o for o in HydraConfig.get().overrides.task
            if not o.lstrip("+~").startswith(("hydra.", "serve.config=", "config="))]
    return [*task, f"serve.config={config_id}"]


def run_open_capacity(done: Executed, run_dir: Path) -> CapacityRun:
    cap = done.settings.capacity
    s = study_settings(cap)
    i = choose_config(done, str(cap.config))
    spec = done.configs[i].spec
    queries = done.dataset.queries
    score = answer_scorer(queries, cap.quality_metric)
    out_dir = run_dir / "capacity"
    out_dir.mkdir(parents=True, exist_ok=True)
    generated = spec.answers is not None
    backend: PoolBackend | HttpBackend
    if cap.target == "in_process":
        # a generated config's whole request (retrieval, context, generation), the path
        # /v1/answer serves; any other config's query-time chain
        chain = QueryChain(spec.chain, done.executor, done.dataset, done.device,
                           whole_request=True)
        chain(0)  # warm-up: first-call costs are not load
        doc_ids = done.dataset.doc_ids

        def answer(q: int) -> str | None:
            _, value = chain(q)
            if isinstance(value, Pool):  # the ranked documents of this one query
                return " ".join(doc_ids[d] for d in value.hits.doc_idx)
            if isinstance(value, list) and len(value) == 1 and isinstance(value[0], Generation):
                return value[0].text if value[0].status == "ok" else None
            return None

        backend = PoolBackend(answer, n_queries=len(queries), workers=int(cap.workers),
                              name=f"{spec.label} (in-process chain)")
        request = "one query's whole chain in process: " + " > ".join(n.stage for n in
                                                                       spec.chain)
    else:
        overrides = served_overrides(spec.config_id)
        path = "/v1/answer" if generated else "/v1/retrieve"

        def body(q: int) -> dict[str, Any]:
            return {"query_id": queries[q].query_id, **({"stream": True} if generated else {})}

        backend = HttpBackend(
            lambda k: ServeReplica(overrides, out_dir / f"serve-{k}.log").start(), path=path,
            body=body, n_queries=len(queries), name=f"bench.serve {spec.label} {path}",
            work_dir=out_dir, timeout_s=s.timeout_s)
        request = f"POST {path} to bench.serve of the config"
    comps, absent = components_of(done, spec, cap, backend)
    key = study_key(f"{spec.config_id}|{done.dataset.fingerprint}|{backend.name}|"
                    f"{cap.quality_metric}", s)
    levels_dir = Path(str(done.settings.resolved["cache_dir"])).expanduser() / \
        "capacity-levels" / key
    if not cap.resume and levels_dir.exists():
        shutil.rmtree(levels_dir)
    log.info("capacity: open-loop study of %s %s against %s", spec.config_id, spec.label,
             backend.name)
    try:
        st = asyncio.run(run_study(backend, s, score=score, store=LevelStore(levels_dir, key),
                                   components=comps, chain_what=request))
        if absent:
            st = replace(st, notes=(*st.notes, *absent))
    finally:
        if isinstance(backend, HttpBackend):
            backend.close()
    files = write_study(st, out_dir)
    log.info("capacity: %s", st.sizing)
    answer_text = st.sizing
    slo = Slo(budget_ms=min(s.slo_ms.values()), attainment=s.attainment)
    return CapacityRun(spec.config_id, spec.label, request, slo,
                       CapacityAnswer(None, float(cap.target_rps), float(cap.p95_budget_ms), None,
                                      None, s.worker_kind, "measured (see scale-out)",
                                      answer_text),
                       (), tuple(str(f.relative_to(run_dir)) for f in files), "open",
                       summary(st), tuple(lines(st)))


def summary(st: Study) -> StudySummary:
    sc = st.scale_out
    return StudySummary(
        st.ceiling.rate_rps if st.ceiling else None, st.knee.rate_rps, st.knee.ci_low_rps,
        st.knee.ci_high_rps, st.closed.achieved_rps, st.closed.e2el.percentiles["p99"],
        None if st.open_same_load is None else st.open_same_load.e2el.percentiles["p99"],
        None if sc is None else sc.knee_error, None if sc is None else sc.p95_error,
        tuple(f.fault for f in st.faults), all(f.survived for f in st.faults), st.wall_s)


def _slo(cap: CapacityConfig, name: str, chain: dict[str, float]) -> dict[str, float]:
    """A component's SLO: ``component_slo_ms.<name>`` on its E2EL, else the chain's."""
    v = cap.component_slo_ms.get(name)
    return {"e2el": float(v)} if v is not None else dict(chain)


def components_of(done: Executed, spec: Any, cap: CapacityConfig,
                  backend: PoolBackend | HttpBackend) -> tuple[list[Component], list[str]]:
    """The components of ``cap.components`` this config has, each a target of one call of
    it (served: its bench.serve endpoint on replica 0; the vector DB through its own client
    in this process, a round trip to the database server for pgvector); and a note for each
    asked for but absent."""
    parts = _Parts(done, spec, cap, backend)
    comps: list[Component] = []
    absent: list[str] = []
    for name in dict.fromkeys(cap.components):
        got = getattr(parts, name)(_slo(cap, name, slo_of(cap)))
        if isinstance(got, str):
            absent.append(f"component {name}: {got}")
        else:
            comps.append(got)
    return comps, absent


class _Parts:
    """One method per component: its :class:`Component`, or why the config has none."""

    def __init__(self, done: Executed, spec: Any, cap: CapacityConfig,
                 backend: PoolBackend | HttpBackend) -> None:
        from bench.retrieval.stage import RetrieveOp

        self.done, self.spec, self.cap = done, spec, cap
        self.http = backend if isinstance(backend, HttpBackend) else None
        self.queries = done.dataset.queries
        self.retrieve = next((n for n in spec.chain if isinstance(n.op, RetrieveOp)), None)

    def _pool(self, fn: Callable[[int], object], name: str
              ) -> Callable[[], AbstractAsyncContextManager[Target]]:
        from bench.capacity.driver import PoolTarget

        workers = int(self.cap.workers)

        @asynccontextmanager
        async def cm() -> AsyncIterator[Target]:
            t = PoolTarget(lambda q: (fn(q), None)[1], workers=workers, name=name)
            try:
                yield t
            finally:
                t.close()

        return cm

    def _texts(self, k: int) -> list[list[str]]:
        """Each query's top ``k`` passages of the config's pool (the run's cached pool)."""
        from bench.rerank.stage import passages

        ex = self.done.executor
        pool = ex.value(self.spec.pool_node)
        chunks = ex.value(next(n for n in self.spec.chain if n.stage == "chunk"))
        return [passages(pool.hits, chunks, self.done.dataset, q, k)
                for q in range(len(self.queries))]

    def embedder(self, slo: dict[str, float]) -> Component | str:
        from bench.embedding.stage import encode_one_query

        if self.retrieve is None:
            return "the config has no dense retrieval"
        qs = self.queries
        if self.http is not None:
            return Component("embedder", "POST /v1/embeddings: one query text",
                             self.http.endpoint("/v1/embeddings", lambda q: {
                                 "input": qs[q].text, "input_type": "query"}, "embedder"), slo)
        emb = self.done.comps.embedder
        return Component("embedder", "one query encoded in process",
                         self._pool(lambda q: encode_one_query(emb, qs[q].text), "embedder"),
                         slo)

    def vector_db(self, slo: dict[str, float]) -> Component | str:
        if self.retrieve is None:
            return "the config has no vector index"
        ex, op = self.done.executor, self.retrieve.op
        built = ex.value(self.retrieve.input("index")).built
        vecs = np.asarray(ex.value(self.retrieve.input("queries")).vectors)
        chunks = ex.value(self.retrieve.input("chunks"))
        search = DenseSearch.over(built, chunks, op.retriever, op.query_params,
                                  order_key(self.done.dataset.doc_ids))
        kind = type(built).__name__
        return Component("vector_db", f"one search of {kind} (k={search.depth}) through its "
                         "client in the load generator's process",
                         self._pool(lambda q: search.search(vecs[q:q + 1]),
                                    f"vector search {kind}"), slo)

    def reranker(self, slo: dict[str, float]) -> Component | str:
        rr = self.done.comps.reranker
        if rr is None or not any(n.stage.startswith("rerank") for n in self.spec.chain):
            return "the config has no reranker"
        k = int(self.cap.component_passages)
        docs, qs = self._texts(k), self.queries
        what = f"the query and its top {k} passages"
        if self.http is not None:
            return Component("reranker", f"POST /v1/rerank: {what}", self.http.endpoint(
                "/v1/rerank", lambda q: {"query": qs[q].text, "documents": docs[q]},
                "reranker"), slo)
        return Component("reranker", f"{what}, scored in process",
                         self._pool(lambda q: rr.score([qs[q].text], [docs[q]]), "reranker"),
                         slo)

    def llm(self, slo: dict[str, float]) -> Component | str:
        from bench.generation.base import GenerationRequest
        from bench.generation.stage import GenerateOp

        gen = self.done.comps.generator
        if gen is None or self.spec.answers is None:
            return "the config generates no answers"
        ctxs = self.done.executor.value(self.spec.answers.input("contexts")).contexts
        gop = self.spec.answers.op
        assert isinstance(gop, GenerateOp)
        what = "the config's own prompt of one answered query"
        if self.http is not None:
            return Component("llm", f"POST /v1/chat/completions (streamed): {what}",
                             self.http.endpoint("/v1/chat/completions", lambda q: {
                                 "messages": [{"role": m.role, "content": m.content}
                                              for m in ctxs[q % len(ctxs)].messages],
                                 "stream": True}, "llm"), slo)
        return Component("llm", f"{what}, generated in process", self._pool(
            lambda q: gen.generate([GenerationRequest(
                f"capacity-{q}", tuple(ctxs[q % len(ctxs)].messages), gop.sampling)]),
            "llm"), slo)
