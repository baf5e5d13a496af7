"""The one place where metrics are declared (lm-evaluation-harness' ``register_metric`` idea).

Each metric family is registered once with its direction, unit and aggregation; reports, gates,
Pareto fronts and the CLIs read those facts from here, and ranking metrics are dispatched to the
kernels by the family's ``kernel_code`` — no code elsewhere switches on metric-name strings.

Names: ``family`` or ``family@K`` (``ndcg@10``, ``mrr``, ``mrr@10``). :func:`parse_metric` turns a
name into a :class:`MetricSpec`; an unknown name raises :class:`UnknownMetricError` listing the
valid ones. trec_eval's measure names are accepted too (``P.5`` / ``P_5``, ``recall.100``,
``ndcg_cut.10``, ``map_cut.10``, ``recip_rank``, ``Rprec``, ``success.5``, uncut ``ndcg``), and
:func:`parse_metrics` expands the comma form (``P.5,10,20``, ``ndcg@5,10``) into several specs.

Adding a metric: call :func:`register` below with a :class:`MetricFamily`. A ranking metric
also needs a family code and a branch in ``kernels/bench_kernels/_core.py::metric_value`` (pass
that code as ``kernel_code``) and a test against pytrec_eval or a hand-computed fixture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bench.errors import BenchError
from bench_kernels._core import FAMILY_CODES

Cutoff = Literal["none", "optional", "required"]


class UnknownMetricError(BenchError):
    """A metric name that is not registered (or is malformed); lists the valid names."""


@dataclass(frozen=True)
class MetricFamily:
    """A metric family: everything about a metric except its cutoff.

    ``cutoff``: whether ``@K`` is forbidden, optional or required. ``aggregation``: how
    per-query values become one number ("mean" over expected queries, or "ratio" for set-level
    rates computed from counts). ``kernel_code``: the family code of the ranking kernel, None for
    metrics computed elsewhere (set-level, ANN). ``layer``: which part of the pipeline computes
    it — ``retrieval`` (ranking metrics, listed in ``metrics.names``), ``ann`` (added by the
    pipeline for approximate indexes), ``set`` (set-level rates), ``answer`` (deterministic
    answer checks of generated configs), ``judge`` (LLM judges of generated configs); release
    gates read it to say which configs have a metric (``bench.gates.release``).
    """

    family: str
    higher_is_better: bool
    unit: str
    aggregation: Literal["mean", "ratio"]
    cutoff: Cutoff
    description: str
    kernel_code: int | None = None
    layer: Literal["retrieval", "ann", "set", "answer", "judge"] = "retrieval"


@dataclass(frozen=True)
class MetricSpec:
    """One concrete metric: a family at a cutoff ``k`` (None = no cutoff)."""

    name: str
    family: str
    k: int | None
    higher_is_better: bool
    unit: str
    aggregation: Literal["mean", "ratio"]
    kernel_code: int | None
    layer: str = "retrieval"

    @property
    def kernel_k(self) -> int:
        """The cutoff as the kernels take it (0 = none)."""
        return self.k or 0

    @property
    def trec_name(self) -> str:
        """trec_eval's output name of this metric (``P_5``), or ``name`` where it has none."""
        return trec_eval_name(self)


_FAMILIES: dict[str, MetricFamily] = {}


def register(family: MetricFamily) -> MetricFamily:
    """Declare a metric family; a second declaration of the same name is a bug."""
    if family.family in _FAMILIES:
        raise ValueError(f"metric family {family.family!r} is registered twice")
    _FAMILIES[family.family] = family
    return family


def families() -> tuple[MetricFamily, ...]:
    """Every registered family, in registration order."""
    return tuple(_FAMILIES.values())


def _shown(f: MetricFamily) -> str:
    return {"none": f.family, "optional": f"{f.family}[@K]", "required": f"{f.family}@K"}[
        f.cutoff
    ]


def valid_names(*, ranking_only: bool = False) -> str:
    """Human-readable list of accepted names, for error messages.

    ``ranking_only``: only the metrics a TREC run can be scored on (what ``bench.evaluate``
    accepts), with their trec_eval spellings.
    """
    if not ranking_only:
        return ", ".join(_shown(f) for f in _FAMILIES.values())
    shown = []
    for f in _FAMILIES.values():
        if f.kernel_code is None:
            continue
        aliases = [a for a, (fam, _) in TREC_EVAL_ALIASES.items() if fam == f.family]
        shown.append(_shown(f) + (f" ({'/'.join(aliases)})" if aliases else ""))
    return ", ".join(shown)


