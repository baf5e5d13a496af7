"""Plan operations and expander of the `route` stage.

- ``TrainRouterOp`` (index time, cached): a classifier router's training — the labelled
  held-out queries (``PlanState.held_out``, labels from ``bench.route.labels``) encoded by the
  run's embedder and fitted; loaded, the vectors are fitted again (deterministic, fast).
- ``RouteOp`` (query time, a ``SelectiveOp``): per query, the router's decision (timed as
  the ``route`` stage) and the chosen route's pool row. In batch every route's pool is
  computed (each is a config of its own, scored on every query); per request
  (``run_one_lazy``: the budget probe, the interleaved latency pass, a served endpoint) only
  the chosen route runs, so a routed request's latency is the decision plus its route.
- ``NoRetrievalOp``: the ``none`` route as a config of its own (an empty pool per query).

The expander resolves each route's target (``bench.route.base``) among the configs built so
far — an unknown one is a config error naming ``router.routes.<route>`` — and adds
``routed[NAME]`` (kind ``routed``) and, when a route targets ``none``, ``route:none``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np

from bench.data.base import Dataset, Query
from bench.embedding.base import Embedder
from bench.embedding.stage import Embeddings
from bench.errors import ConfigError
from bench.iterative.stage import IterateOp
from bench.pipeline.lanes import ConfigKind, ConfigSpec, PlanState, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.retrieval.base import Hits, Pool
from bench.retrieval.stage import RetrieveOp
from bench.route.base import (
    ITERATIVE,
    NONE,
    ONE_SHOT,
    Fitted,
    Router,
    RuleRouter,
    TrainedRouter,
)
from bench.route.labels import LABELS, route_label
from bench.telemetry.base import TimingLog

#: the latency stage of one routing decision
ROUTE_STAGE = "route"
#: most distinct route pools one router reads (RouteInputs' slots)
MAX_ROUTES = 8
NONE_LABEL = "route:none"


@dataclass(frozen=True)
class RoutedPool(Pool):
    """Per query (dataset order) the chosen route's pool row, and the route chosen."""

    routes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrainRouterOp(OpTraits):
    router: TrainedRouter
    embedder: Embedder
    texts: tuple[str, ...]
    labels: tuple[str, ...]
    stage: str = "route_train"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX

    def params(self) -> Mapping[str, Any]:
        digest = hashlib.sha256(json.dumps([self.texts, self.labels]).encode()).hexdigest()
        return {"router": self.router.cache_params(), "embedder": self.embedder.cache_params(),
                "train": digest, "n_train": len(self.texts)}

    def write(self, inputs: Any, directory: Path, timing: TimingLog) -> None:
        out = np.zeros((len(self.texts), self.embedder.dim), dtype=np.float32)
        with timing.measure("total", len(self.texts)):
            self.embedder.encode(list(self.texts), kind="query", out=out)
        np.save(directory / "vectors.npy", out)
        (directory / "labels.json").write_text(json.dumps(list(self.labels)))

    def load(self, directory: Path, inputs: Any) -> Fitted:
        labels = json.loads((directory / "labels.json").read_text())
        return self.router.fit(np.load(directory / "vectors.npy"), labels)


@dataclass(frozen=True)
class RouteInputs:
    data: Dataset
    queries: Embeddings | None = None
    model: Fitted | None = None
    route0: Pool | None = None
    route1: Pool | None = None
    route2: Pool | None = None
    route3: Pool | None = None
    route4: Pool | None = None
    route5: Pool | None = None
    route6: Pool | None = None
    route7: Pool | None = None


_SLOTS = tuple(f.name for f in fields(RouteInputs) if f.name.startswith("route"))


def _empty(n_queries: int) -> Hits:
    return Hits(np.zeros(n_queries + 1, np.int64), np.zeros(0, np.int32),
                np.zeros(0, np.float32), np.zeros(0, np.int32))


