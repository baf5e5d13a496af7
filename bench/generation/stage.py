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
A context option that reads the judgments (``JudgedContextBuilder``, e.g. the gold-position
probe) cannot build a context for every query (no relevant document, several): the subset is
then drawn from the queries it can build (:func:`judged_scope`), and the others are counted.

A swept context option (``ContextSweep``) gets one context node per variant on the same pool,
each followed by its own answers: ``dense>gold@middle(4)>gen(...)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.chunking.base import ChunkTable, chunk_text_field
from bench.context.base import (
    Context,
    ContextBuilder,
    ContextSweep,
    ContextVariant,
    JudgedContextBuilder,
    JudgedPassages,
    Passage,
    Placement,
    RankedPassages,
    TopKContextBuilder,
    ranked_passages,
)
from bench.data.base import Dataset
from bench.errors import ConfigError
from bench.filters.base import eligible_gold
from bench.generation.base import (
    Generation,
    GenerationRequest,
    Generator,
    SamplingParams,
    StreamingGenerator,
    generator_name,
)
from bench.generation.files import load_generations, save_generations
from bench.generation.memo import unmemoised
from bench.generation.sweep import SweepMember
from bench.pipeline.lanes import ConfigKind, ConfigSpec, PlanState, config_id_of
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer
from bench.rerank.stage import passages
from bench.retrieval.base import Pool
from bench.telemetry.base import TimingLog

if TYPE_CHECKING:
    from bench.judge.base import Judge, PairwiseJudge

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
    kinds = tuple(k.value for k in ConfigKind if k is not ConfigKind.GENERATED)
    bad = [k for k in g.kinds if k not in kinds]
    if bad:
        raise ConfigError("generation.kinds", f"unknown kinds {bad}; choose from {kinds}")


def query_subset(dataset: Dataset, max_queries: int | None, seed: int,
                 among: Collection[str] | None = None, *,
                 answerable_only: bool = False) -> tuple[str, ...]:
    """Query ids to answer, in dataset order: all of them, or ``max_queries`` drawn seeded and
    round robin over the categories (sorted by name), so each category is represented.
    ``among``: draw only from these queries (None: every query); ``answerable_only``: draw
    from the queries that are not must-abstain."""
    queries = [q for q in dataset.queries if (among is None or q.query_id in among)
               and not (answerable_only and q.must_abstain)]
    ids = [q.query_id for q in queries]
    if max_queries is None or max_queries >= len(ids):
        return tuple(ids)
    by_cat: dict[str, list[str]] = {}
    for q in queries:
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


@dataclass(frozen=True)
class Contexts:
    """The contexts of the answered queries, in dataset order. From a judged builder also
    where each gold passage went (one ``Placement`` per context) and the subset queries it
    left out, ``(query_id, reason)``."""

    contexts: tuple[Context, ...]
    placements: tuple[Placement, ...] = ()
    excluded: tuple[tuple[str, str], ...] = ()

    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(c.query_id for c in self.contexts)


@dataclass(frozen=True)
class ContextInputs:
    pool: Pool
    chunks: ChunkTable
    data: Dataset


@dataclass(frozen=True)
class ContextOp(OpTraits):
    """Answers are generated in batch after retrieval (``OFFLINE``), but assembling the
    context is work every request pays: its time (one whole-stage sample, shared evenly over
    the queries) counts into the generated config's end-to-end latency (``request_stages``),
    and ``run_one`` builds one request's context, timed as ``context``, for a whole-request
    chain (``bench.pipeline.request.QueryChain(whole_request=True)``: ``/v1/answer``, the
    capacity study). Unmemoised: nothing is stored per request."""

    builder: ContextBuilder | JudgedContextBuilder
    generator: Generator
    subset: tuple[str, ...]
    #: the run's relevance level: which judgments a judged builder reads
    relevance_level: int = 1
    stage: str = "context"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    request_stages: ClassVar[tuple[str, ...]] = ("context",)
    Inputs: ClassVar[type] = ContextInputs

    def params(self) -> Mapping[str, Any]:
        params: dict[str, Any] = {"builder": self.builder.cache_params(),
                                  "tokenizer": self.generator.cache_params(),
                                  "queries": list(self.subset)}
        if isinstance(self.builder, JudgedContextBuilder):  # only then: other keys stay put
            params["relevance_level"] = self.relevance_level
        return params

    def run(self, inputs: ContextInputs, timing: TimingLog) -> Contexts:
        pool, chunks, dataset = inputs.pool, inputs.chunks, inputs.data
        if isinstance(self.builder, JudgedContextBuilder):
            items = judged_items(pool, chunks, dataset, self.subset, self.relevance_level)
            self.generator.count_tokens("warm-up")  # a one-time load is no request's cost
            with timing.measure("total", len(items)):
                built = self.builder.build_judged(items, self.generator)
            return Contexts(built.contexts, built.placements, built.excluded)
        return Contexts(tuple(build_contexts(self.builder, self.generator, pool, chunks,
                                             dataset, self.subset, timing)))

    def run_one(self, inputs: ContextInputs, query: OneQuery, timer: QueryTimer) -> Contexts:
        """The request's context (any query: a served one is in no subset) from its one-query
        pool, as ``run`` builds that query's; picking its passages and fitting them are both
        timed (the tokenizer is loaded by the chain's warm-up, no request's cost)."""
        qid = (query.query.query_id,)
        with timer.measure("context"):
            if isinstance(self.builder, JudgedContextBuilder):
                items = judged_items(inputs.pool, inputs.chunks, inputs.data, qid,
                                     self.relevance_level)
                built = self.builder.build_judged(items, self.generator)
                return Contexts(built.contexts, built.placements, built.excluded)
            return Contexts(tuple(self.builder.build(
                context_items(self.builder, inputs.pool, inputs.chunks, inputs.data, qid),
                self.generator)))