def help_lines() -> list[tuple[str, str]]:
    """(accepted names, description) of every ranking metric, one entry per family."""
    rows = []
    for f in _FAMILIES.values():
        if f.kernel_code is None:
            continue
        names = [_shown(f)]
        for alias, (fam, cut) in TREC_EVAL_ALIASES.items():
            if fam == f.family:
                names.append(f"{alias}.K | {alias}_K" if cut else alias)
        rows.append((", ".join(names), f.description))
    return rows


# [0-9], not \d: int() would read other scripts' digits and the canonical name would differ
_NAME = re.compile(r"^([a-z][a-z0-9_]*)(?:@([0-9]+))?$")  # token_f1 has a digit
#: The largest cutoff: the kernels and the results schema hold K as int32.
MAX_CUTOFF = 2**31 - 1
# trec_eval: ``measure``, ``measure.K``, ``measure_K`` or ``measure.K1,K2,...``
_TREC_NAME = re.compile(r"^([A-Za-z_]+?)(?:[._]([0-9][0-9,]*))?$")

#: trec_eval measure -> (our family, whether trec_eval's name takes the cutoff). trec_eval's
#: ``ndcg`` is uncut nDCG over the whole ranking; ``ndcg_cut.K`` is our ``ndcg@K``.
TREC_EVAL_ALIASES: dict[str, tuple[str, bool]] = {
    "P": ("precision", True),
    "recall": ("recall", True),
    "ndcg_cut": ("ndcg", True),
    "ndcg": ("ndcg", False),
    "map_cut": ("map", True),
    "map": ("map", False),
    "recip_rank": ("mrr", False),
    "Rprec": ("r_precision", False),
    "success": ("hit_rate", True),
}


def trec_eval_name(spec: MetricSpec) -> str:
    """trec_eval's output name (``P_5``, ``ndcg_cut_10``, ``recip_rank``) or ``spec.name``."""
    for alias, (fam, cut) in TREC_EVAL_ALIASES.items():
        if fam == spec.family and cut == (spec.k is not None):
            return f"{alias}_{spec.k}" if cut else alias
    return spec.name


def parse_metrics(name: str, *, ranking_only: bool = False) -> list[MetricSpec]:
    """One name, in our or trec_eval's spelling, as specs; the comma form gives several.

    ``"P.5,10"`` -> [precision@5, precision@10]; ``"ndcg@5,10"`` -> [ndcg@5, ndcg@10];
    ``"recip_rank"`` -> [mrr]. ``ranking_only``: a set-level metric is unknown here (the
    error lists only ranking metrics).
    """
    text = name.strip()
    if "@" in text and "," in text:
        base, _, ks = text.partition("@")
        return [s for k in ks.split(",") for s in parse_metrics(f"{base}@{k}",
                                                                ranking_only=ranking_only)]
    trec = _TREC_NAME.match(text)
    if trec is not None and "@" not in text and trec.group(1) in TREC_EVAL_ALIASES:
        family, cut = TREC_EVAL_ALIASES[trec.group(1)]
        ks = trec.group(2)
        if cut and ks is None:
            raise UnknownMetricError(
                f"metric {name!r} needs a cutoff, e.g. {trec.group(1)}.10 (or {family}@10)")
        if not cut and ks is not None:
            raise UnknownMetricError(f"metric {name!r} takes no cutoff: use {trec.group(1)}")
        if ks is None:
            return [parse_metric(family, ranking_only=ranking_only)]
        return [parse_metric(f"{family}@{k}", ranking_only=ranking_only)
                for k in ks.split(",") if k]
    return [parse_metric(text, ranking_only=ranking_only)]