@dataclass(frozen=True)
class RouteOp(OpTraits):
    router: Router
    #: per route name (router order), its input slot (None: the ``none`` target)
    slots: tuple[tuple[str, str | None], ...]
    stage: str = ROUTE_STAGE
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = RouteInputs
    latency_stages: ClassVar[tuple[str, ...]] = (ROUTE_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (ROUTE_STAGE,)

    def params(self) -> Mapping[str, Any]:
        return {"router": self.router.cache_params(), "kind": type(self.router).__name__,
                "slots": [list(s) for s in self.slots]}

    def _decide(self, query: Query, vector: Callable[[], np.ndarray],
                model: Callable[[], Fitted | None]) -> str:
        r = self.router
        if isinstance(r, TrainedRouter):
            fitted = model()
            assert fitted is not None, "a trained router without its model node"
            return r.predict(fitted, vector()[None, :])[0]
        assert isinstance(r, RuleRouter)
        return r.choose(query.text)

    def _assemble(self, routes: list[str], pool_of: Callable[[str], Pool | None],
                  row: Callable[[int], int]) -> RoutedPool:
        slot = dict(self.slots)
        offsets, docs, scores, chunks = [0], [], [], []
        for q, route in enumerate(routes):
            name = slot[route]
            pool = None if name is None else pool_of(name)
            if pool is not None:
                h = pool.hits
                s, e = int(h.offsets[row(q)]), int(h.offsets[row(q) + 1])
                docs.append(h.doc_idx[s:e])
                scores.append(h.scores[s:e])
                chunks.append(h.chunks()[s:e])
            offsets.append(offsets[-1] + (0 if pool is None else len(docs[-1])))
        if not docs:
            return RoutedPool(_empty(len(routes)), None, tuple(routes))
        return RoutedPool(Hits(np.asarray(offsets, np.int64), np.concatenate(docs),
                               np.concatenate(scores), np.concatenate(chunks)),
                          None, tuple(routes))

    def run(self, inputs: RouteInputs, timing: TimingLog) -> RoutedPool:
        routes = []
        vecs = None if inputs.queries is None else np.asarray(inputs.queries.vectors)
        for q, query in enumerate(inputs.data.queries):
            def vector(q: int = q) -> np.ndarray:
                return cast(np.ndarray, vecs)[q]

            with timing.measure("query", 1, query_id=query.query_id):
                routes.append(self._decide(query, vector, lambda: inputs.model))
        return self._assemble(routes, lambda name: getattr(inputs, name), lambda q: q)

    def run_one(self, inputs: RouteInputs, query: OneQuery, timer: QueryTimer) -> RoutedPool:
        return self.run_one_lazy(lambda name: getattr(inputs, name), query, timer)

    def run_one_lazy(self, get: Callable[[str], Any], query: OneQuery, timer: QueryTimer
                     ) -> RoutedPool:
        trained = isinstance(self.router, TrainedRouter)
        # the query vector is part of the decision's inputs (computed, and timed, upstream)
        vec = np.asarray(get("queries").vectors)[0] if trained else None
        def model() -> Fitted | None:
            return cast("Fitted | None", get("model")) if trained else None

        with timer.measure(ROUTE_STAGE):
            route = self._decide(query.query, lambda: cast(np.ndarray, vec), model)
        return self._assemble([route], get, lambda q: 0)


@dataclass(frozen=True)
class NoRetrievalInputs:
    data: Dataset


@dataclass(frozen=True)
class NoRetrievalOp(OpTraits):
    """The ``none`` route for every query: no search, an empty pool."""

    stage: str = "no_retrieval"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = NoRetrievalInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: NoRetrievalInputs, timing: TimingLog) -> Pool:
        return Pool(_empty(len(inputs.data.queries)))

    def run_one(self, inputs: NoRetrievalInputs, query: OneQuery, timer: QueryTimer) -> Pool:
        return Pool(_empty(1))


def one_shot_config(s: PlanState) -> ConfigSpec | None:
    """The run's first dense config searching the raw query once (not the exact reference;
    a filter after the search is part of it)."""
    raw = s.node("embed_queries").key
    for c in s.configs:
        if c.kind is not ConfigKind.DENSE or c.reference:
            continue
        searches = [n for n in c.chain if isinstance(n.op, RetrieveOp)]
        if (len(searches) == 1 and searches[0].input("queries").key == raw
                and not any(isinstance(n.op, IterateOp) for n in c.chain)):
            return c
    return None


def iterative_config(s: PlanState, one: ConfigSpec) -> ConfigSpec | None:
    """The first dense config whose loop starts from ``one``'s search."""
    first = {n.key for n in one.chain if isinstance(n.op, RetrieveOp)}
    return next((c for c in s.configs if c.kind is ConfigKind.DENSE and any(
        isinstance(n.op, IterateOp) and n.input("pool").key in first for n in c.chain)), None)


