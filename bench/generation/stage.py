"""Plan operations of the `generate` stage: pool -> context -> answers (cached).

- ``ContextOp`` (in memory): a pool's first passages of each subset query, fitted to the
  context builder's token budget in the GENERATOR's tokenizer. Cheap and deterministic, so it
  is recomputed each run; its key (builder options, tokenizer identity, subset) still names it,
  and the answers downstream are keyed by it.
- ``GenerateOp`` (cached): one answer per context, keyed by (context node, generator identity,
  sampling, seed). Every ``Generation`` field is stored in Parquet (inter-token latencies as a
  list column), so a judge sweep on a later run loads the answers and never regenerates them.
  Each answer's end-to-end latency is a per-query timing sample (stage ``generate``, query id).

The query subset (``generation.max_queries``) is drawn by :func:`query_subset`: seeded, round
robin over categories, so a small subset still holds every category (must-abstain included).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.chunking.base import ChunkTable
from bench.context.base import Context, ContextBuilder, ranked_passages
from bench.data.base import Dataset
from bench.errors import ConfigError
from bench.generation.base import (
    Generation,
    GenerationRequest,
    Generator,
    SamplingParams,
)
from bench.pipeline.node import Node
from bench.rerank.stage import passages
from bench.retrieval.base import Pool
from bench.telemetry.base import TimingLog

GENERATIONS_FILE = "generations.parquet"


def check_generation_config(g: Any) -> None:
    """``generation.*`` values (the schema checks types)."""
    if g.max_queries is not None and g.max_queries < 1:
        raise ConfigError("generation.max_queries", f"must be >= 1 or null, got {g.max_queries}")
    if g.max_tokens < 1:
        raise ConfigError("generation.max_tokens", f"must be >= 1, got {g.max_tokens}")
    if g.temperature < 0:
        raise ConfigError("generation.temperature", f"must be >= 0, got {g.temperature}")
    if not 0 < g.top_p <= 1:
        raise ConfigError("generation.top_p", f"must be in (0, 1], got {g.top_p}")
    if g.memo and g.temperature > 0:
        raise ConfigError("generation.memo", "memoises greedy answers only: needs "
                          f"generation.temperature=0, got {g.temperature}")
    kinds = ("dense", "lexical", "fused", "reranked")
    bad = [k for k in g.kinds if k not in kinds]
    if bad:
        raise ConfigError("generation.kinds", f"unknown kinds {bad}; choose from {kinds}")


def query_subset(dataset: Dataset, max_queries: int | None, seed: int, *,
                 answerable_only: bool = False) -> tuple[str, ...]:
    """Query ids to answer, in dataset order: all of them, or ``max_queries`` drawn seeded and
    round robin over the categories (sorted by name), so each category is represented.
    ``answerable_only``: draw from the queries that are not must-abstain."""
    pool = [q for q in dataset.queries if not (answerable_only and q.must_abstain)]
    ids = [q.query_id for q in pool]
    if max_queries is None or max_queries >= len(ids):
        return tuple(ids)
    by_cat: dict[str, list[str]] = {}
    for q in pool:
        by_cat.setdefault(q.category, []).append(q.query_id)
    rng = random.Random(seed)
    for cat in sorted(by_cat):
        rng.shuffle(by_cat[cat])
    chosen: set[str] = set()
    while len(chosen) < max_queries:
        for cat in sorted(by_cat):
            if by_cat[cat] and len(chosen) < max_queries:
                chosen.add(by_cat[cat].pop())
    return tuple(i for i in ids if i in chosen)


def generator_name(generator: Generator) -> str:
    """Short model name for labels (``smollm2-135m-instruct``)."""
    params = generator.cache_params()
    model = str(params.get("model") or params.get("backend") or type(generator).__name__)
    name = model.rstrip("/").rsplit("/", 1)[-1].lower()
    for suffix in (".gguf",):
        name = name.removesuffix(suffix)
    return name.split(".", 1)[0]


@dataclass(frozen=True)
class Contexts:
    """The contexts of the answered queries, in dataset order."""

    contexts: tuple[Context, ...]

    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(c.query_id for c in self.contexts)


@dataclass(frozen=True)
class ContextOp:
    builder: ContextBuilder
    generator: Generator
    subset: tuple[str, ...]
    stage: str = "context"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {"builder": self.builder.cache_params(),
                "tokenizer": self.generator.cache_params(), "queries": list(self.subset)}

    def run(self, inputs: Sequence[Any], timing: TimingLog) -> Contexts:
        pool, chunks, dataset = inputs
        return Contexts(tuple(build_contexts(self.builder, self.generator, pool, chunks,
                                             dataset, self.subset, timing)))


def build_contexts(builder: ContextBuilder, tokens: Generator, pool: Pool, chunks: ChunkTable,
                   dataset: Dataset, subset: Sequence[str], timing: TimingLog) -> list[Context]:
    hits = pool.hits
    wanted = set(subset)
    items = []
    depth = int(getattr(builder, "top_k", 0)) or int(np.diff(hits.offsets).max(initial=0))
    for q, query in enumerate(dataset.queries):
        if query.query_id not in wanted:
            continue
        s = int(hits.offsets[q])
        e = min(int(hits.offsets[q + 1]), s + depth)
        texts = passages(hits, chunks, dataset, q, depth)
        items.append(ranked_passages(
            query.query_id, query.text, [dataset.doc_ids[int(d)] for d in hits.doc_idx[s:e]],
            [int(c) for c in hits.chunks()[s:e]], texts,
            [float(x) for x in hits.scores[s:e]]))
    with timing.measure("total", len(items)):
        return builder.build(items, tokens)


_GEN_SCHEMA = pa.schema([
    pa.field("request_id", pa.string()), pa.field("text", pa.string()),
    pa.field("status", pa.string()), pa.field("finish_reason", pa.string()),
    pa.field("prompt_tokens", pa.int64()), pa.field("output_tokens", pa.int64()),
    pa.field("ttft_ms", pa.float64()), pa.field("tpot_ms", pa.float64()),
    pa.field("e2e_ms", pa.float64()), pa.field("itl_ms", pa.list_(pa.float64())),
    pa.field("error", pa.string()), pa.field("attempts", pa.int64()),
])


def save_generations(gens: Sequence[Generation], path: Path) -> None:
    cols = {f.name: [getattr(g, f.name) for g in gens] for f in _GEN_SCHEMA}
    cols["itl_ms"] = [list(g.itl_ms) for g in gens]
    pq.write_table(pa.table(cols, schema=_GEN_SCHEMA), path)


def load_generations(path: Path) -> list[Generation]:
    rows = pq.read_table(path).cast(_GEN_SCHEMA).to_pylist()
    return [Generation(**{**r, "itl_ms": tuple(r["itl_ms"] or ())}) for r in rows]


@dataclass(frozen=True)
class GenerateOp:
    generator: Generator
    sampling: SamplingParams
    stage: str = "generate"
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {"generator": self.generator.cache_params(), "sampling": asdict(self.sampling)}

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        (ctx,) = inputs
        requests = [GenerationRequest(c.query_id, tuple(c.messages), self.sampling)
                    for c in ctx.contexts]
        gens = self.generator.generate(requests) if requests else []
        if len(gens) != len(requests):
            raise RuntimeError(f"generator returned {len(gens)} answers for {len(requests)}")
        for g in gens:  # each answer's own request latency, joinable per query
            timing.add("query", g.output_tokens, g.e2e_ms, g.request_id)
        save_generations(gens, directory / GENERATIONS_FILE)

    def load(self, directory: Path, inputs: Sequence[Any]) -> list[Generation]:
        return load_generations(directory / GENERATIONS_FILE)


@dataclass(frozen=True)
class GenerationSettings:
    generator: Generator
    builder: ContextBuilder
    sampling: SamplingParams
    subset: tuple[str, ...]
    judge: Any = None  # bench.judge.base.Judge | None
    kinds: tuple[str, ...] = ()
    #: add the exact (flat) pool as the first config when the index is approximate
    exact_reference: bool = False


def generation_nodes(s: GenerationSettings, pool: Node, chunk: Node, data: Node, *,
                     label: str) -> tuple[str, Node, Node]:
    """(label, generate node, leaf) of one pool: context -> generate [-> judge]."""
    from bench.judge.stage import JudgeOp, judge_name

    name = generator_name(s.generator)
    ctx = Node(ContextOp(s.builder, s.generator, s.subset), (pool, chunk, data),
               f"context of {label} ({len(s.subset)} queries)")
    gen_label = f"{label}>gen({name})"
    gen = Node(GenerateOp(s.generator, s.sampling), (ctx,), gen_label)
    if s.judge is None:
        return gen_label, gen, gen
    jlabel = f"{gen_label}>judge({judge_name(s.judge)})"
    return gen_label, gen, Node(JudgeOp(s.judge), (gen, ctx, data), jlabel)