def parse_metric(name: str, *, ranking_only: bool = False) -> MetricSpec:
    """``"ndcg@10"`` -> MetricSpec(name="ndcg@10", family="ndcg", k=10, ...).

    Raises UnknownMetricError (one line, listing valid names) for unknown families, a missing
    or forbidden ``@K``, ``K < 1`` or ``K > MAX_CUTOFF``. A trec_eval spelling of one metric
    (``P_5``) is accepted; use :func:`parse_metrics` for the comma form.
    """
    match = _NAME.match(name.strip())
    fam = _FAMILIES.get(match.group(1)) if match else None
    if match is None or fam is None:
        trec = _TREC_NAME.match(name.strip())
        if trec is not None and trec.group(1) in TREC_EVAL_ALIASES and "," not in name:
            return parse_metrics(name, ranking_only=ranking_only)[0]
    if match is None or fam is None or (ranking_only and fam.kernel_code is None):
        raise UnknownMetricError(
            f"unknown metric {name!r}; valid metrics: {valid_names(ranking_only=ranking_only)}")
    k = _cutoff(name, match.group(2))
    if k is None and fam.cutoff == "required":
        raise UnknownMetricError(f"metric {name!r} needs a cutoff, e.g. {fam.family}@10")
    if k is not None and fam.cutoff == "none":
        raise UnknownMetricError(f"metric {name!r} takes no cutoff: use {fam.family}")
    if k is not None and k < 1:
        raise UnknownMetricError(f"metric {name!r}: the cutoff must be >= 1")
    canonical = fam.family if k is None else f"{fam.family}@{k}"
    return MetricSpec(
        name=canonical,
        family=fam.family,
        k=k,
        higher_is_better=fam.higher_is_better,
        unit=fam.unit,
        aggregation=fam.aggregation,
        kernel_code=fam.kernel_code,
        layer=fam.layer,
    )


def _cutoff(name: str, digits: str | None) -> int | None:
    if digits is None:
        return None
    # checked on the digits: int() of a 5000-digit string raises, and numpy cannot hold it
    if len(digits.lstrip("0")) > len(str(MAX_CUTOFF)) or int(digits) > MAX_CUTOFF:
        shown = name if len(name) <= 40 else f"{name[:37]}..."
        raise UnknownMetricError(f"metric {shown!r}: the cutoff must be <= {MAX_CUTOFF}")
    return int(digits)


def find_metric(name: str) -> MetricSpec | None:
    """parse_metric, or None for a name this registry does not know (e.g. another stage's)."""
    try:
        return parse_metric(name)
    except UnknownMetricError:
        return None


def _ranking(family: str, cutoff: Cutoff, description: str) -> None:
    register(
        MetricFamily(
            family=family,
            higher_is_better=True,
            unit="score",
            aggregation="mean",
            cutoff=cutoff,
            description=description,
            kernel_code=FAMILY_CODES[family],
        )
    )


# Ranking metrics (trec_eval semantics; see docs/metrics.md).
_ranking("ndcg", "optional", "nDCG, linear gain (trec_eval ndcg_cut at K; uncut = trec_eval ndcg)")
_ranking("ndcg_exp", "required", "nDCG@K with 2^rel - 1 gain")
_ranking("recall", "required", "|rel in top K| / |rel|")
_ranking("precision", "required", "|rel in top K| / K")
_ranking("hit_rate", "required", "1 if any relevant doc in top K")
_ranking("mrr", "optional", "1 / rank of the first relevant doc (cut at K if given)")
_ranking("map", "optional", "average precision over |rel| (cut at K if given)")
_ranking("r_precision", "none", "precision at |rel|")

# Set-level metrics (bench/metrics/setlevel.py), computed from counts, not per-query means.
for _family, _higher, _desc in (
    ("false_exclusion_rate", False,
     "queries whose every eligible gold doc a filter's predicate rules out of the corpus"),
    ("doc_false_exclusion_rate", False,
     "eligible gold docs a filter's predicate rules out of the corpus"),
    ("pool_false_exclusion_rate", False,
     "queries whose every eligible gold doc in the pool a filter removed"),
    ("pool_doc_false_exclusion_rate", False, "eligible gold docs a filter removed from the pool"),
    ("predicate_precision", True, "extracted predicates that are labelled correct"),
    ("predicate_recall", True, "labelled predicates that were extracted"),
    ("abstention_precision", True, "correct abstentions / all abstentions"),
    ("abstention_recall", True, "correct abstentions / must-abstain cases"),
    ("abstention_coverage", True, "answered / all cases"),
    ("answered_accuracy", True, "correct answers / answered cases"),
    ("abstention_hallucination_rate", False,
     "must-abstain cases answered instead of abstained / must-abstain cases"),
):
    register(MetricFamily(_family, _higher, "fraction", "ratio", "none", _desc, layer="set"))
register(
    MetricFamily(
        "ann_recall", True, "fraction", "mean", "required",
        "tie-tolerant |ANN top-K ∩ exact top-K| / K", layer="ann",
    )
)