def resolve_targets(router: Router, s: PlanState) -> dict[str, ConfigSpec | None]:
    """Each route's config (None: the ``none`` target); config errors name the route."""
    one = one_shot_config(s)
    labels: dict[str, list[ConfigSpec]] = {}
    for c in s.configs:
        labels.setdefault(c.label, []).append(c)
    out: dict[str, ConfigSpec | None] = {}
    for route, target in router.routes.items():
        key = f"router.routes.{route}"
        if target == NONE:
            out[route] = None
        elif target == ONE_SHOT:
            if one is None:
                raise ConfigError(key, "one_shot: the plan has no dense config of the raw query")
            out[route] = one
        elif target == ITERATIVE:
            twin = None if one is None else iterative_config(s, one)
            if twin is None:
                raise ConfigError(key, "iterative: the plan has no iterative config; enable "
                                       "one (iterative=decompose)")
            out[route] = twin
        elif len(labels.get(target, [])) == 1:
            out[route] = labels[target][0]
        else:
            known = ", ".join(sorted(labels)) or "(none)"
            why = "several configs have" if labels.get(target) else "no config has"
            raise ConfigError(key, f"unknown route target {target!r}: {why} that label; use "
                                   f"none, one_shot, iterative or one of: {known}")
    return out


def training_set(router: TrainedRouter, s: PlanState) -> tuple[list[Query], list[str]]:
    """The labelled held-out queries a classifier router is fitted on (never a query the
    run evaluates)."""
    split = router.train_split
    held = [q for q in s.held_out if split is None or q.split == split]
    if not held:
        where = (f"no held-out query is in split {split!r}" if split is not None else
                 "the run evaluates every loaded query")
        raise ConfigError("router.train_split" if split is not None else "router",
                          f"nothing to train the classifier on: {where}; evaluate a subset "
                          f"(subset.max_queries=N) or one split (subset.splits=FILE) so the "
                          f"other queries are the labelled training set")
    labels = [route_label(q, s.relevance_level) for q in held]
    counts = {c: labels.count(c) for c in LABELS}
    need = router.min_per_class
    short = {c: n for c, n in counts.items() if n < need}
    if short:
        raise ConfigError("router.min_per_class", f"the {len(held)} held-out training queries "
                          f"have too few of {short} (need {need} per class)")
    return held, labels


def expand(s: PlanState) -> PlanState:
    router: Router | None = s.comps.get("router")
    if router is None:
        return s
    targets = resolve_targets(router, s)
    distinct: dict[str, ConfigSpec] = {}
    for c in targets.values():
        if c is not None:
            distinct.setdefault(c.config_id, c)
    if len(distinct) > MAX_ROUTES:
        raise ConfigError("router.routes", f"at most {MAX_ROUTES} distinct route configs, "
                                           f"got {len(distinct)}")
    slot_of = {cid: _SLOTS[i] for i, cid in enumerate(distinct)}
    slots = tuple((route, None if c is None else slot_of[c.config_id])
                  for route, c in targets.items())
    inputs: dict[str, Node | None] = {"data": s.node("data")}
    if isinstance(router, TrainedRouter):
        held, labels = training_set(router, s)
        inputs["queries"] = s.node("embed_queries")
        inputs["model"] = Node.of(TrainRouterOp(router, s.comps.embedder,
                                                tuple(q.text for q in held), tuple(labels)),
                                  f"{router.name} router trained on {len(held)} held-out "
                                  f"queries")
    for cid, name in slot_of.items():
        inputs[name] = distinct[cid].leaf
    label = f"routed[{router.name}]"
    node = Node.of(RouteOp(router, slots), label, **inputs)
    out = list(s.configs)
    if any(c is None for c in targets.values()):
        none = Node.of(NoRetrievalOp(), NONE_LABEL, data=s.node("data"))
        out.append(lane(NONE_LABEL, ConfigKind.ROUTED, none, {"route": NONE}))
    out.append(lane(label, ConfigKind.ROUTED, node,
                    {"router": router.name, "routes": dict(router.routes)}))
    return s.with_configs(out)


def build(cfg: Any, device: str) -> dict[str, Any]:
    """The ``router`` group; a router that asks a model (``router=llm``) gets its generator
    from the ``router.generator`` block (any backend), built here before any work."""
    from bench.config.build import build as build_option
    from bench.config.build import target_of, to_container
    from bench.route.llm import LLMRouter

    node = dict(to_container(cfg.router))
    gen_node = node.pop("generator", None)
    cls = target_of(node, "router")
    if cls is None or not issubclass(cls, LLMRouter):
        if gen_node is not None:
            raise ConfigError("router.generator", "only router=llm asks a generator")
        return {"router": build_option(cfg.router, "router")}
    generator = None if gen_node is None else build_option(gen_node, "router.generator")
    if generator is None:
        raise ConfigError("router.generator", "router=llm needs a generator block "
                                              "(+generator@router.generator=transformers_cpu)")
    return {"router": build_option(node, "router", generator=generator)}
