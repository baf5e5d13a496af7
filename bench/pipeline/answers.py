"""Answer and judge metrics of a generated config, merged with its retrieval scores.

A generated config carries its pool's retrieval values unchanged (over the queries with a
relevant document) and, over the answered subset, the deterministic answer checks
(``bench.metrics.answer``) and the judges' metrics. The merged query list is the retrieval
list with the answered queries it lacks appended (must-abstain queries have no relevant
document); ``ConfigScores.expected`` says which queries each metric is expected on, so means,
CIs, accounting and comparisons of every metric use only its own queries.

Status mapping (``bench.metrics.base`` -> per_query statuses): ``scored`` -> scored;
``no_claims`` -> no_claims; ``invalid`` -> invalid; ``error`` -> failed (timeout when the
generation timed out). ``not_applicable`` / ``no_reference`` (exact match on a must-abstain
query, number match without a number in the reference, refusal on an answerable query): the
metric is not expected on that query, so it has no row and is not in its accounting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from bench.context.base import Context
from bench.context.gold_position import REASONS, GoldAt
from bench.context.metrics import ContextItem, context_metric_values, diagnose
from bench.data.base import Dataset
from bench.generation.base import Generation
from bench.generation.memo import MemoCounts
from bench.generation.stage import (
    ContextOp,
    Contexts,
    JudgedScope,
    generator_name,
    relevant_docs,
)
from bench.judge.base import PairwiseJudge, Verdict, schema_validity
from bench.judge.pairing import PairRun, PairwiseOp, pairwise_summary
from bench.judge.stage import judge_generator, judge_metrics, judge_name, verdict_values
from bench.metrics.answer import AbstentionReport, answer_items
from bench.metrics.base import (
    ERROR,
    INVALID,
    NO_CLAIMS,
    NO_REFERENCE,
    NOT_APPLICABLE,
    SCORED,
    QueryValue,
)
from bench.pipeline.plan import ConfigSpec
from bench.pipeline.scoring import SummarySettings, summarize_values
from bench.results.records import GenerationSummary, GoldProbeSummary
from bench.results.scores import ConfigScores

if TYPE_CHECKING:
    from bench.pipeline.components import Components
    from bench.pipeline.view import NodeValues

_NOT_EXPECTED = (NOT_APPLICABLE, NO_REFERENCE)


@dataclass(frozen=True)
class Answered:
    """What a generated config produced: answers, contexts, verdicts (empty: no judge)."""

    generations: tuple[Generation, ...]
    contexts: tuple[Context, ...]
    verdicts: tuple[Verdict, ...]
    #: judge=pairwise: this config's answers against the baseline's (None: not compared)
    pairs: PairRun | None = None


def answered(spec: ConfigSpec, executor: NodeValues) -> Answered:
    assert spec.answers is not None
    gens: list[Generation] = executor.value(spec.answers)
    ctx: Contexts = executor.value(spec.answers.input("contexts"))
    if isinstance(spec.leaf.op, PairwiseOp):
        return Answered(tuple(gens), tuple(ctx.contexts), (), executor.value(spec.leaf))
    verdicts: list[Verdict] = executor.value(spec.leaf) if spec.leaf is not spec.answers else []
    return Answered(tuple(gens), tuple(ctx.contexts), tuple(verdicts))


def _status(v: QueryValue, gen: Generation | None) -> str:
    if v.status == SCORED:
        return "scored"
    if v.status == ERROR:  # why the answer is missing: a timeout, an unparsable response
        if gen is not None and gen.status in ("timeout", "invalid"):
            return gen.status
        return "failed"
    if v.status in (NO_CLAIMS, INVALID):
        return v.status
    raise ValueError(f"unexpected status {v.status!r} of {v.metric}")


def answer_values(comps: Components, dataset: Dataset, a: Answered, *,
                  relevance_level: int = 1
                  ) -> tuple[list[QueryValue], AbstentionReport | None]:
    """Answer-check rows, context rows (``bench.context.metrics``: the evidence in the prompt)
    then judge rows, for every answered query."""
    by_id = {q.query_id: q for q in dataset.queries}
    queries = [by_id[g.request_id] for g in a.generations]
    rows: list[QueryValue] = []
    report = None
    if comps.answers is not None:
        items = answer_items(queries, a.generations)
        checks = comps.answers.score(items)
        rows += checks
        report = comps.answers.abstention(items, checks)
    rows += context_rows(comps, dataset, a, relevance_level)
    if a.pairs is not None:  # the candidate's preference over the baseline, per query
        rows += [v.value() for v in a.pairs.primary]
    elif comps.judge is not None and not isinstance(comps.judge, PairwiseJudge):
        rows += verdict_values(comps.judge, a.verdicts)
    return rows, report


def context_rows(comps: Components, dataset: Dataset, a: Answered, relevance_level: int
                 ) -> list[QueryValue]:
    """The context metrics of each answered query, on the context its answer was generated
    from (the claim matcher's threshold is the answer checks', so a claim counts as covered by
    the context exactly when it would count as covered by an answer)."""
    by_id = {q.query_id: q for q in dataset.queries}
    ctx_of = {c.query_id: c for c in a.contexts}
    visible, _ = relevant_docs(dataset, relevance_level)
    items = []
    for g in a.generations:
        q, ctx = by_id[g.request_id], ctx_of.get(g.request_id)
        if ctx is None:  # a judged builder left the query out: no prompt, no answer
            continue
        items.append(ContextItem(q.query_id, ctx, frozenset(visible[q.query_id]),
                                 q.required_claims, g.text if g.status == "ok" else None,
                                 q.must_abstain))
    threshold = 0.5 if comps.answers is None else comps.answers.claim_f1_threshold
    return context_metric_values(items, f1_threshold=threshold)


def merge_answer_scores(base: ConfigScores, dataset: Dataset, rows: Sequence[QueryValue],
                        gens: Sequence[Generation], settings: SummarySettings) -> ConfigScores:
    """``base`` (retrieval values, untouched) plus one metric per answer/judge metric name."""
    answered_ids = {g.request_id for g in gens}
    known = set(base.query_ids)
    extra = [q for q in dataset.queries if q.query_id in answered_ids and q.query_id not in known]
    qids = (*base.query_ids, *(q.query_id for q in extra))
    cats = (*base.categories, *(q.category for q in extra))
    n, n_base = len(qids), len(base.query_ids)
    pos = {q: i for i, q in enumerate(qids)}
    values = {m: np.concatenate([v, np.full(n - n_base, np.nan)]) for m, v in base.values.items()}
    statuses = {m: (*st, *("failed" for _ in extra)) for m, st in base.statuses.items()}
    expected = {m: np.concatenate([base.expects(m), np.zeros(n - n_base, bool)])
                for m in base.values}
    gen_of = {g.request_id: g for g in gens}
    new_status: dict[str, list[str]] = {}
    for v in rows:
        if v.metric not in new_status:
            values[v.metric] = np.full(n, np.nan)
            new_status[v.metric] = ["failed"] * n
            expected[v.metric] = np.zeros(n, bool)
        if v.status in _NOT_EXPECTED:
            continue
        i = pos[v.query_id]
        st = _status(v, gen_of.get(v.query_id))
        new_status[v.metric][i] = st
        expected[v.metric][i] = True
        if st == "scored":
            values[v.metric][i] = float(v.value)
    for m, st_list in new_status.items():
        statuses[m] = tuple(st_list)
    new = {m: values[m] for m in new_status}
    summary = summarize_values(base.config_id, cats, new,
                               {m: statuses[m] for m in new}, settings, expected)
    return ConfigScores(base.config_id, qids, cats, values, statuses,
                        (*base.summary, *summary), expected)


def _pcts(xs: Sequence[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    p50, p95 = np.percentile(np.asarray(xs, dtype=np.float64), [50, 95])
    return float(p50), float(p95)


def _p99(xs: Sequence[float]) -> float | None:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), 99)) if xs else None


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def generation_summary(spec: ConfigSpec, comps: Components, a: Answered,
                       abstention: AbstentionReport | None,
                       memo: MemoCounts | None = None,
                       rows: Sequence[QueryValue] = (),
                       dataset: Dataset | None = None) -> GenerationSummary:
    """``rows`` / ``dataset``: the config's answer rows (``answer_values``) and its dataset,
    for the context-by-answer diagnosis (None without them)."""
    ok = [g for g in a.generations if g.status == "ok"]
    ttft_ms = [g.ttft_ms for g in ok if g.ttft_ms is not None]
    tpot_ms = [g.tpot_ms for g in ok if g.tpot_ms is not None]
    ttft, tpot = _pcts(ttft_ms), _pcts(tpot_ms)
    itl = _pcts([x for g in ok for x in g.itl_ms])
    e2e = _pcts([g.e2e_ms for g in ok])
    calls = [c for v in a.verdicts for c in v.calls]
    counts: list[tuple[str, int, int, int, int]] = []
    if a.pairs is not None:
        calls = [c for v in a.pairs.primary for c in v.calls]
        prows = [v.value() for v in a.pairs.primary]
        counts.append(("pairwise_preference", sum(r.status == SCORED for r in prows), 0,
                       sum(r.status == INVALID for r in prows),
                       sum(r.status == ERROR for r in prows)))
    validity = schema_validity(calls)
    if comps.judge is not None and not isinstance(comps.judge, PairwiseJudge):
        names = judge_metrics(comps.judge)
        for judge, metrics in names.items():
            # per answer: the first of judge.repeats judgments (calls count every repeat)
            mine = [v for v in a.verdicts if v.judge == judge and v.repeat == 0]
            for m in metrics:
                vals = [r for v in mine for r in v.values((m,))]
                counts.append((m, sum(r.status == SCORED for r in vals),
                               sum(r.status == NO_CLAIMS for r in vals),
                               sum(r.status == INVALID for r in vals),
                               sum(r.status == ERROR for r in vals)))
    sc = abstention.scores if abstention is not None else None
    judge_model = None if comps.judge is None else judge_generator(comps.judge)
    # the config's own answerer: bench's generator, or a black-box system (bench.system)
    name = spec.params.get("generator")
    if name is None:
        assert comps.generator is not None
        name = generator_name(comps.generator)
    return GenerationSummary(
        config_id=spec.config_id, label=spec.label, generator=str(name),
        n_queries=len(a.generations), n_ok=len(ok),
        n_failed=sum(g.status not in ("ok", "timeout") for g in a.generations),
        n_timeout=sum(g.status == "timeout" for g in a.generations),
        prompt_tokens_mean=_mean([g.prompt_tokens for g in ok]),
        output_tokens_mean=_mean([g.output_tokens for g in ok]),
        ttft_p50_ms=ttft[0], ttft_p95_ms=ttft[1], tpot_p50_ms=tpot[0], tpot_p95_ms=tpot[1],
        itl_p50_ms=itl[0], itl_p95_ms=itl[1], e2e_p50_ms=e2e[0], e2e_p95_ms=e2e[1],
        abstention_precision=None if sc is None else sc.precision,
        abstention_recall=None if sc is None else sc.recall,
        coverage=None if sc is None else sc.coverage,
        answered_accuracy=None if sc is None else sc.answered_accuracy,
        n_must_abstain=0 if sc is None else sc.n_must_abstain,
        n_abstained=0 if sc is None else sc.n_abstained,
        judge=None if comps.judge is None else judge_name(comps.judge),
        judge_calls=validity.denominator, judge_schema_valid=validity.numerator,
        judge_schema_validity=validity.rate,
        judge_invalid=(sum(v.status == INVALID for v in a.verdicts if v.repeat == 0)
                       if a.pairs is None
                       else sum(v.status == INVALID for v in a.pairs.primary)),
        judge_counts=tuple(counts),
        judge_model=None if judge_model is None else generator_name(judge_model),
        memo=None if memo is None else (memo.answer_hits, memo.answer_misses,
                                        memo.judge_hits, memo.judge_misses),
        ttft_p99_ms=_p99(ttft_ms), tpot_p99_ms=_p99(tpot_ms),
        abstention_hallucination_rate=None if sc is None or sc.recall is None
        else 1.0 - sc.recall,
        context_passages_mean=_mean([len(c.passages) for c in a.contexts]),
        context_docs_mean=_mean([len(c.doc_ids) for c in a.contexts]),
        diagnosis=None if dataset is None or not rows else diagnose(
            [g.request_id for g in a.generations],
            {q.query_id: q.must_abstain for q in dataset.queries}, rows))


def with_pairwise(g: GenerationSummary, a: Answered, comps: Components,
                  configs: Sequence[ConfigSpec], settings: SummarySettings) -> GenerationSummary:
    """``g`` with its pairwise figures against its baseline (judge=pairwise candidates): the
    config whose answers its pairwise node reads as ``baseline``."""
    from bench.judge.pairing import family
    from bench.judge.pairwise import PairwisePreferenceJudge

    judge = comps.judge
    if a.pairs is None or not isinstance(judge, PairwisePreferenceJudge):
        return g
    spec = next(c for c in configs if c.config_id == g.config_id)
    base_answers = spec.leaf.input("baseline")
    base = next(c for c in configs if c.answers is base_answers)

    def answerer(c: ConfigSpec) -> tuple[str, str]:  # (generator name, its family)
        name = str(c.params.get("generator"))
        return name, str(c.params.get("generator_family") or family(name))

    (cand_gen, cand_fam), (base_gen, base_fam) = answerer(spec), answerer(base)
    cross = judge.cross_generator
    jname = generator_name(judge.generator)
    cname = None if cross is None else generator_name(cross)
    summary = pairwise_summary(
        a.pairs, candidate_id=g.config_id, candidate=g.label, baseline_id=base.config_id,
        baseline=base.label, judge=jname, cross_judge=cname, orders=judge.orders,
        aggregate=judge.aggregate, candidate_generator=cand_gen, baseline_generator=base_gen,
        resamples=settings.resamples, seed=settings.seed, confidence=settings.confidence,
        families={"candidate": cand_fam, "baseline": base_fam,
                  "judge": judge.family or family(jname),
                  "cross": None if cname is None else judge.cross_family or family(cname)})
    return replace(g, pairwise=summary)


def gold_probe_summary(spec: ConfigSpec, executor: NodeValues, scope: JudgedScope | None
                       ) -> GoldProbeSummary | None:
    """A gold-position config's placement figures (None for any other generated config)."""
    assert spec.answers is not None
    node = spec.answers.input("contexts")
    op = node.op
    if not isinstance(op, ContextOp):  # a black-box system's returned passages
        return None
    builder = op.builder
    if not isinstance(builder, GoldAt):
        return None
    assert scope is not None, "a judged context builder draws its subset from a scope"
    ctx: Contexts = executor.value(node)
    counts = dict(scope.excluded)
    for _, reason in ctx.excluded:
        counts[reason] = counts.get(reason, 0) + 1
    order = {r: i for i, r in enumerate(REASONS)}
    excluded = tuple(sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)),
                                                            kv[0])))
    return GoldProbeSummary(
        config_id=spec.config_id, label=spec.label, position=builder.position,
        gold_index=builder.index, n_distractors=builder.n_distractors,
        n_dataset_queries=scope.n_queries, n_eligible=len(scope.eligible),
        n_drawn=len(op.subset), n_probed=len(ctx.contexts),
        n_injected=sum(p.injected for p in ctx.placements), excluded=excluded)
