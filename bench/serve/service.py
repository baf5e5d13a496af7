"""What ``bench.serve`` serves: one config's query-time chain, its embedder, its reranker and
its generator, built exactly as a run builds them.

``prepare_service(cfg)`` validates the config, builds the components, loads the dataset and
plans the run (``bench.pipeline.run.prepare``: every config error before any work), then picks
the served config (``serve.config``: a config id or unique label; null: the run's only config).
``Service.load()`` resolves the chain's index-time nodes through the executor — chunks,
document vectors, indexes, a reranker's passage index: loaded from the artifact cache, built
the way a run builds them when absent — and warms the chain up with one query, so the first
request pays no model load. Nothing here is specific to a stage: a request runs the ops'
``run_one`` chain (``bench.pipeline.request.QueryChain.serve``).

``Service.answer`` runs the config's WHOLE request on one chain (``QueryChain(whole_request=
True)``): retrieval, then the context op's and the generate op's own ``run_one`` — the path a
capacity study in process times — with the request's sampling and token stream given to a
per-request copy of the generate op.

Each call returns typed records with the server-side milliseconds of every latency stage
(``timings_ms``), which the HTTP layer puts in the body and the ``Server-Timing`` header.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from omegaconf import DictConfig

from bench.chunking.base import ChunkTable
from bench.context.base import Context, JudgedContextBuilder
from bench.data.base import Dataset, Query
from bench.embedding.base import Embedder
from bench.errors import ConfigError
from bench.generation.base import Generation, Generator, SamplingParams
from bench.generation.stage import ContextOp, Contexts, GenerateOp
from bench.pipeline.lanes import ConfigKind, ConfigSpec
from bench.pipeline.node import Node
from bench.pipeline.request import QueryChain
from bench.rerank.base import Reranker
from bench.rerank.stage import passages
from bench.retrieval.base import Pool

log = logging.getLogger("bench")


class BadRequest(ValueError):
    """The request cannot be served as sent (HTTP 400)."""


@dataclass(frozen=True)
class ServedHit:
    rank: int
    doc_id: str
    score: float
    #: row of the chunk table behind the hit (-1: the pool does not know it)
    chunk: int
    title: str
    text: str | None = None


@dataclass(frozen=True)
class Retrieved:
    query_id: str
    hits: tuple[ServedHit, ...]
    #: server-side milliseconds per latency stage of the chain
    timings_ms: dict[str, float]
    pool: Pool = field(repr=False, compare=False, default=None)  # type: ignore[assignment]


@dataclass(frozen=True)
class Embedded:
    vectors: np.ndarray  # float32 [n, dim]
    n_tokens: int
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class Reranked:
    scores: np.ndarray  # float32, one per document, in request order
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class Answered:
    retrieved: Retrieved
    context: Context
    generation: Generation
    #: server-side milliseconds per stage of the whole request (retrieval's, context,
    #: generate)
    timings_ms: dict[str, float]
    #: wall clock (ns since the epoch) when generation began
    generate_start_ns: int = 0


@dataclass(frozen=True)
class ServeSettings:
    config: str | None
    host: str
    port: int
    max_concurrency: int
    max_queue: int
    shutdown_timeout_s: float
    #: torch intra-op threads of the process (None: torch's default)
    torch_threads: int | None = None
    #: OTLP JSON span file (None: no spans) and whether spans carry query / answer text
    traces: str | None = None
    traces_content: bool = True


def serve_settings(cfg: DictConfig) -> ServeSettings:
    s = cfg.serve
    if int(s.max_concurrency) < 1:
        raise ConfigError("serve.max_concurrency", f"must be >= 1, got {s.max_concurrency}")
    if int(s.max_queue) < 0:
        raise ConfigError("serve.max_queue", f"must be >= 0, got {s.max_queue}")
    if not 0 <= int(s.port) <= 65535:
        raise ConfigError("serve.port", f"must be a TCP port (0-65535), got {s.port}")
    if float(s.shutdown_timeout_s) < 0:
        raise ConfigError("serve.shutdown_timeout_s", f"must be >= 0, got "
                                                      f"{s.shutdown_timeout_s}")
    threads = s.get("torch_threads")
    if threads is not None and int(threads) < 1:
        raise ConfigError("serve.torch_threads", f"must be >= 1 (or null), got {threads}")
    traces = s.get("traces")
    if traces is not None and not str(traces).strip():
        raise ConfigError("serve.traces", "must be a file path (or null for no spans)")
    return ServeSettings(None if s.config is None else str(s.config), str(s.host), int(s.port),
                         int(s.max_concurrency), int(s.max_queue), float(s.shutdown_timeout_s),
                         None if threads is None else int(threads),
                         None if traces is None else str(traces),
                         bool(s.get("traces_content", True)))


def choose_config(configs: Sequence[ConfigSpec], wanted: str | None) -> ConfigSpec:
    """The served config: by id, or by label or kind where it is unique."""
    listing = "; ".join(f"{c.config_id} {c.label}" for c in configs)
    if wanted is None:
        if len(configs) == 1:
            return configs[0]
        raise ConfigError("serve.config", f"this run has {len(configs)} configs: name one "
                                          f"(config=<config_id>): {listing}")
    hit = [c for c in configs if c.config_id == wanted]
    if not hit:
        hit = [c for c in configs if c.label == wanted]
        if len(hit) > 1:
            raise ConfigError("serve.config", f"label {wanted!r} names {len(hit)} configs; use "
                                              f"a config id: {listing}")
    if not hit:  # a kind its only config has (``config=generated``: the run's answers)
        hit = [c for c in configs if c.kind == wanted]
        if len(hit) > 1:
            raise ConfigError("serve.config", f"kind {wanted!r} names {len(hit)} configs; use "
                                              f"a config id: {listing}")
    if not hit:
        raise ConfigError("serve.config", f"no config {wanted!r} in this run; its configs: "
                                          f"{listing}")
    return hit[0]


class Service:
    """One config's chain over the run's corpus, plus its stage components."""

    def __init__(self, *, spec: ConfigSpec, chain: Callable[[], QueryChain], dataset: Dataset,
                 embedder: Embedder, reranker: Reranker | None,
                 generator: Generator | None, answer_nodes: tuple[Node, Node] | None,
                 executor: Any, device: str,
                 answer_chain: Callable[[], QueryChain] | None = None) -> None:
        self.spec = spec
        self.dataset = dataset
        self.embedder = embedder
        self.reranker = reranker
        self.generator = generator
        self.device = device
        self._make_chain = chain
        self._make_answer_chain = answer_chain
        self._answer_chain: QueryChain | None = None
        self._answer_nodes = answer_nodes
        self._executor = executor
        self._chain: QueryChain | None = None
        self._chunks: ChunkTable | None = None
        self._by_id = {q.query_id: q for q in dataset.queries}
        self.load_s: float | None = None

    # -- start-up ---------------------------------------------------------------------------
    def load(self) -> None:
        """Index-time artifacts from the cache (built when absent), then one warm-up query."""
        t0 = time.perf_counter()
        self._chain = self._make_chain()
        self._chunks = self._executor.value(self._chunk_node())
        if self.dataset.queries:
            self._chain.serve(self.dataset.queries[0])
        if self._make_answer_chain is not None:
            self._answer_chain = self._make_answer_chain()
            if self.generator is not None:
                self.generator.count_tokens("warm-up")  # tokenizer load: no request's cost
        self.load_s = time.perf_counter() - t0

    def _chunk_node(self) -> Node:
        node = next((n for n in self.spec.chain if n.stage == "chunk"), None)
        if node is None:
            raise ConfigError("serve.config", f"config {self.spec.label} has no chunk stage")
        return node

    @property
    def loaded(self) -> bool:
        return self._chain is not None

    @property
    def can_answer(self) -> bool:
        return self._answer_nodes is not None

    # -- requests ---------------------------------------------------------------------------
    def query(self, *, text: str | None, query_id: str | None, roles: Sequence[str] | None,
              tenant: str | None, request_id: str) -> Query:
        """The request as a ``Query``: a dataset query named by id keeps its caller (roles,
        tenant) unless the request gives them; any other text is a new query."""
        known = self._by_id.get(query_id) if query_id is not None else None
        if known is not None:
            return replace(known, text=known.text if text is None else text,
                           allowed_roles=known.allowed_roles if roles is None else tuple(roles),
                           tenant=known.tenant if tenant is None else tenant)
        if text is None:
            raise BadRequest(f"query_id {query_id!r} is not a query of the served dataset; "
                             "send its text as `query`" if query_id is not None
                             else "`query` (the query text) is required")
        return Query(query_id or request_id, text, allowed_roles=tuple(roles or ()),
                     tenant=tenant or "")

    def retrieve(self, query: Query, *, k: int | None = None,
                 include_text: bool = False) -> Retrieved:
        assert self._chain is not None and self._chunks is not None, "Service.load() first"
        ms, value = self._chain.serve(query)
        return self._retrieved(query, value, ms, k=k, include_text=include_text)

    def _retrieved(self, query: Query, value: Any, ms: Mapping[str, float], *, k: int | None,
                   include_text: bool) -> Retrieved:
        assert self._chunks is not None, "Service.load() first"
        pool = value if isinstance(value, Pool) else None
        if pool is None:
            raise RuntimeError(f"config {self.spec.label}: the chain's last query-time value "
                               f"is {type(value).__name__}, not a candidate pool")
        docs, scores = pool.hits.for_query(0)
        chunks = pool.hits.chunks()[: len(docs)]
        n = len(docs) if k is None else min(k, len(docs))
        texts = (passages(pool.hits, self._chunks, self.dataset, 0, n) if include_text
                 else [None] * n)
        hits = tuple(ServedHit(i + 1, self.dataset.documents[int(d)].doc_id, float(s), int(c),
                               self.dataset.documents[int(d)].title, t)
                     for i, (d, s, c, t) in enumerate(zip(docs[:n], scores[:n], chunks[:n],
                                                          texts, strict=True)))
        return Retrieved(query.query_id, hits, dict(ms), pool)

    def embed(self, texts: Sequence[str], *, kind: str) -> Embedded:
        out = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        t0 = time.perf_counter()
        stats = self.embedder.encode(list(texts), kind=kind, out=out)
        return Embedded(out, int(stats.n_tokens), {"embed": (time.perf_counter() - t0) * 1e3})

    def rerank(self, query: str, documents: Sequence[str]) -> Reranked:
        if self.reranker is None:
            raise LookupError("the served run has no reranker (reranker=none)")
        t0 = time.perf_counter()
        scores = self.reranker.score([query], [list(documents)])[0] if documents else (
            np.zeros(0, dtype=np.float32))
        return Reranked(np.asarray(scores, dtype=np.float32),
                        {"rerank": (time.perf_counter() - t0) * 1e3})

    def answer(self, query: Query, sampling: SamplingParams, *, request_id: str,
               k: int | None = None, include_text: bool = False,
               on_retrieved: Callable[[Retrieved], None] | None = None,
               on_text: Callable[[str], None] | None = None) -> Answered:
        """The whole request on the config's chain: retrieval, its context, its answer under
        ``sampling`` (``on_text`` receives the answer as it is decoded). ``on_retrieved``
        gets the hits (and the retrieval's milliseconds) before the context is built.
        ``generate_start_ns`` of the result: when generation began (wall clock)."""
        assert self._answer_chain is not None and self._answer_nodes is not None, \
            "Service.load() first (and a generated config)"
        ctx_node, gen_node = self._answer_nodes
        gop = gen_node.op
        assert isinstance(gop, GenerateOp)
        seen: dict[str, Any] = {}

        def on_value(node: Node, value: Any, ms: Mapping[str, float]) -> None:
            if node.key == self.spec.pool_node.key:
                seen["retrieved"] = self._retrieved(query, value, ms, k=k,
                                                    include_text=include_text)
                if on_retrieved is not None:
                    on_retrieved(seen["retrieved"])
            elif node.key == ctx_node.key:
                seen["contexts"] = value
                seen["generate_start_ns"] = time.time_ns()

        ms, gens = self._answer_chain.serve(
            query, ops={gen_node.key: replace(gop, sampling=sampling, on_text=on_text,
                                              request_id=request_id)},
            on_value=on_value)
        contexts: Contexts = seen["contexts"]
        if len(gens) != 1 or len(contexts.contexts) != 1:
            raise RuntimeError(f"config {self.spec.label}: {len(contexts.contexts)} contexts "
                               f"and {len(gens)} answers for one request")
        return Answered(seen["retrieved"], contexts.contexts[0], gens[0], dict(ms),
                        int(seen["generate_start_ns"]))

    def sampling(self, *, max_tokens: int | None, temperature: float | None,
                 top_p: float | None, seed: int | None) -> SamplingParams:
        """The served config's answer sampling (defaults without one), with what the request
        overrides."""
        op = None if self._answer_nodes is None else self._answer_nodes[1].op
        base = op.sampling if isinstance(op, GenerateOp) else SamplingParams()
        return SamplingParams(max_tokens=base.max_tokens if max_tokens is None else max_tokens,
                              temperature=base.temperature if temperature is None
                              else temperature,
                              top_p=base.top_p if top_p is None else top_p,
                              seed=base.seed if seed is None else seed)

    def close(self) -> None:
        if self.generator is not None:
            self.generator.close()


def prepare_service(cfg: DictConfig) -> tuple[Service, ServeSettings]:
    """Validate and plan like a run (config errors here, before any work), pick the config."""
    from bench.pipeline.run import prepare

    settings = serve_settings(cfg)
    p = prepare(cfg)
    spec = choose_config(p.plan.configs, settings.config)
    answer_nodes: tuple[Node, Node] | None = None
    if spec.kind is ConfigKind.GENERATED and spec.answers is not None:
        ctx = spec.answers.input("contexts")
        op = ctx.op
        if isinstance(op, ContextOp) and isinstance(op.builder, JudgedContextBuilder):
            raise ConfigError("context", "this context option places passages by the "
                                         "judgments; a served request has none: serve a config "
                                         "with a retrieval context (context=budgeted)")
        answer_nodes = (ctx, spec.answers)
    pool_chain = spec.pool_node.ancestors()

    def chain() -> QueryChain:
        return QueryChain(pool_chain, p.executor, p.dataset, p.device)

    def answer_chain() -> QueryChain:
        assert spec.answers is not None
        return QueryChain(spec.answers.ancestors(), p.executor, p.dataset, p.device,
                          whole_request=True)

    log.info("serve: config %s %s (%s), chain %s", spec.config_id, spec.label, spec.kind,
             " > ".join(n.stage for n in pool_chain))
    return Service(spec=spec, chain=chain, dataset=p.dataset, embedder=p.comps.embedder,
                   reranker=p.comps.reranker,
                   generator=p.comps.generator,
                   answer_nodes=answer_nodes, executor=p.executor, device=p.device,
                   answer_chain=None if answer_nodes is None else answer_chain), settings
