"""Cached stage nodes. Each function resolves one node through the artifact store.

A node's key = hash(stage name, STAGE_VERSIONS[stage], its own semantic params, upstream
keys); the dataset fingerprint enters through the first node. Bump a stage's version when its
code changes what it produces, so stale artifacts are never reused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.cache.store import ArtifactStore
from bench.chunking.base import Chunker, ChunkTable
from bench.config.build import OptionError
from bench.data.base import Dataset
from bench.embedding.base import Embedder, EmbeddingStats
from bench.errors import ConfigError
from bench.index.base import BuildInfo, BuiltIndex, SearchResult, VectorIndex
from bench.lexical.base import LexicalIndex
from bench.retrieval.base import Hits, Retriever, fold_chunks
from bench.telemetry.base import StageTiming, TimingLog

STAGE_VERSIONS = {
    "chunk": "1",
    "embed_docs": "1",
    "embed_queries": "1",
    "index": "1",
    "retrieve": "2",
    "exact_topk": "1",
    "lexical_index": "1",
    "lexical": "1",
    "chunk_stats": "1",
}

#: chunk-level columns kept per query for ANN recall (recall@k needs k <= this)
ANN_COLUMNS = 100

_SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string()),
        pa.field("sample_kind", pa.string()),
        pa.field("n_items", pa.int64()),
        pa.field("wall_ms", pa.float64()),
        pa.field("device", pa.string()),
    ]
)


def save_timings(samples: list[StageTiming], path: Path) -> None:
    cols = {f.name: [getattr(s, f.name) for s in samples] for f in _SAMPLE_SCHEMA}
    pq.write_table(pa.table(cols, schema=_SAMPLE_SCHEMA), path)


def load_timings(path: Path, *, from_cache: bool) -> list[StageTiming]:
    rows = pq.read_table(path, schema=_SAMPLE_SCHEMA).to_pylist()
    return [StageTiming(**r, from_cache=from_cache) for r in rows]


@dataclass(frozen=True)
class Node:
    """What a resolved node hands downstream: its key, hit flag and timing samples."""

    key: str
    hit: bool
    timings: tuple[StageTiming, ...]


def chunk_node(
    store: ArtifactStore, dataset: Dataset, chunker: Chunker, embedder: Embedder, device: str
) -> tuple[ChunkTable, Node]:
    # Always keyed on the tokenizer: every chunker reports n_tokens in the embedder's tokens.
    params: dict[str, object] = {
        "chunker": chunker.cache_params(),
        "kind": type(chunker).__name__,
        "tokenizer": embedder.tokenizer.name,
    }

    def compute(tmp: Path) -> None:
        log = TimingLog("chunk", device="cpu")
        with log.measure("total", len(dataset.documents)):
            table = chunker.chunk(dataset.documents, tokenizer=embedder.tokenizer)
        table.save(tmp / "chunks.parquet")
        save_timings(log.samples, tmp / "timings.parquet")

    (table, timings), key, hit = store.resolve(
        "chunk",
        version=STAGE_VERSIONS["chunk"],
        params=params,
        upstream=[dataset.fingerprint],
        compute=compute,
        load=lambda d: (
            ChunkTable.load(d / "chunks.parquet"),
            load_timings(d / "timings.parquet", from_cache=True),
        ),
    )
    return table, Node(key, hit, tuple(_mark(timings, hit)))


def _mark(timings: list[StageTiming], hit: bool) -> list[StageTiming]:
    """Samples loaded right after computing are this run's own measurements."""
    if hit:
        return timings
    return [StageTiming(t.stage, t.sample_kind, t.n_items, t.wall_ms, t.device, False)
            for t in timings]


