"""Plan operations of the `system` stage: a black-box RAG service as configs of the run.

``system=http`` adds the service as configs that every later step treats like bench's own:

- ``system(<name>)`` (kind ``system``): its per-query rankings, mapped back to the
  dataset's doc ids and ordered by the trec_eval rule, scored by the same retrieval metrics
  and paired per query with the run's first config;
- ``system(<name>)>answer`` (kind ``generated``, when the mapping names an answer): its
  answers, with the passages it returned as their context, through the same answer checks,
  judges, completion accounting and paired answer comparisons.

``AskOp`` asks the service once per query (``OFFLINE``: measured in batch, each request's
end-to-end time a per-query sample of stage ``system``, counted into both configs'
end-to-end latency). Each response that came back ``ok`` is stored in the artifact store as
it arrives (stage ``system_response``, keyed by the endpoint, request template, mapping and
the query), so a crash keeps what was answered and a rerun asks only the rest; a failed,
timed-out or invalid request is asked again on the next run. Everything downstream is
recomputed from the responses each run (in memory), so no cached verdict outlives a
changed answer: the judge's model calls are what the prompt memo (``generation.memo``)
saves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.cache.store import ArtifactStore
from bench.context.base import Context, ContextPassage
from bench.data.base import Dataset
from bench.generation.base import ChatMessage, Generation
from bench.generation.stage import Contexts
from bench.pipeline.lanes import ConfigKind, ConfigSpec, PlanState, config_id_of, lane
from bench.pipeline.node import Node, OpTraits, Phase
from bench.retrieval.base import Hits, Pool, order_key, trec_order
from bench.system.base import (
    INVALID,
    OK,
    BlackBox,
    SystemQuery,
    SystemResponse,
    SystemRun,
    load_responses,
    save_responses,
)
from bench.telemetry.base import TimingLog

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from bench.judge.base import Judge, Verdict

log = logging.getLogger("bench")

SYSTEM_STAGE = "system"
RESPONSE_STAGE = "system_response"
RESPONSE_VERSION = "1"
_FILE = "response.parquet"


class ResponseCache:
    """Per-query responses in the artifact store (one entry per ``ok`` response)."""

    def __init__(self, store: ArtifactStore | None, system_params: Mapping[str, Any]) -> None:
        self.store = store
        self.system_params = dict(system_params)

    def params(self, q: SystemQuery) -> dict[str, Any]:
        return {"system": self.system_params, "query": {"id": q.query_id, "text": q.text,
                                                         "roles": list(q.roles),
                                                         "tenant": q.tenant}}

    def get(self, q: SystemQuery) -> SystemResponse | None:
        from bench.cache.store import make_key

        if self.store is None:
            return None
        path = self.store.lookup(RESPONSE_STAGE, make_key(RESPONSE_STAGE, RESPONSE_VERSION,
                                                          self.params(q), []))
        if path is None or self.store.problem(path) is not None:
            return None  # absent or damaged: asked again
        try:
            (r,) = load_responses(path / _FILE)
        except Exception as exc:  # verified but unreadable: treat as absent
            log.warning("system: cached response of %s unreadable (%s); asking again",
                        q.query_id, exc)
            return None
        return r

    def put(self, q: SystemQuery, r: SystemResponse) -> None:
        if self.store is None or r.status != OK:
            return

        def write(tmp: Path) -> None:
            save_responses([r], tmp / _FILE)

        self.store.resolve(RESPONSE_STAGE, version=RESPONSE_VERSION, params=self.params(q),
                           upstream=[], compute=write, load=lambda p: None,
                           log_level=logging.DEBUG)


@dataclass(frozen=True)
class Served:
    """The built ``system`` group: the service and where its responses are cached."""

    system: BlackBox
    store: ArtifactStore | None

    @property
    def name(self) -> str:
        return self.system.name


def system_queries(dataset: Dataset) -> list[SystemQuery]:
    return [SystemQuery(q.query_id, q.text, tuple(q.allowed_roles), q.tenant)
            for q in dataset.queries]


@dataclass(frozen=True)
class AskInputs:
    data: Dataset


@dataclass(frozen=True)
class AskOp(OpTraits):
    """Dataset -> every query's response (cached per query as it arrives)."""

    served: Served
    stage: str = SYSTEM_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    request_stages: ClassVar[tuple[str, ...]] = (SYSTEM_STAGE,)
    Inputs: ClassVar[type] = AskInputs

    def params(self) -> Mapping[str, Any]:
        return {"system": self.served.system.cache_params()}

    def run(self, inputs: AskInputs, timing: TimingLog) -> SystemRun:
        cache = ResponseCache(self.served.store, self.served.system.cache_params())
        queries = system_queries(inputs.data)
        got: dict[str, SystemResponse] = {}
        for q in queries:
            hit = cache.get(q)
            if hit is not None:
                got[q.query_id] = hit
        from_cache = len(got)
        todo = [q for q in queries if q.query_id not in got]
        by_id = {q.query_id: q for q in todo}
        if todo:
            log.info("stage %-10s asking %s for %d queries (%d answered before, from the "
                     "cache)", SYSTEM_STAGE, self.served.system, len(todo), from_cache)
        try:
            for r in self.served.system.ask(todo, lambda r: cache.put(by_id[r.query_id], r)):
                got[r.query_id] = r
        finally:
            self.served.system.close()
        responses = tuple(got[q.query_id] for q in queries)
        if self.served.system.timed:  # each request's own end-to-end time, per query
            for r in responses:
                timing.add("query", 1, r.e2e_ms, r.query_id)
        counts: dict[str, int] = {}
        for r in responses:
            counts[r.status] = counts.get(r.status, 0) + 1
        log.info("stage %-10s %d responses: %s (%d from the cache)", SYSTEM_STAGE,
                 len(responses), ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
                 from_cache)
        return SystemRun(responses, from_cache, self.served.name, counts)