def relevant_docs(dataset: Dataset, relevance_level: int
                  ) -> tuple[dict[str, tuple[str, ...]], dict[str, frozenset[str]]]:
    """Per query id: (the corpus documents its caller may see with grade >= level, best grade
    first then corpus order; every document with such a grade, visible or not)."""
    docs = dataset.doc_index()
    gold = eligible_gold(dataset)
    visible: dict[str, tuple[str, ...]] = {}
    judged: dict[str, frozenset[str]] = {}
    for q in dataset.queries:
        rel = [(-g, docs[d], d) for d, g in gold[q.query_id].items()
               if g >= relevance_level and d in docs]
        visible[q.query_id] = tuple(d for _, _, d in sorted(rel))
        judged[q.query_id] = frozenset(d for d, g in q.qrels if g >= relevance_level)
    return visible, judged


@dataclass(frozen=True)
class JudgedScope:
    """Which queries a judged context builder can build from the judgments alone: the rest,
    counted per reason over the whole dataset, are never drawn into the answered subset."""

    n_queries: int
    eligible: tuple[str, ...]
    excluded: tuple[tuple[str, int], ...]


def judged_scope(builder: JudgedContextBuilder, dataset: Dataset, relevance_level: int
                 ) -> JudgedScope:
    visible, _ = relevant_docs(dataset, relevance_level)
    eligible: list[str] = []
    counts: dict[str, int] = {}
    for q in dataset.queries:
        reason = builder.exclusion(q.must_abstain, visible[q.query_id])
        if reason is None:
            eligible.append(q.query_id)
        else:
            counts[reason] = counts.get(reason, 0) + 1
    return JudgedScope(len(dataset.queries), tuple(eligible), tuple(counts.items()))


def judged_items(pool: Pool, chunks: ChunkTable, dataset: Dataset, subset: Sequence[str],
                 relevance_level: int) -> list[JudgedPassages]:
    """Each subset query's WHOLE pool, best first, with its relevant documents and their
    first chunks (chunk-table order; the document's text where it has no chunk)."""
    hits = pool.hits
    wanted = set(subset)
    visible, judged = relevant_docs(dataset, relevance_level)
    docs = dataset.doc_index()
    first_rows, first_at = np.unique(chunks.doc_idx, return_index=True)
    first_chunk = dict(zip(first_rows.tolist(), first_at.tolist(), strict=True))
    ids = dataset.doc_ids
    items = []
    for q, query in enumerate(dataset.queries):
        if query.query_id not in wanted:
            continue
        s, e = int(hits.offsets[q]), int(hits.offsets[q + 1])
        ranked = ranked_passages(
            query.query_id, query.text, [ids[int(d)] for d in hits.doc_idx[s:e]],
            [int(c) for c in hits.chunks()[s:e]], passages(hits, chunks, dataset, q, e - s),
            [float(x) for x in hits.scores[s:e]])
        firsts = []
        for doc_id in visible[query.query_id]:
            row = first_chunk.get(docs[doc_id], -1)
            text = (chunks.text[row] if row >= 0
                    else chunk_text_field(dataset.documents[docs[doc_id]]))
            firsts.append(Passage(doc_id, row, text, float("nan")))
        items.append(JudgedPassages(ranked, visible[query.query_id], judged[query.query_id],
                                    tuple(firsts), query.must_abstain))
    return items


def build_contexts(builder: ContextBuilder, tokens: Generator, pool: Pool, chunks: ChunkTable,
                   dataset: Dataset, subset: Sequence[str], timing: TimingLog) -> list[Context]:
    items = context_items(builder, pool, chunks, dataset, subset)
    tokens.count_tokens("warm-up")  # may load the tokenizer (or model): once, no request's cost
    with timing.measure("total", len(items)):
        return builder.build(items, tokens)