# Answer metrics: deterministic checks (bench/metrics/answer.py), one value per query with a
# status; only `scored` rows enter a mean (no_reference / no_claims / not_applicable rows are
# counted, never averaged as 0 or 1).
for _family, _desc in (
    ("exact_match", "normalised answer equals a reference answer (SQuAD normalisation)"),
    ("token_f1", "best token F1 against the reference answers (SQuAD normalisation)"),
    ("claims_coverage", "required claims the answer covers / required claims"),
    ("number_match", "reference numbers found in the answer within tolerance / reference numbers"),
    ("identifier_match", "reference identifiers found after normalisation / reference ids"),
    ("quantity_match", "reference amounts (currency, units) matched after conversion / amounts"),
    ("answer_correct", "1 when the configured correctness rule holds (feeds answered_accuracy)"),
    ("abstained", "1 when the answer abstains (refusal patterns); coverage is 1 - its mean"),
):
    register(MetricFamily(_family, True, "fraction", "mean", "none", _desc, layer="answer"))

# LLM-judge metrics (bench/judge/): per-query values of `ok` verdicts only; invalid and
# no_claims verdicts are counted in completion accounting, never averaged.
for _family, _desc in (
    ("faithfulness", "claims supported by the context / extracted claims"),
    ("answer_relevancy", "judge rating of how well the answer addresses the question, 0..1"),
    ("context_relevance", "supplied passages the judge finds relevant / supplied passages"),
    ("citation_precision", "citations that exist in the context and support their sentence"),
    ("citation_recall", "answer sentences with a supporting citation / answer sentences"),
    ("citation_coverage", "distinct cited documents / distinct supplied documents"),
    ("refusal_correct", "1 when a must-abstain query was refused"),
    ("pairwise_preference", "1 win, 0.5 tie, 0 loss of the config against the other, both orders"),
):
    register(MetricFamily(_family, True, "fraction", "mean", "none", _desc, layer="judge"))
# Verifiers that ask no model (bench/judge/verifiers.py), run as judges: per-query values of
# `ok` verdicts; not_applicable rows (nothing to check) are counted, never averaged.
register(MetricFamily("unsupported_numbers", False, "fraction", "mean", "none",
                      "1 when the answer states a number, date or identifier absent from its "
                      "context and question (mean: the rate of such answers)", layer="judge"))
for _family, _desc in (
    ("quantity_consistency", "unit amounts matching the context after conversion and stated "
                             "calculations that hold / such checks"),
    ("structured_match", "fields of a JSON expected answer matched by the answer's JSON / fields"),
    ("nli_support", "answer sentences some context passage entails (NLI model) / sentences"),
):
    register(MetricFamily(_family, True, "fraction", "mean", "none", _desc, layer="judge"))
for _family, _desc in (
    ("position_consistency", "pairwise verdicts that agree in both presentation orders"),
    ("judge_schema_validity", "judge calls whose first raw output passed schema and validator"),
):
    register(MetricFamily(_family, True, "fraction", "ratio", "none", _desc, layer="set"))

# Context metrics (bench/context/metrics.py): the evidence in the prompt the generator saw,
# at that context's own passage count (document level, chunk-aware), per answered query.
for _family, _desc in (
    ("gold_in_context", "1 when a relevant document has a passage in the generator's context"),
    ("context_recall", "relevant documents in the context / relevant documents"),
    ("context_precision", "relevant documents in the context / distinct documents in it"),
    ("context_claim_recall", "required claims some context passage covers / required claims"),
    ("context_utilisation", "required claims covered by context and answer / by the context"),
):
    register(MetricFamily(_family, True, "fraction", "mean", "none", _desc))
# RAGChecker's generator diagnostics (bench/judge/diagnostics.py), shares of the answer's
# claims; they need a judge's claim-level entailment and are not scored without one.
for _family, _desc in (
    ("noise_sensitivity_relevant", "incorrect answer claims a relevant passage entails / claims"),
    ("noise_sensitivity_irrelevant",
     "incorrect answer claims only an irrelevant passage entails / claims"),
    ("hallucination", "incorrect answer claims no passage entails / claims"),
    ("self_knowledge", "correct answer claims no passage entails / claims (not grounded)"),
):
    register(MetricFamily(_family, False, "fraction", "mean", "none", _desc))