@dataclass(frozen=True)
class PoolInputs:
    responses: SystemRun
    data: Dataset


def checked(r: SystemResponse, docs: Mapping[str, int]) -> SystemResponse:
    """``r`` as the dataset sees it: a ranking naming a document the corpus does not have
    is ``invalid`` (its ranks cannot be scored honestly without it)."""
    if r.status != OK:
        return r
    unknown = [d for d in r.doc_ids if d not in docs]
    if unknown:
        return SystemResponse(r.query_id, INVALID, r.e2e_ms, ttft_ms=r.ttft_ms,
                              client_ms=r.client_ms, server_ms=r.server_ms,
                              error=f"response.doc_id: {len(unknown)} returned ids are not "
                                    f"documents of the dataset (first: {unknown[0]!r}); set "
                                    "system.doc_id_separator if they are chunk ids",
                              http_status=r.http_status, attempts=r.attempts)
    return r


@dataclass(frozen=True)
class PoolOp(OpTraits):
    """Responses -> a pool: each query's documents in the dataset's doc ids, first occurrence
    of a document kept (chunk ids folded to their document), ordered by the trec_eval rule
    (score desc, doc id desc); without mapped scores the service's order is the rank."""

    stage: str = "system_pool"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = PoolInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: PoolInputs, timing: TimingLog) -> Pool:
        dataset = inputs.data
        docs = dataset.doc_index()
        id_key = order_key(dataset.doc_ids)
        offsets = [0]
        doc_idx: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        incomplete: dict[str, str] = {}
        for r in inputs.responses.responses:
            r = checked(r, docs)
            if r.status != OK:
                incomplete[r.query_id] = r.status
                offsets.append(offsets[-1])
                continue
            seen: dict[str, float] = {}
            n = len(r.doc_ids)
            for i, d in enumerate(r.doc_ids):
                s = r.scores[i] if r.scores else float(n - i)
                if d not in seen:  # a document's best (first) passage stands for it
                    seen[d] = s
            idx = np.asarray([docs[d] for d in seen], dtype=np.int32)
            sc = np.asarray(list(seen.values()), dtype=np.float32)
            order = trec_order(idx, sc, id_key)
            doc_idx.append(idx[order])
            scores.append(sc[order])
            offsets.append(offsets[-1] + len(idx))
        hits = Hits(offsets=np.asarray(offsets, dtype=np.int64),
                    doc_idx=np.concatenate(doc_idx) if doc_idx else np.zeros(0, np.int32),
                    scores=np.concatenate(scores) if scores else np.zeros(0, np.float32))
        return Pool(hits, status=incomplete)


@dataclass(frozen=True)
class ContextsOp(OpTraits):
    """Responses -> the contexts the answers were built from: the returned passages (the
    document's text where the mapping names no passage), in the service's order."""

    stage: str = "system_context"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = PoolInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: PoolInputs, timing: TimingLog) -> Contexts:
        from bench.chunking.base import chunk_text_field

        dataset = inputs.data
        docs = dataset.doc_index()
        text_of = {q.query_id: q.text for q in dataset.queries}
        out = []
        for r in inputs.responses.responses:
            r = checked(r, docs)
            if r.status != OK:  # no response, no context: its answer metrics carry why
                continue
            passages = []
            for rank in range(1, max(len(r.doc_ids), len(r.passages)) + 1):
                d = r.doc_ids[rank - 1] if r.doc_ids else ""  # text-only contexts: no id
                text = (r.passages[rank - 1] if r.passages
                        else chunk_text_field(dataset.documents[docs[d]]))
                passages.append(ContextPassage(d, -1, text, rank))
            query = text_of[r.query_id]
            out.append(Context(r.query_id, query, tuple(passages),
                               (ChatMessage("user", query),), 0, len(passages)))
        return Contexts(tuple(out))