def context_items(builder: ContextBuilder, pool: Pool, chunks: ChunkTable, dataset: Dataset,
                  subset: Collection[str]) -> list[RankedPassages]:
    """Each subset query's ranked passages the builder may place, best first (its ``top_k``
    of the pool, or the whole pool)."""
    hits = pool.hits
    wanted = set(subset)
    items = []
    depth = (builder.top_k if isinstance(builder, TopKContextBuilder)
             else int(np.diff(hits.offsets).max(initial=0)))
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
    return items


@dataclass(frozen=True)
class GenerateInputs:
    contexts: Contexts


@dataclass(frozen=True)
class GenerateOp(OpTraits):
    """Answers in batch (``OFFLINE``); each answer's request latency (TTFT and the whole
    generation) is a per-query sample of ``generate``, part of the generated config's
    end-to-end latency (``request_stages``). ``run_one`` answers one request's context,
    timed as ``generate``, unmemoised (a memo would replay a stored latency as this one's);
    ``on_text`` (a served request's op, never keyed) receives the answer piece by piece when
    the generator streams, else in one piece; ``request_id`` (idem) names the generation
    request (default: the query id, as in the batch)."""

    generator: Generator
    sampling: SamplingParams
    on_text: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    request_id: str | None = field(default=None, compare=False, repr=False)
    stage: str = "generate"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    request_stages: ClassVar[tuple[str, ...]] = ("generate",)
    Inputs: ClassVar[type] = GenerateInputs

    def params(self) -> Mapping[str, Any]:
        return {"generator": self.generator.cache_params(), "sampling": asdict(self.sampling)}

    def write(self, inputs: GenerateInputs, directory: Path, timing: TimingLog) -> None:
        ctx = inputs.contexts
        requests = [GenerationRequest(c.query_id, tuple(c.messages), self.sampling)
                    for c in ctx.contexts]
        gens = self.generator.generate(requests) if requests else []
        if len(gens) != len(requests):
            raise RuntimeError(f"generator returned {len(gens)} answers for {len(requests)}")
        for g in gens:  # each answer's own request latency, joinable per query
            timing.add("query", g.output_tokens, g.e2e_ms, g.request_id)
        save_generations(gens, directory / GENERATIONS_FILE)

    def load(self, directory: Path, inputs: GenerateInputs) -> list[Generation]:
        return load_generations(directory / GENERATIONS_FILE)

    def run_one(self, inputs: GenerateInputs, query: OneQuery, timer: QueryTimer
                ) -> list[Generation]:
        gen = unmemoised(self.generator)
        requests = [GenerationRequest(self.request_id or c.query_id, tuple(c.messages),
                                      self.sampling) for c in inputs.contexts.contexts]
        if not requests:  # a judged builder excluded the query: nothing to answer
            return []
        with timer.measure("generate"):
            if self.on_text is not None and isinstance(gen, StreamingGenerator):
                return [gen.stream(r, self.on_text) for r in requests]
            out = gen.generate(requests)
        if len(out) != len(requests):
            raise RuntimeError(f"generator returned {len(out)} answers for {len(requests)}")
        if self.on_text is not None:
            for g in out:
                if g.text:
                    self.on_text(g.text)
        return out


@dataclass(frozen=True)
class GenerationSettings:
    generator: Generator
    builder: ContextBuilder | ContextSweep
    sampling: SamplingParams
    subset: tuple[str, ...]
    judge: Judge | PairwiseJudge | None = None
    kinds: tuple[str, ...] = ()
    relevance_level: int = 1
    #: a judged builder's scope (which queries the subset was drawn from), else None
    scope: JudgedScope | None = None
    #: add the exact (flat) pool as the first config when the index is approximate
    exact_reference: bool = False
    #: ``generator=sweep``: every generator answering each context (empty: ``generator``
    #: alone); ``generator``, the first, fits the shared context
    members: tuple[SweepMember, ...] = ()


def context_variants(builder: ContextBuilder | ContextSweep) -> list[ContextVariant]:
    """The prompt layouts of a context option: its variants when swept, else itself alone
    (empty label: the config label stays ``POOL>gen(...)``)."""
    if isinstance(builder, ContextSweep):
        return builder.variants()
    return [ContextVariant("", {}, builder)]


@dataclass(frozen=True)
class GeneratedNodes:
    """One generated config of a pool: its label, own params, answers node and leaf, and
    the names of its generator and judge (None: no judge)."""

    label: str
    params: dict[str, object]
    answers: Node
    leaf: Node
    generator: str
    judge: str | None
    #: a sweep member's model family (None: not a sweep)
    family: str | None = None
    #: the label of the context it answered (its pool's, with the context variant)
    context: str = ""

    @property
    def contexts(self) -> Node:
        return self.answers.input("contexts")


