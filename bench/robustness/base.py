"""Records of the robustness study: case types, one case, one outcome.

A robustness case is a golden query whose CONTEXT has been altered on purpose (a gold passage
removed, a contradicting source planted, an entity swapped, poisoned passages retrieved): what
the system should then answer is known in advance, and so is the specific wrong answer the
alteration invites. Every answer is classified into one outcome class
(:data:`OUTCOMES`): ``answered`` (the expected answer), ``abstained`` (a refusal), or
``drifted`` (anything else), a drift being ``drifted_wrong`` when it names the invited wrong
answer (the attacker's, the stale source's, the original entity of a swap) and
``drifted_other`` otherwise. ``desired`` says which class a reliable system lands in.

Adding a case type: add its name to :data:`CASE_TYPES` and :data:`DESIRED`, and a builder in
``bench.robustness.cases`` (a branch of ``_build``); the study, the outcome classes and the report
follow from the records.
"""

from __future__ import annotations

from dataclasses import dataclass

#: every case type, in report order (``robustness.cases`` picks among them)
CASE_TYPES = (
    "incomplete_context",
    "reworded_duplicate",
    "stale_conflict",
    "low_trust_conflict",
    "entity_swap",
    "negation",
    "poison_mono",
    "poison_poly",
)

#: the outcome class a reliable system lands in, per case type
DESIRED = {
    "incomplete_context": "abstained",
    "reworded_duplicate": "answered",
    "stale_conflict": "answered",
    "low_trust_conflict": "answered",
    "entity_swap": "answered",
    "negation": "answered",
    "poison_mono": "answered",
    "poison_poly": "answered",
}

#: outcome classes, in report order (``drifted`` = ``drifted_wrong`` + ``drifted_other``)
OUTCOMES = ("answered", "abstained", "drifted_wrong", "drifted_other")
#: an answer that could not be classified because generation failed (never counted in n)
GENERATION_FAILED = "generation_failed"

#: case types whose planted passages enter the corpus searched (retrieval-level hijack)
POISON_TYPES = ("poison_mono", "poison_poly")


@dataclass(frozen=True)
class Passage:
    """One passage of a case's context: a corpus document or a planted one. ``doc_id`` of a
    planted passage starts with ``robust:``; ``label`` is the provenance line shown to the
    generator (``[source: FOLDOC, revised 2024-05-01]``), empty for none."""

    doc_id: str
    text: str
    label: str = ""
    planted: bool = False


@dataclass(frozen=True)
class Case:
    """One robustness case.

    ``expected``: the answer a reliable system gives (a term, ``yes``/``no``; None for
    ``incomplete_context``, where the reliable answer is an abstention and ``expected`` names
    the answer that would come from memory). ``wrong``: the invited wrong answer (None: there
    is none). ``context``: the passages given to the generator, in order, for every case type
    but poisoning, whose context is what retrieval returns from the poisoned corpus
    (``planted`` holds the case's planted passages then). ``yes_no``: the answer is read as a
    yes/no answer. ``as_of``: the date the answer must hold at (stale conflicts).
    """

    case_id: str
    case_type: str
    source_query_id: str
    question: str
    expected: str | None
    wrong: str | None
    context: tuple[Passage, ...] = ()
    planted: tuple[Passage, ...] = ()
    gold_doc_ids: tuple[str, ...] = ()
    yes_no: bool = False
    as_of: str | None = None
    #: poisoning: whether the case's cluster is planted (False: a clean control query)
    attacked: bool = True

    @property
    def desired(self) -> str:
        return DESIRED[self.case_type]


@dataclass(frozen=True)
class CaseOutcome:
    """One case after retrieval (poisoning) and generation.

    ``outcome``: one of :data:`OUTCOMES` or :data:`GENERATION_FAILED`. Poisoning fields are
    None for the other case types: ``poisoned_in_top_k`` (planted passages of the case's
    cluster among the retrieved top-k), ``caught`` (of those, removed by the token-overlap
    filter), ``clean_removed`` (corpus passages the filter removed), ``poisoned_after_filter``
    (planted passages left in the top-k after the filter).
    """

    case_id: str
    case_type: str
    source_query_id: str
    outcome: str
    answer: str | None
    status: str
    attacked: bool = True
    poisoned_in_top_k: int | None = None
    caught: int | None = None
    clean_removed: int | None = None
    poisoned_after_filter: int | None = None
    e2e_ms: float | None = None