def embed_node(
    store: ArtifactStore,
    stage: str,
    texts: tuple[str, ...] | list[str],
    kind: str,
    embedder: Embedder,
    upstream: str,
    device: str,
) -> tuple[np.ndarray, EmbeddingStats, Node]:
    """Embed ``texts`` into a memory-mapped .npy artifact (vectors never all in RAM at once)."""

    def compute(tmp: Path) -> None:
        out = np.lib.format.open_memmap(
            tmp / "vectors.npy", mode="w+", dtype=np.float32, shape=(len(texts), embedder.dim)
        )
        log = TimingLog(stage, device=device)
        with log.measure("total", len(texts), sync_cuda=device == "cuda"):
            stats = embedder.encode(texts, kind=kind, out=out)
        out.flush()
        del out
        (tmp / "stats.json").write_text(json.dumps(stats.__dict__))
        save_timings(log.samples, tmp / "timings.parquet")

    def load(d: Path) -> tuple[np.ndarray, EmbeddingStats, list[StageTiming]]:
        vecs = np.load(d / "vectors.npy", mmap_mode="r")
        stats = EmbeddingStats(**json.loads((d / "stats.json").read_text()))
        return vecs, stats, load_timings(d / "timings.parquet", from_cache=True)

    (vecs, stats, timings), key, hit = store.resolve(
        stage,
        version=STAGE_VERSIONS[stage],
        params={"embedder": embedder.cache_params(), "kind": kind},
        upstream=[upstream],
        compute=compute,
        load=load,
    )
    return vecs, stats, Node(key, hit, tuple(_mark(timings, hit)))


def index_node(
    store: ArtifactStore, index: VectorIndex, vectors: np.ndarray, upstream: str, device: str
) -> tuple[BuiltIndex, BuildInfo, Node]:
    def compute(tmp: Path) -> None:
        try:
            built, info = index.build(np.asarray(vectors))
        except OptionError as exc:  # a build option that only fails against real vectors
            raise ConfigError(f"index.{exc.option}", exc.message) from None
        built.save(tmp)
        (tmp / "build.json").write_text(json.dumps(info.__dict__))
        save_timings(
            [StageTiming("index", "total", info.n_vectors, info.build_s * 1000.0, device)],
            tmp / "timings.parquet",
        )

    def load(d: Path) -> tuple[BuiltIndex, BuildInfo, list[StageTiming]]:
        info = BuildInfo(**json.loads((d / "build.json").read_text()))
        return index.load(d), info, load_timings(d / "timings.parquet", from_cache=True)

    (built, info, timings), key, hit = store.resolve(
        "index",
        version=STAGE_VERSIONS["index"],
        params={"index": index.cache_params(n_vectors=len(vectors)),
                "kind": type(index).__name__},
        upstream=[upstream],
        compute=compute,
        load=load,
    )
    return built, info, Node(key, hit, tuple(_mark(timings, hit)))


def retrieve_node(
    store: ArtifactStore,
    retriever: Retriever,
    built: BuiltIndex,
    query_params: dict[str, int | float],
    query_vectors: np.ndarray,
    chunks: ChunkTable,
    id_key: np.ndarray,
    upstream: list[str],
    device: str,
) -> tuple[Hits, SearchResult, Node]:
    """Dense search of every query; keeps the chunk-level top columns for ANN recall."""
    n_q = len(query_vectors)

    def compute(tmp: Path) -> None:
        log = TimingLog("retrieve", device=device)
        result = retriever.search(
            built,
            np.asarray(query_vectors),
            query_params,
            n_chunks=len(chunks),
            timing=log,
            sync_cuda=device == "cuda",
        )
        hits = retriever.fold(result, chunks.doc_idx, id_key)
        hits.save(tmp / "hits.parquet")
        cols = min(ANN_COLUMNS, result.ids.shape[1])
        save_search(SearchResult(result.ids[:, :cols], result.scores[:, :cols]), tmp, "chunks")
        save_timings(log.samples, tmp / "timings.parquet")

    (hits, chunk_res, timings), key, hit = store.resolve(
        "retrieve",
        version=STAGE_VERSIONS["retrieve"],
        params={"retriever": retriever.cache_params(), "query_params": query_params},
        upstream=upstream,
        compute=compute,
        load=lambda d: (
            Hits.load(d / "hits.parquet", n_q),
            load_search(d, "chunks"),
            load_timings(d / "timings.parquet", from_cache=True),
        ),
    )
    return hits, chunk_res, Node(key, hit, tuple(_mark(timings, hit)))


def save_search(result: SearchResult, directory: Path, prefix: str) -> None:
    np.save(directory / f"{prefix}_ids.npy", result.ids, allow_pickle=False)
    np.save(directory / f"{prefix}_scores.npy", result.scores, allow_pickle=False)


def load_search(directory: Path, prefix: str) -> SearchResult:
    return SearchResult(
        ids=np.load(directory / f"{prefix}_ids.npy", allow_pickle=False),
        scores=np.load(directory / f"{prefix}_scores.npy", allow_pickle=False),
    )