def generation_nodes(s: GenerationSettings, pool: Node, chunk: Node, data: Node, *,
                     label: str) -> list[GeneratedNodes]:
    """Per context variant of one pool: context -> generate [-> judge], with one generate
    [-> judge] per generator of a sweep on the ONE context node. A pairwise judge compares
    configs instead (``pairwise_nodes``): here it leaves the answers as the leaf."""
    from bench.judge.base import PairwiseJudge
    from bench.judge.stage import JudgeOp, judge_name

    answerers: list[tuple[str, Generator, str | None, SamplingParams]] = (
        [(m.name, m.generator, m.family, replace(s.sampling, **m.sampling))
         for m in s.members] if s.members
        else [(generator_name(s.generator), s.generator, None, s.sampling)])
    out = []
    for v in context_variants(s.builder):
        ctx_label = f"{label}>{v.label}" if v.label else label
        ctx = Node.of(ContextOp(v.builder, s.generator, s.subset, s.relevance_level),
                      f"context of {ctx_label} ({len(s.subset)} queries)",
                      pool=pool, chunks=chunk, data=data)
        for name, generator, fam, sampling in answerers:
            gen_label = f"{ctx_label}>gen({name})"
            gen = Node.of(GenerateOp(generator, sampling), gen_label, contexts=ctx)
            if s.judge is None or isinstance(s.judge, PairwiseJudge):
                out.append(GeneratedNodes(gen_label, dict(v.params), gen, gen, name,
                                          None if s.judge is None else s.judge.name, fam,
                                          ctx_label))
                continue
            jname = judge_name(s.judge)
            jlabel = f"{gen_label}>judge({jname})"
            out.append(GeneratedNodes(gen_label, dict(v.params), gen,
                                      Node.of(JudgeOp(s.judge), jlabel, generations=gen,
                                              contexts=ctx, data=data), name, jname, fam,
                                      ctx_label))
    return out


def expand(s: PlanState) -> PlanState:
    """Per config so far (of ``generation.kinds``; empty: every kind) and context variant,
    one generated config: the pool's chain, then context -> generate [-> judge]. Its parent
    is the pool config; the variants of a swept context option share the pool node."""
    g = s.generation
    if g is None:
        return s
    out = []
    for p in s.configs:
        if g.kinds and p.kind not in g.kinds:
            continue
        for n in generation_nodes(g, p.leaf, s.node("chunk"), s.node("data"), label=p.label):
            params = {**p.params, **n.params, "generator": n.generator,
                      "answered_queries": len(g.subset), "judge": n.judge}
            if n.family is not None:  # a sweep member (single-generator params unchanged)
                params["generator_family"] = n.family
                params["context"] = n.context
            out.append(ConfigSpec(config_id_of(n.leaf), n.label, ConfigKind.GENERATED, n.leaf,
                                  params, p.config_id, p.filter_pair, pool=p.leaf,
                                  answers=n.answers))
    return s.with_configs([*s.configs, *pairwise_nodes(g, out, s.node("data"))])


def pairwise_nodes(g: GenerationSettings, configs: list[ConfigSpec], data: Node
                   ) -> list[ConfigSpec]:
    """With a pairwise judge, every generated config after the first (the baseline) ends in
    a node comparing its answers with the baseline's (``bench.judge.pairing``); the other
    judges leave ``configs`` as they are. In a generator sweep the baseline is per context:
    each other generator is compared with the first on the SAME context node."""
    from bench.judge.base import PairwiseJudge
    from bench.judge.pairing import PairwiseOp

    if not isinstance(g.judge, PairwiseJudge):
        return configs
    if len(configs) < 2:
        raise ConfigError("judge", f"judge=pairwise compares generated configs; this run has "
                          f"{len(configs)}: add one (a second reranker depth, a context sweep, "
                          "generation.kinds, or generator=sweep)")
    base_of: dict[str, ConfigSpec] = {}
    out = []
    for c in configs:
        assert c.answers is not None
        group = c.answers.input("contexts").ident if g.members else ""
        base = base_of.setdefault(group, c)
        if base is c:
            out.append(c)
            continue
        assert base.answers is not None
        leaf = Node.of(PairwiseOp(g.judge), f"{c.label}>pairwise vs {base.label}",
                       baseline=base.answers, baseline_contexts=base.answers.input("contexts"),
                       candidate=c.answers, candidate_contexts=c.answers.input("contexts"),
                       data=data)
        out.append(replace(c, config_id=config_id_of(leaf), leaf=leaf))
    return out
