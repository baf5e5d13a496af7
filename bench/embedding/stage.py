"""Plan operation of the `embedding` stage: texts -> a memory-mapped .npy of vectors."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.cache.space import require_free
from bench.chunking.base import ChunkTable
from bench.data.base import Dataset
from bench.embedding.base import (
    Embedder,
    EmbeddingStats,
    PartialEncoder,
    QueryEncoder,
    TokenStateEmbedder,
)
from bench.embedding.engine import ConfigRecipe, EmbeddingEngine, LocalEngine
from bench.embedding.shared import SharedIndexOp, SharedPass, SharedPassOp, shares_pass
from bench.errors import ConfigError
from bench.http.client import REQUESTS_FILE, RecordsRequests, save_records
from bench.pipeline.lanes import PlanState
from bench.pipeline.node import (
    UNKEYED,
    Node,
    OneQuery,
    OpTraits,
    Phase,
    QueryTimer,
    mark_incomplete,
    read_incomplete,
)
from bench.rerank.base import TokenIndexReranker
from bench.telemetry.base import TimingLog

if TYPE_CHECKING:
    from omegaconf import DictConfig

log = logging.getLogger("bench")

#: the latency stage of encoding one query (a serving system does it per request)
EMBED_QUERY_STAGE = "embed_query"


@dataclass(frozen=True)
class Embeddings:
    vectors: np.ndarray  # float32 [n, dim], memory-mapped
    stats: EmbeddingStats  # throughput of the pass that computed them
    #: the dataset's queries without a vector (their rows are zero), by query id: the status
    #: of the request that failed (``failed`` / ``timeout`` / ``invalid``); empty: all there
    incomplete: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EmbedInputs:
    """The texts to encode: a ChunkTable (documents) or a Dataset (its queries); for the
    documents, the pass shared with a token index when the plan has one (its pooled vectors
    are this op's, bit for bit: not part of the key)."""

    source: ChunkTable | Dataset
    shared: SharedPass | None = field(default=None, metadata=UNKEYED)


@dataclass(frozen=True)
class EmbedOp(OpTraits):
    """Chunks (``kind="document"``: index time) or the dataset's queries (``kind="query"``:
    per query at serving time) -> vectors, streamed into a memmap so they are never all in
    RAM at once."""

    embedder: Embedder
    kind: str  # document | query
    device: str
    version: str = "1"
    #: where the document pass runs (``conf/embedding``): the same vectors bit for bit, so
    #: not part of the key (bench.embedding.engine); queries are always encoded here
    engine: EmbeddingEngine = field(default_factory=LocalEngine)
    Inputs: ClassVar[type] = EmbedInputs
    latency_stages: ClassVar[tuple[str, ...]] = (EMBED_QUERY_STAGE,)
    work_stages: ClassVar[tuple[str, ...]] = (EMBED_QUERY_STAGE,)

    @property
    def stage(self) -> str:
        return "embed_docs" if self.kind == "document" else "embed_queries"

    @property
    def phase(self) -> Phase:
        return Phase.INDEX if self.kind == "document" else Phase.QUERY

    def params(self) -> Mapping[str, Any]:
        return {"embedder": self.embedder.cache_params(), "kind": self.kind}

    @staticmethod
    def texts(source: ChunkTable | Dataset) -> Sequence[str]:
        if isinstance(source, ChunkTable):
            return source.text
        return [q.text for q in source.queries]

    def write(self, inputs: EmbedInputs, directory: Path, timing: TimingLog) -> None:
        texts = self.texts(inputs.source)
        # a memmap write to a full disk is a SIGBUS, not an exception: ask first
        require_free(directory, len(texts) * self.embedder.dim * 4,
                     f"{self.stage} ({len(texts):,} x {self.embedder.dim} float32 vectors)")
        out = np.lib.format.open_memmap(directory / "vectors.npy", mode="w+", dtype=np.float32,
                                        shape=(len(texts), self.embedder.dim))
        if inputs.shared is not None:  # encoded by the shared pass (its timing is there)
            out[:] = inputs.shared.vectors
            stats = inputs.shared.stats
        elif self.kind == "query" and isinstance(self.embedder, PartialEncoder):
            # a query whose request failed gets its status; the other queries go on
            assert isinstance(inputs.source, Dataset)
            with timing.measure("total", len(texts), sync_cuda=self.device == "cuda"):
                stats, failed = self.embedder.encode_partial(texts, kind=self.kind, out=out)
            if failed:
                qs = inputs.source.queries
                mark_incomplete(directory, {qs[i].query_id: st for i, st in failed.items()},
                                f"{len(failed)} of {len(qs)} query embeddings failed")
        elif self.kind == "document":
            with timing.measure("total", len(texts), sync_cuda=self.device == "cuda"):
                stats = self.engine.encode_documents(self.embedder, texts, out=out)
        else:
            with timing.measure("total", len(texts), sync_cuda=self.device == "cuda"):
                stats = self.embedder.encode(texts, kind=self.kind, out=out)
        if isinstance(self.embedder, RecordsRequests):  # a remote embedder's requests
            save_records(self.embedder.take_records(), directory / REQUESTS_FILE)
        out.flush()
        del out
        (directory / "stats.json").write_text(json.dumps(stats.__dict__))

    def load(self, directory: Path, inputs: EmbedInputs) -> Embeddings:
        return Embeddings(np.load(directory / "vectors.npy", mmap_mode="r"),
                          EmbeddingStats(**json.loads((directory / "stats.json").read_text())),
                          read_incomplete(directory))

    def run_one(self, inputs: EmbedInputs, query: OneQuery, timer: QueryTimer) -> Embeddings:
        """The query's vector [1, dim] as a server encodes it per request."""
        with timer.measure(EMBED_QUERY_STAGE):
            vec = encode_one_query(self.embedder, query.text)
        return Embeddings(vec, EmbeddingStats(1, 0, 0.0, 0))


def encode_one_query(embedder: Embedder, text: str) -> np.ndarray:
    """One query's vector [1, dim] as a server computes it per request: the embedder's own
    per-request path where it has one (no batching statistics around it), else a batch of 1."""
    if isinstance(embedder, QueryEncoder):
        return np.asarray(embedder.encode_query(text), dtype=np.float32)
    out = np.zeros((1, embedder.dim), dtype=np.float32)
    embedder.encode([text], kind="query", out=out)
    return out


#: single-query encodes timed per run: every query up to this many, else a seeded sample
QUERY_LATENCY_MAX = 1000


@dataclass(frozen=True)
class QueryLatencyInputs:
    data: Dataset


@dataclass(frozen=True)
class QueryLatencyOp(OpTraits):
    """The query encoder as a server runs it: one query at a time, each timed with its
    ``query_id`` (stage ``embed_query``). The batch pass (``EmbedOp``) gives the vectors;
    this gives the per-query cost a config's end-to-end latency adds for its dense lane.
    The vectors are thrown away. One untimed encode first (model load, first-call setup)."""

    embedder: Embedder
    device: str
    max_queries: int = QUERY_LATENCY_MAX
    seed: int = 0
    stage: str = EMBED_QUERY_STAGE
    version: str = "1"
    #: a measurement of the per-query encoder (its samples count end to end), no serving work
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = QueryLatencyInputs

    def params(self) -> Mapping[str, Any]:
        return {"embedder": self.embedder.cache_params(), "max_queries": self.max_queries,
                "seed": self.seed}

    def write(self, inputs: QueryLatencyInputs, directory: Path, timing: TimingLog) -> None:
        dataset = inputs.data
        queries = dataset.queries
        picked = list(range(len(queries)))
        if len(queries) > self.max_queries:
            rng = np.random.default_rng(self.seed)
            picked = [int(i) for i in np.sort(rng.choice(len(queries), size=self.max_queries,
                                                           replace=False))]
        def encode(text: str) -> None:
            encode_one_query(self.embedder, text)

        if len(picked):
            encode(queries[int(picked[0])].text)
        for i in picked:
            q = queries[int(i)]
            with timing.measure("query", 1, sync_cuda=self.device == "cuda",
                                query_id=q.query_id):
                encode(q.text)
        (directory / "sample.txt").write_text("\n".join(queries[int(i)].query_id
                                                        for i in picked))

    def load(self, directory: Path, inputs: QueryLatencyInputs) -> None:
        return None


def build(cfg: DictConfig, device: str) -> dict[str, Any]:
    """The embedder (on ``device``) and the engine of its corpus pass (``conf/embedding``;
    a config without the group: in this process). An engine that cannot run this embedder's
    pass is a config error here, before any work."""
    from bench.config.build import build as build_option
    from bench.config.build import to_container

    embedder = build_option(cfg.embedder, "embedder", device=device)
    if embedder is None:
        raise ConfigError("embedder", "this stage is required; `_target_` must not be null")
    engine: EmbeddingEngine = LocalEngine()
    if cfg.get("embedding") is not None:
        recipe = ConfigRecipe(json.dumps(to_container(cfg.embedder)), device)
        built = build_option(cfg.embedding, "embedding", embedder=recipe)
        if built is None:
            raise ConfigError("embedding", "this stage is required; `_target_` must not be null")
        engine = built
        engine.check(embedder)
    return {"embedder": embedder, "embedding": engine}


def expand(s: PlanState) -> PlanState:
    """Document vectors (index time), query vectors (per query) and the per-query encoder's
    latency measurement, for the run's one embedder. When the run's reranker keeps a token
    index of the same encoder, one pass fills both (``bench.embedding.shared``): decided
    here, before the index and retrieval stages read ``embed_docs``."""
    emb, device = s.comps.embedder, s.device
    engine = s.comps.parts.get("embedding") or LocalEngine()
    name = type(emb).__name__
    data = s.node("data")
    shared = token_index = None
    reranker = s.comps.reranker
    if shares_pass(emb, reranker):
        assert isinstance(emb, TokenStateEmbedder) and isinstance(reranker, TokenIndexReranker)
        shared = Node.of(SharedPassOp(emb, reranker, device),
                         f"{name} documents and {type(reranker).__name__} token index, one pass",
                         chunks=s.node("chunk"))
        if not isinstance(engine, LocalEngine):  # said, not silent: one pass does both
            log.warning("embedding=%s: the documents are encoded in this process by the pass "
                        "shared with the %s index", engine.label, type(reranker).__name__)
        token_index = Node.of(SharedIndexOp(reranker),
                              f"{reranker.name} passage index (shared pass)",
                              chunks=s.node("chunk"), shared=shared)
    return s.with_nodes(
        passage_index=token_index,
        embed_docs=Node.of(EmbedOp(emb, "document", device, engine=engine), f"{name} documents",
                           source=s.node("chunk"), shared=shared),
        embed_queries=Node.of(EmbedOp(emb, "query", device), f"{name} queries", source=data),
        query_latency=Node.of(QueryLatencyOp(emb, device), f"{name} single-query latency",
                              data=data))