@dataclass(frozen=True)
class AnswersInputs:
    responses: SystemRun
    contexts: Contexts
    data: Dataset


@dataclass(frozen=True)
class AnswersOp(OpTraits):
    """Responses -> one ``Generation`` per query (status ``ok`` / ``timeout`` / ``error`` /
    ``invalid``, TTFT when streamed, the whole request's time as e2e)."""

    stage: str = "system_answer"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = AnswersInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: AnswersInputs, timing: TimingLog) -> list[Generation]:
        docs = inputs.data.doc_index()
        out = []
        for r in inputs.responses.responses:
            r = checked(r, docs)
            status = {OK: "ok", "timeout": "timeout", INVALID: INVALID}.get(r.status, "error")
            text = r.answer or "" if r.status == OK else ""
            out.append(Generation(
                request_id=r.query_id, text=text, status=status,
                finish_reason="stop" if status == "ok" else status, prompt_tokens=0,
                output_tokens=0, ttft_ms=r.ttft_ms, tpot_ms=None, e2e_ms=r.e2e_ms,
                error=r.error, attempts=r.attempts))
        return out


@dataclass(frozen=True)
class JudgeInputs:
    generations: list[Generation]
    contexts: Contexts
    data: Dataset


@dataclass(frozen=True)
class JudgeOp(OpTraits):
    """The run's judge on the service's answers, recomputed each run (in memory): the
    answers may change between runs (a resumed run answers what failed before), so no
    verdict is cached under a key that cannot see them; the prompt memo saves the calls."""

    judge: Judge
    stage: str = "judge"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = JudgeInputs

    def params(self) -> Mapping[str, Any]:
        import json

        return {"judge": json.loads(json.dumps(self.judge.cache_params(), default=str))}

    def run(self, inputs: JudgeInputs, timing: TimingLog) -> list[Verdict]:
        from bench.judge.stage import judge_inputs

        by_id = {c.query_id: c for c in inputs.contexts.contexts}
        contexts = [by_id.get(g.request_id) for g in inputs.generations]
        items = judge_inputs(inputs.generations, contexts, inputs.data)
        with timing.measure("total", len(items)):
            return list(self.judge.judge(items))


def expand(s: PlanState) -> PlanState:
    """``system=http``: the service's ranking config (when the mapping names documents) and
    its answered config (when it names an answer), after every config of bench's own."""
    served: Served | None = s.comps.get("system")
    if served is None:
        return s
    from bench.judge.base import PairwiseJudge

    data = s.node("data")
    name = served.name
    ask = Node.of(AskOp(served), f"system {name}", data=data)
    pool = Node.of(PoolOp(), f"system {name} rankings", responses=ask, data=data)
    label = f"system({name})"
    params: dict[str, Any] = {"system": name}
    configs = list(s.configs)
    parent = None
    if served.system.documents:
        spec = lane(label, ConfigKind.SYSTEM, pool, params)
        configs.append(spec)
        parent = spec.config_id
    if served.system.answers:
        ctx = Node.of(ContextsOp(), f"system {name} passages", responses=ask, data=data)
        answers = Node.of(AnswersOp(), f"{label}>answer", responses=ask, contexts=ctx,
                          data=data)
        leaf = answers
        judge = s.comps.judge
        if judge is not None and not isinstance(judge, PairwiseJudge):
            from bench.judge.stage import judge_name

            leaf = Node.of(JudgeOp(judge), f"{label}>answer>judge({judge_name(judge)})",
                           generations=answers, contexts=ctx, data=data)
        configs.append(ConfigSpec(
            config_id_of(leaf), f"{label}>answer", ConfigKind.GENERATED, leaf,
            {**params, "generator": label, "answered_queries": len(s.dataset.queries),
             "judge": None if judge is None or isinstance(judge, PairwiseJudge)
             else judge.name}, parent, pool=pool, answers=answers))
    return s.with_nodes(system=ask).with_configs(configs)


def build(cfg: DictConfig, device: str) -> dict[str, Any]:
    """The service (``system``), its response cache in the run's store, and the preflight
    request: an unreachable endpoint or a response that does not fit the mapping is a
    config error naming the key, before any work."""
    from bench.config.build import build as build_option
    from bench.system.http import HTTPSystem

    system = build_option(cfg.system, "system")
    if system is None:
        return {"system": None}
    store = None
    if isinstance(system, HTTPSystem):  # a started bench.serve shares the run's cache
        system.cache_dir = str(Path(cfg.cache_dir).expanduser())
        store = ArtifactStore(Path(cfg.cache_dir).expanduser())  # responses as they arrive
    if not cfg.get("plan_only"):  # a plan starts no server and sends no request
        system.preflight()
    return {"system": Served(system, store)}