def exact_node(
    store: ArtifactStore, doc_vectors: np.ndarray, query_vectors: np.ndarray, k: int,
    upstream: list[str], device: str,
) -> tuple[SearchResult, Node]:
    """Exact chunk-level top-k for every query: the reference of ANN recall, computed once
    per dataset x embedder (any ANN config reuses it)."""
    from bench.index.exact import exact_topk

    def compute(tmp: Path) -> None:
        log = TimingLog("exact_topk", device=device)
        with log.measure("total", len(query_vectors)):
            res = exact_topk(np.asarray(doc_vectors), np.asarray(query_vectors), k)
        save_search(res, tmp, "exact")
        save_timings(log.samples, tmp / "timings.parquet")

    (res, timings), key, hit = store.resolve(
        "exact_topk", version=STAGE_VERSIONS["exact_topk"], params={"k": k},
        upstream=upstream, compute=compute,
        load=lambda d: (load_search(d, "exact"),
                        load_timings(d / "timings.parquet", from_cache=True)),
    )
    return res, Node(key, hit, tuple(_mark(timings, hit)))


def lexical_nodes(
    store: ArtifactStore, lexical: LexicalIndex, chunks: ChunkTable, chunk_key: str,
    queries: list[str], id_key: np.ndarray, query_upstream: str,
) -> tuple[Hits, Node, Node]:
    """Build (or load) the lexical index over chunk texts, then search every query."""

    def build(tmp: Path) -> None:
        log = TimingLog("lexical_index", device="cpu")
        with log.measure("total", len(chunks)):
            built = lexical.build(chunks.text)
        built.save(tmp)
        save_timings(log.samples, tmp / "timings.parquet")

    (built, b_timings), b_key, b_hit = store.resolve(
        "lexical_index", version=STAGE_VERSIONS["lexical_index"],
        params={"lexical": lexical.cache_params(), "kind": type(lexical).__name__},
        upstream=[chunk_key], compute=build,
        load=lambda d: (lexical.load(d), load_timings(d / "timings.parquet", from_cache=True)),
    )
    depth = lexical.depth(len(chunks))

    def search(tmp: Path) -> None:
        log = TimingLog("lexical", device="cpu")
        with log.measure("batch", len(queries)):
            res = built.search(queries, depth)
        for q in queries:  # single-query latency, as for dense retrieval
            with log.measure("query", 1):
                built.search([q], depth)
        hits = fold_chunks(res, chunks.doc_idx, id_key, k=lexical.k)
        hits.save(tmp / "hits.parquet")
        save_timings(log.samples, tmp / "timings.parquet")

    (hits, s_timings), s_key, s_hit = store.resolve(
        "lexical", version=STAGE_VERSIONS["lexical"], params={"depth": depth, "k": lexical.k},
        upstream=[b_key, query_upstream], compute=search,
        load=lambda d: (Hits.load(d / "hits.parquet", len(queries)),
                        load_timings(d / "timings.parquet", from_cache=True)),
    )
    return (hits, Node(b_key, b_hit, tuple(_mark(b_timings, b_hit))),
            Node(s_key, s_hit, tuple(_mark(s_timings, s_hit))))


def chunk_stats_node(
    store: ArtifactStore, dataset: Dataset, chunks: ChunkTable, chunk_key: str
) -> tuple[dict[str, object], Node]:
    """Chunk counts, token stats, traceability and MinHash near-duplicates, once per chunking."""
    from bench.chunking.stats import chunk_stats, near_duplicates

    def compute(tmp: Path) -> None:
        log = TimingLog("chunk_stats", device="cpu")
        with log.measure("total", len(chunks)):
            stats = chunk_stats(chunks, dataset.documents)
            dups = near_duplicates(chunks)
        examples = [
            {**p.__dict__, "text_a": chunks.text[p.chunk_a][:160],
             "text_b": chunks.text[p.chunk_b][:160]}
            for p in dups.examples
        ]
        payload = {"stats": stats.__dict__,
                   "near_duplicates": {**dups.__dict__, "examples": examples}}
        (tmp / "chunk_stats.json").write_text(json.dumps(payload, indent=2, default=str))
        save_timings(log.samples, tmp / "timings.parquet")

    (payload, timings), key, hit = store.resolve(
        "chunk_stats", version=STAGE_VERSIONS["chunk_stats"], params={}, upstream=[chunk_key],
        compute=compute,
        load=lambda d: (json.loads((d / "chunk_stats.json").read_text()),
                        load_timings(d / "timings.parquet", from_cache=True)),
    )
    return payload, Node(key, hit, tuple(_mark(timings, hit)))
