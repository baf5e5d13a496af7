"""Evidence at the k the generator gets: metrics of the context actually sent.

A generated config repeats its pool's retrieval metrics (recall@100 of a pool of 100), but the
generator reads only the few passages the context stage placed in its prompt. These metrics
are computed on exactly those passages (``Context.passages``), per answered query:

- ``gold_in_context``: 1 when a relevant document (eligible gold, grade >= the run's relevance
  level) has a passage in the context, else 0.
- ``context_recall`` = relevant documents in the context / relevant documents.
- ``context_precision`` = relevant documents in the context / documents in the context.
  Document level and chunk-aware: the context's k is its number of DISTINCT documents, so two
  chunks of one document count once (as retrieval metrics count parent documents). A context
  with no passage (a prompt over budget) scores 0 on all three, as trec_eval scores an empty
  ranking.
- ``context_claim_recall`` = the query's required claims that some context passage covers /
  required claims, with the matcher of ``claims_coverage`` (``bench.metrics.answer.
  claim_covered``: contiguous normalised tokens, or a sentence with token F1 >= the threshold),
  applied passage by passage (RAGChecker's ``claim_recall``, with that matcher as the
  entailment check).
- ``context_utilisation`` = required claims covered by the context AND by the answer / required
  claims covered by the context (RAGChecker's ``context_utilization``). Not scored
  (``no_claims``) when the context covers none: RAGChecker writes 0 there, which would count a
  retrieval miss against the generator.

Statuses: the three document metrics are ``not_applicable`` on a query without a relevant
document (must-abstain queries: the abstention metrics score those); the two claim metrics are
``no_claims`` on an answerable query without required claims and ``not_applicable`` on a
must-abstain one; ``context_utilisation`` is ``error`` when the generation failed.

RAGChecker's other generator diagnostics (noise sensitivity to relevant / irrelevant passages,
hallucination, self-knowledge) need the answer's own claims and their entailment by each
passage and by the reference: an LLM judge gives those (``bench.judge.diagnostics``); without
that judge they are not scored.

:func:`diagnose` crosses the context (``gold_in_context``) with the answer (``answer_correct``)
per query: which layer to fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.context.base import Context, strip_citations
from bench.metrics.answer import claim_covered, normalize_answer
from bench.metrics.base import ERROR, NO_CLAIMS, NOT_APPLICABLE, SCORED, QueryValue

#: deterministic context metrics, in report order
CONTEXT_METRICS = ("gold_in_context", "context_recall", "context_precision",
                   "context_claim_recall", "context_utilisation")
#: RAGChecker generator diagnostics that need a judge (``judge.judges: [..., diagnostics]``)
JUDGED_DIAGNOSTICS = ("noise_sensitivity_relevant", "noise_sensitivity_irrelevant",
                      "hallucination", "self_knowledge")


@dataclass(frozen=True)
class ContextItem:
    """One answered query's context with what it is judged against. ``relevant``: the eligible
    gold documents with grade >= the relevance level; ``answer``: the generated text (None:
    the generation failed)."""

    query_id: str
    context: Context
    relevant: frozenset[str]
    required_claims: tuple[str, ...] = ()
    answer: str | None = None
    must_abstain: bool = False


def covered_claims(passages: Sequence[str], claims: Sequence[str], *,
                   f1_threshold: float = 0.5) -> list[list[bool]]:
    """``out[c][p]``: passage ``p`` covers claim ``c`` (RAGChecker's ``retrieved2answer``)."""
    return [[claim_covered(p, c, f1_threshold=f1_threshold) for p in passages] for c in claims]


def relevant_passages(passages: Sequence[str], claims: Sequence[str], *,
                      f1_threshold: float = 0.5) -> list[bool]:
    """Per passage: it covers at least one of ``claims`` (RAGChecker's relevant chunk)."""
    table = covered_claims(passages, claims, f1_threshold=f1_threshold)
    return [any(row[p] for row in table) for p in range(len(passages))]


def context_values(item: ContextItem, *, f1_threshold: float = 0.5) -> list[QueryValue]:
    """One value per name of :data:`CONTEXT_METRICS`, in that order."""
    q, ctx = item.query_id, item.context
    docs = ctx.doc_ids
    got: dict[str, tuple[float, str]] = {}
    if item.relevant:
        hit = sum(d in item.relevant for d in docs)
        got["gold_in_context"] = (float(hit > 0), SCORED)
        got["context_recall"] = (hit / len(item.relevant), SCORED)
        got["context_precision"] = (hit / len(docs) if docs else 0.0, SCORED)
    else:
        for m in CONTEXT_METRICS[:3]:
            got[m] = (0.0, NOT_APPLICABLE)
    claims = [c for c in item.required_claims if normalize_answer(c)]
    if item.must_abstain:
        got["context_claim_recall"] = got["context_utilisation"] = (0.0, NOT_APPLICABLE)
    elif not claims:
        got["context_claim_recall"] = got["context_utilisation"] = (0.0, NO_CLAIMS)
    else:
        table = covered_claims([p.text for p in ctx.passages], claims, f1_threshold=f1_threshold)
        recalled = [any(row) for row in table]
        got["context_claim_recall"] = (sum(recalled) / len(claims), SCORED)
        if item.answer is None:
            got["context_utilisation"] = (0.0, ERROR)
        elif not any(recalled):
            got["context_utilisation"] = (0.0, NO_CLAIMS)
        else:
            answer = strip_citations(item.answer)
            used = sum(r and claim_covered(answer, c, f1_threshold=f1_threshold)
                       for r, c in zip(recalled, claims, strict=True))
            got["context_utilisation"] = (used / sum(recalled), SCORED)
    return [QueryValue(q, m, *got[m]) for m in CONTEXT_METRICS]


def context_metric_values(items: Sequence[ContextItem], *, f1_threshold: float = 0.5
                          ) -> list[QueryValue]:
    """Every context metric of every item: ``len(items) * len(CONTEXT_METRICS)`` values."""
    return [v for it in items for v in context_values(it, f1_threshold=f1_threshold)]


# --------------------------------------------------------------------------- diagnosis

#: (context good, answer good) -> the layer to fix
LAYER = {
    (True, True): "none",
    (True, False): "generation",
    (False, False): "retrieval",
    (False, True): "retrieval (answer not grounded in the context)",
}


@dataclass(frozen=True)
class DiagnosisCell:
    """The queries of one cell of the matrix and the layer to fix there."""

    context_good: bool
    answer_good: bool
    layer: str
    query_ids: tuple[str, ...]


@dataclass(frozen=True)
class ContextDiagnosis:
    """Context good/bad x answer good/bad per answerable query (``cells``, in the order
    good/good, good/bad, bad/good, bad/bad), must-abstain queries refused or answered, and
    the queries that could not be placed with why (``(query_id, reason)``)."""

    context_rule: str
    answer_rule: str
    cells: tuple[DiagnosisCell, ...]
    abstain_refused: tuple[str, ...] = ()
    abstain_answered: tuple[str, ...] = ()
    unplaced: tuple[tuple[str, str], ...] = ()

    def cell(self, context_good: bool, answer_good: bool) -> DiagnosisCell:
        return next(c for c in self.cells
                    if c.context_good == context_good and c.answer_good == answer_good)


def diagnose(query_ids: Sequence[str], must_abstain: Mapping[str, bool],
             values: Sequence[QueryValue]) -> ContextDiagnosis:
    """The matrix of ``query_ids`` (the answered queries, in order) from their per-query rows:
    context good = ``gold_in_context`` is 1, answer good = ``answer_correct`` is 1; a
    must-abstain query is refused when ``abstained`` is 1. A query whose row is not scored
    (failed generation, no reference) is ``unplaced`` with that status."""
    rows = {(v.query_id, v.metric): v for v in values}
    cells: dict[tuple[bool, bool], list[str]] = {k: [] for k in LAYER}
    refused: list[str] = []
    answered: list[str] = []
    unplaced: list[tuple[str, str]] = []
    for q in query_ids:
        if must_abstain.get(q, False):
            ab = rows.get((q, "abstained"))
            if ab is None or ab.status != SCORED:
                unplaced.append((q, f"abstained {ab.status if ab else 'missing'}"))
            else:
                (refused if ab.value == 1.0 else answered).append(q)
            continue
        ctx, ans = rows.get((q, "gold_in_context")), rows.get((q, "answer_correct"))
        why = [f"{name} {r.status if r else 'missing'}"
               for name, r in (("gold_in_context", ctx), ("answer_correct", ans))
               if r is None or r.status != SCORED]
        if why:
            unplaced.append((q, ", ".join(why)))
            continue
        assert ctx is not None and ans is not None
        cells[(ctx.value == 1.0, ans.value == 1.0)].append(q)
    order = ((True, True), (True, False), (False, True), (False, False))
    return ContextDiagnosis(
        "gold_in_context = 1", "answer_correct = 1",
        tuple(DiagnosisCell(c, a, LAYER[(c, a)], tuple(cells[(c, a)])) for c, a in order),
        tuple(refused), tuple(answered), tuple(unplaced))
