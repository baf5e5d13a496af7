"""Answer-level damage of filtered ANN: answers generated from each engine's filtered top-k,
paired query by query against answers generated from the EXACT filtered top-k of the same
queries (``bench.index.selectivity.exact_filtered``).

The answered subset: a seeded draw of answerable queries (``query_subset``, round robin over
categories), the same for every engine and selectivity. Each answered query's context is
built by the run's context builder (its ``top_k`` passages within its token budget) from the
filtered top-k chunks, best first, one passage per document — its best chunk, as a max-pooled
document pool — so a short list or a lost chunk changes exactly what the generator reads.
Answers come from the run's generator through a prompt memo (``MemoGenerator``, greedy): an
engine whose context equals the exact one asks the same prompt and gets the exact answer
without generating again, so identical contexts are answered once.

Per (engine, setting, selectivity), ``AnswerDamageRow``: how many contexts differ from the
exact context (passages or their order), how many answers differ (text), failed generations,
and per answer metric (``token_f1``, ``answer_correct``, ``claims_coverage``: the
deterministic checks of ``bench.metrics.answer``) the exact mean, the engine's mean and the
paired delta (engine - exact) with its bootstrap CI and sign-flip p over the queries both
scored. With a small generator (SmolLM2-135M on the CPU) this is a plumbing check of the
measurement, not a verdict on the engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.context.base import Context, ContextBuilder, ranked_passages
from bench.data.base import Dataset
from bench.generation.base import Generation, GenerationRequest, Generator, SamplingParams
from bench.metrics.answer import AnswerChecks, answer_items
from bench.metrics.base import SCORED
from bench.metrics.stats import paired_compare

#: the answer checks reported (of ``bench.metrics.answer.ANSWER_METRICS``)
METRICS = ("token_f1", "answer_correct", "claims_coverage")


@dataclass(frozen=True)
class MetricDelta:
    """One answer metric of an engine against exact, over the ``n`` queries both scored."""

    metric: str
    n: int
    exact_mean: float | None
    mean: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None


@dataclass(frozen=True)
class AnswerDamageRow:
    backend: str
    params: str
    selectivity: float
    n_queries: int
    #: answered queries whose context (passages, order) differs from the exact context
    n_context_changed: int
    #: answered queries whose answer text differs from the exact answer
    n_answer_changed: int
    #: generations that failed or timed out (engine side)
    n_failed: int
    deltas: tuple[MetricDelta, ...]

    def delta(self, metric: str) -> MetricDelta:
        return next(d for d in self.deltas if d.metric == metric)


@dataclass(frozen=True)
class Answered:
    """One engine's (or exact's) answers on the subset, in subset order."""

    contexts: tuple[Context, ...]
    generations: tuple[Generation, ...]
    #: metric -> per-query value (None: not scored)
    values: dict[str, tuple[float | None, ...]]


def _context_key(c: Context) -> tuple[tuple[str, int], ...]:
    return tuple((p.doc_id, p.chunk_idx) for p in c.passages)


class FilteredAnswers:
    """Answers the subset from filtered results and pairs them against exact (module doc).

    ``rows``: dataset positions of the answered queries; ``chunk_doc`` / ``chunk_text``: the
    chunk table's document row and text per chunk; ``generator``: wrap it in a
    ``MemoGenerator`` so identical prompts are answered once."""

    def __init__(self, dataset: Dataset, rows: Sequence[int], chunk_doc: np.ndarray,
                 chunk_text: Sequence[str], builder: ContextBuilder, generator: Generator,
                 checks: AnswerChecks, sampling: SamplingParams, *, resamples: int = 1000,
                 seed: int = 0) -> None:
        if sampling.temperature > 0:
            raise ValueError("answers are paired on greedy decoding (temperature 0)")
        self.dataset = dataset
        self.rows = np.asarray(rows, dtype=np.int64)
        self.chunk_doc = np.asarray(chunk_doc)
        self.chunk_text = chunk_text
        self.doc_ids = dataset.doc_ids
        self.builder = builder
        self.generator = generator
        self.checks = checks
        self.sampling = sampling
        self.resamples = resamples
        self.seed = seed

    def contexts(self, ids: np.ndarray) -> list[Context]:
        """The context of each answered query from its filtered top-k chunk ids (``ids``:
        [n_dataset_queries, k], -1 padded)."""
        items = []
        for q in self.rows.tolist():
            query = self.dataset.queries[q]
            seen: set[int] = set()
            docs, chunks, texts = [], [], []
            for c in ids[q].tolist():
                if c < 0:
                    continue
                d = int(self.chunk_doc[c])
                if d in seen:  # one passage per document: its best chunk
                    continue
                seen.add(d)
                docs.append(self.doc_ids[d])
                chunks.append(int(c))
                texts.append(self.chunk_text[c])
            # ranks as scores: the builder keeps this order
            scores = [float(len(docs) - r) for r in range(len(docs))]
            items.append(ranked_passages(query.query_id, query.text, docs, chunks, texts,
                                         scores))
        return self.builder.build(items, self.generator)

    def answer(self, ids: np.ndarray) -> Answered:
        ctx = self.contexts(ids)
        reqs = [GenerationRequest(c.query_id, tuple(c.messages), self.sampling) for c in ctx]
        gens = self.generator.generate(reqs)
        queries = [self.dataset.queries[q] for q in self.rows.tolist()]
        scored = self.checks.score(answer_items(queries, gens))
        pos = {q.query_id: i for i, q in enumerate(queries)}
        values: dict[str, list[float | None]] = {m: [None] * len(queries) for m in METRICS}
        for v in scored:
            if v.metric in values and v.status == SCORED:
                values[v.metric][pos[v.query_id]] = float(v.value)
        return Answered(tuple(ctx), tuple(gens), {m: tuple(v) for m, v in values.items()})

    def damage(self, backend: str, params: str, selectivity: float, exact: Answered,
               got: Answered) -> AnswerDamageRow:
        deltas = []
        for m in METRICS:
            pairs = [(a, b) for a, b in zip(exact.values[m], got.values[m], strict=True)
                     if a is not None and b is not None]
            if not pairs:
                deltas.append(MetricDelta(m, 0, None, None, None, None, None, None))
                continue
            a = np.asarray([p[0] for p in pairs])
            b = np.asarray([p[1] for p in pairs])
            cmp = paired_compare(a, b, resamples=self.resamples, seed=self.seed)
            deltas.append(MetricDelta(m, cmp.n, cmp.mean_a, cmp.mean_b, cmp.delta, cmp.ci_low,
                                      cmp.ci_high, cmp.p_value))
        ctx_changed = sum(_context_key(x) != _context_key(y)
                          for x, y in zip(exact.contexts, got.contexts, strict=True))
        ans_changed = sum(x.status != y.status or x.text != y.text
                          for x, y in zip(exact.generations, got.generations, strict=True))
        failed = sum(g.status != "ok" for g in got.generations)
        return AnswerDamageRow(backend, params, selectivity, len(self.rows), ctx_changed,
                               ans_changed, failed, tuple(deltas))
