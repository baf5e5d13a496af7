"""Deterministic answer checks, run before any LLM judge (docs/metrics.md "Generation and judges").

Every check returns one :class:`~bench.metrics.base.QueryValue` per (query, metric) with a
status; nothing here returns NaN. Definitions (the tests hold worked examples of each):

- **SQuAD normalisation** (:func:`normalize_answer`, the official script's
  ``normalize_answer``, v1.1 and v2.0 alike): lowercase, drop punctuation
  (``string.punctuation``), drop the articles a/an/the, collapse whitespace.
- **exact_match / token_f1 over several references** (``Query.references``: the dataset's
  ``expected_answers`` list, or its one ``expected_answer``), as SQuAD 2.0's official
  ``evaluate-v2.0.py`` computes them: references that normalise to nothing are dropped, then
  the value is the MAX over the remaining references of ``compute_exact`` (normalised strings
  equal) / ``compute_f1`` (shared tokens with multiplicity: P = common / |answer tokens|,
  R = common / |reference tokens|; when either side has no token, 1 if both have none, else
  0). An answerable query with no reference left is ``no_reference``.
- **must-abstain queries** (``must_abstain_em_f1``): ``not_applicable`` (default) leaves their
  EM/F1 out of the means, as before; ``squad2`` scores them as SQuAD 2.0 scores a no-answer
  question (gold ``[""]``): EM = F1 = 1 when the answer gives no answer, else 0. An answer
  gives no answer when it normalises to nothing or the refusal patterns detect an abstention
  ("I don't know" stands for SQuAD's empty prediction, since generators refuse in words); in
  ``squad2`` mode an abstention on an answerable query is likewise the empty prediction
  (EM = F1 = 0), so both kinds of question read the same prediction.
- **claims_coverage** = covered required claims / required claims. A claim is covered when its
  normalised tokens appear contiguously in the normalised answer, OR the token F1 between the
  claim and some answer sentence is >= ``claim_f1_threshold`` (default 0.5). A query without
  required claims is ``no_claims`` (never 1.0).
- **number_match** = reference numbers with an answer number within tolerance / reference
  numbers; |a - r| <= max(abs_tol, rel_tol * |r|). Digits only ("1,024", "3.5", "-2", "1e6");
  numbers glued to letters (x86, IPv6) are identifiers, not numbers. With several references
  (alternatives), this and the two checks below take the best reference that holds any item.
- **identifier_match** = reference identifiers present in the answer / reference identifiers.
  An identifier is a token with a letter and a digit, an underscore or ``::``, an all-caps token
  of >= 2 letters, or an all-caps word followed by a number ("RFC 1149"); it is normalised by
  case-folding and removing ``- _ . : /`` and spaces, so "RFC-1149" == "rfc 1149".
- **quantity_match** = reference amounts matched / reference amounts. An amount is a number
  with a currency (``$ € £ ¥ USD EUR GBP JPY``, optional k / million / billion) or a unit
  (bytes, bits per second, time, frequency, length, mass, percent); both sides are converted
  to the dimension's base unit (MiB -> bytes, ms -> seconds) and compared with the numeric
  tolerance. A different currency never matches.
- **abstained**: the answer matches one of the refusal patterns (case-insensitive regular
  expressions; defaults below, "I don't know" among them) or is empty.
- **answer_correct**: the first scored metric of ``correct_metrics`` is >= ``correct_threshold``.

Statuses: ``scored``; ``no_reference`` (no reference answer for EM/F1; no number / id / amount
in the reference: ``not_applicable``); ``no_claims``; ``not_applicable`` for answer-quality
metrics on must-abstain queries (EM/F1 too unless ``must_abstain_em_f1=squad2``); ``error``
when the generation itself failed.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bench.config.build import OptionError
from bench.context.base import strip_citations
from bench.data.base import Query
from bench.generation.base import Generation
from bench.metrics.base import (
    ERROR,
    NO_CLAIMS,
    NO_REFERENCE,
    NOT_APPLICABLE,
    SCORED,
    QueryValue,
)
from bench.metrics.setlevel import AbstentionScores, abstention_scores

# --------------------------------------------------------------------------- normalisation

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalisation: lower, remove punctuation, articles and extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def exact_match(answer: str, references: Sequence[str]) -> float:
    """1.0 when the normalised answer equals a normalised reference, else 0.0."""
    norm = normalize_answer(answer)
    return float(any(norm == normalize_answer(r) for r in references))


def _f1(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        return float(pred == gold)  # SQuAD: both empty -> 1, one empty -> 0
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(answer: str, references: Sequence[str]) -> float:
    """Best SQuAD token F1 of ``answer`` over ``references`` (0.0 for no references)."""
    pred = _tokens(answer)
    return max((_f1(pred, _tokens(r)) for r in references), default=0.0)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of an answer: split after . ! ? followed by space, and on newlines."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def claim_covered(answer: str, claim: str, *, f1_threshold: float = 0.5) -> bool:
    """The claim's normalised tokens appear contiguously in the answer, or some answer
    sentence has token F1 >= ``f1_threshold`` with the claim."""
    claim_tokens = _tokens(claim)
    if _contains(_tokens(answer), claim_tokens):
        return True
    return any(_f1(_tokens(s), claim_tokens) >= f1_threshold for s in split_sentences(answer))


# --------------------------------------------------------------------------- numbers

_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
_NUMBER = re.compile(rf"(?<![\w.]){_NUM}(?![\w]|\.\d)")


def _to_float(text: str) -> float:
    return float(text.replace(",", ""))


def extract_numbers(text: str) -> list[float]:
    """Stand-alone numbers of ``text`` ("1,024" -> 1024.0; "x86" has none)."""
    return [_to_float(m.group(0)) for m in _NUMBER.finditer(text)]


def within(a: float, b: float, *, rel_tol: float, abs_tol: float) -> bool:
    """|a - b| <= max(abs_tol, rel_tol * |b|), ``b`` being the reference."""
    return abs(a - b) <= max(abs_tol, rel_tol * abs(b))


def _matched(refs: Sequence[float], got: Sequence[float], rel_tol: float, abs_tol: float) -> int:
    return sum(any(within(g, r, rel_tol=rel_tol, abs_tol=abs_tol) for g in got) for r in refs)


# --------------------------------------------------------------------------- identifiers

_ID_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]*[A-Za-z0-9]|[A-Za-z0-9]")
_CAPS_NUMBER = re.compile(r"\b([A-Z]{2,})[ -](\d+)\b")
_ID_SEPARATORS = re.compile(r"[-_.:/\s]")


def normalize_identifier(text: str) -> str:
    """Case-fold and drop ``- _ . : /`` and whitespace ("RFC-1149" -> "rfc1149")."""
    return _ID_SEPARATORS.sub("", text).casefold()


def _is_identifier(tok: str) -> bool:
    has_digit = any(c.isdigit() for c in tok)
    has_alpha = any(c.isalpha() for c in tok)
    letters = [c for c in tok if c.isalpha()]
    all_caps = len(letters) >= 2 and all(c.isupper() for c in letters)
    return (has_digit and has_alpha) or "_" in tok or "::" in tok or all_caps


def extract_identifiers(text: str) -> set[str]:
    """Normalised identifiers of ``text`` (see the module docstring for the rule)."""
    pairs = _CAPS_NUMBER.findall(text)
    prefixes = {a for a, _ in pairs}  # "RFC" of "RFC 1149" is not an identifier of its own
    out = {normalize_identifier(t) for t in _ID_TOKEN.findall(text)
           if _is_identifier(t) and t not in prefixes}
    out.update(normalize_identifier(a + b) for a, b in pairs)
    return out


# --------------------------------------------------------------------------- quantities


@dataclass(frozen=True)
class Quantity:
    """An amount in its dimension's base unit (bytes, bit/s, s, Hz, m, g, %, or a currency)."""

    dimension: str
    value: float


_UNITS: dict[str, tuple[str, float]] = {}
_UNIT_TABLES: dict[str, dict[str, float]] = {
    "bytes": {"B": 1, "byte": 1, "bytes": 1, "KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9,
              "TB": 1e12, "KiB": 1024, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
              "kilobyte": 1e3, "kilobytes": 1e3, "megabyte": 1e6, "megabytes": 1e6,
              "gigabyte": 1e9, "gigabytes": 1e9, "terabyte": 1e12, "terabytes": 1e12},
    "bit/s": {"bps": 1, "bit/s": 1, "kbps": 1e3, "kbit/s": 1e3, "Mbps": 1e6, "Mbit/s": 1e6,
              "Gbps": 1e9, "Gbit/s": 1e9},
    "bits": {"bit": 1, "bits": 1},
    "seconds": {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1, "sec": 1,
                "second": 1, "seconds": 1, "min": 60, "minute": 60, "minutes": 60, "h": 3600,
                "hr": 3600, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400},
    "hertz": {"Hz": 1, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9},
    "metres": {"nm": 1e-9, "mm": 1e-3, "cm": 1e-2, "m": 1, "km": 1e3},
    "grams": {"mg": 1e-3, "g": 1, "kg": 1e3},
    "percent": {"%": 1, "percent": 1, "per cent": 1},
}
for _dim, _table in _UNIT_TABLES.items():
    for _unit, _scale in _table.items():
        _UNITS[_unit] = (_dim, float(_scale))

_CURRENCY = {"$": "USD", "USD": "USD", "€": "EUR", "EUR": "EUR", "£": "GBP", "GBP": "GBP",
             "¥": "JPY", "JPY": "JPY"}
_MULT = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}


def _alternatives(words: Sequence[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_CUR = _alternatives(list(_CURRENCY))
_MULTS = _alternatives([*_MULT, "M", "K"])
_MONEY_PREFIX = re.compile(
    rf"(?P<cur>{_CUR})\s?(?P<num>{_NUM})(?:\s?(?P<mult>{_MULTS})\b)?"
)
_MONEY_SUFFIX = re.compile(
    rf"(?<![\w.])(?P<num>{_NUM})(?:\s?(?P<mult>{_MULTS}))?\s?(?P<cur>USD|EUR|GBP|JPY|€)(?!\w)"
)
_UNIT = re.compile(rf"(?<![\w.])(?P<num>{_NUM})\s?(?P<unit>{_alternatives(list(_UNITS))})(?![\w/])")


def extract_quantities(text: str) -> list[Quantity]:
    """Money and unit amounts of ``text``, converted to base units."""
    out: list[Quantity] = []
    taken: list[tuple[int, int]] = []
    for rx in (_MONEY_PREFIX, _MONEY_SUFFIX):
        for m in rx.finditer(text):
            mult = _MULT.get((m.group("mult") or "").lower(), 1.0)
            out.append(Quantity(f"currency:{_CURRENCY[m.group('cur')]}",
                                _to_float(m.group("num")) * mult))
            taken.append(m.span())
    for m in _UNIT.finditer(text):
        if any(s <= m.start() < e for s, e in taken):
            continue
        dim, scale = _UNITS[m.group("unit")]
        out.append(Quantity(dim, _to_float(m.group("num")) * scale))
    return out


def _quantities_matched(refs: Sequence[Quantity], got: Sequence[Quantity], rel_tol: float,
                        abs_tol: float) -> int:
    return sum(
        any(g.dimension == r.dimension
            and within(g.value, r.value, rel_tol=rel_tol, abs_tol=abs_tol) for g in got)
        for r in refs
    )


# --------------------------------------------------------------------------- abstention

DEFAULT_REFUSAL_PATTERNS: tuple[str, ...] = (
    r"\bi (?:do not|don't|dont) know\b",
    r"\b(?:cannot|can't|can not|unable to) (?:answer|determine|tell|say|find)\b",
    r"\b(?:context|passages?|documents?|information provided)\b[^.]*?"
    r"\b(?:does|do|did) not (?:contain|provide|mention|include|say|specify)\b",
    r"\bnot enough information\b",
    r"\binsufficient (?:information|context)\b",
    r"\bno (?:relevant )?information (?:about|on|regarding)\b",
)


class AbstentionDetector:
    """Decides whether an answer abstains, by case-insensitive refusal patterns.

    ``patterns``: regular expressions searched anywhere in the answer (curly apostrophes are
    read as straight ones); empty list = use :data:`DEFAULT_REFUSAL_PATTERNS`.
    ``empty_is_abstention``: an empty answer gives no answer, so it counts as abstaining.
    """

    def __init__(self, *, patterns: Sequence[str] = (), empty_is_abstention: bool = True) -> None:
        compiled = []
        for i, p in enumerate(patterns or DEFAULT_REFUSAL_PATTERNS):
            try:
                compiled.append(re.compile(p, re.IGNORECASE))
            except re.error as exc:
                raise OptionError(
                    f"refusal_patterns[{i}]", f"bad regular expression: {exc}"
                ) from None
        self.patterns = tuple(c.pattern for c in compiled)
        self._compiled = tuple(compiled)
        self.empty_is_abstention = empty_is_abstention

    def abstains(self, answer: str) -> bool:
        text = answer.replace("’", "'").replace("‘", "'")
        if not text.strip():
            return self.empty_is_abstention
        return any(rx.search(text) for rx in self._compiled)


# --------------------------------------------------------------------------- per query


@dataclass(frozen=True)
class AnswerItem:
    """What the checks need of one query. ``answer`` None: the generation failed (status
    ``error`` for every metric). ``references``: reference answers, alternatives scored by
    the max over them (the dataset's ``Query.references``)."""

    query_id: str
    answer: str | None
    references: tuple[str, ...] = ()
    required_claims: tuple[str, ...] = ()
    must_abstain: bool = False


#: metric names emitted by :meth:`AnswerChecks.score`, in order
ANSWER_METRICS = (
    "exact_match", "token_f1", "claims_coverage", "number_match", "identifier_match",
    "quantity_match", "abstained", "answer_correct",
)
_CORRECTNESS_SOURCES = ("exact_match", "token_f1", "claims_coverage")


@dataclass(frozen=True)
class AbstentionReport:
    """The four abstention figures over the queries whose generation succeeded.

    ``scores.answered_accuracy`` is over answered queries with a correctness value;
    ``n_answered_unjudged`` answered answerable queries had none (no reference, no claims).
    """

    scores: AbstentionScores
    n_error: int
    n_answered_unjudged: int


class AnswerChecks:
    """The deterministic checks, configured once. Keyword-only options are its schema.

    ``rel_tol`` / ``abs_tol``: numeric tolerance of number and quantity checks;
    ``claim_f1_threshold``: sentence F1 that covers a claim; ``correct_metrics``: metrics
    tried in order for ``answer_correct`` (the first one scored decides), with
    ``correct_threshold``; ``refusal_patterns`` / ``empty_is_abstention``: see
    :class:`AbstentionDetector`; ``must_abstain_em_f1``: ``not_applicable`` or ``squad2``
    (SQuAD 2.0's no-answer scoring of must-abstain queries, module docstring).
    """

    def __init__(
        self,
        *,
        rel_tol: float = 0.01,
        abs_tol: float = 0.0,
        claim_f1_threshold: float = 0.5,
        correct_metrics: Sequence[str] = ("token_f1", "claims_coverage"),
        correct_threshold: float = 0.5,
        refusal_patterns: Sequence[str] = (),
        empty_is_abstention: bool = True,
        must_abstain_em_f1: Literal["not_applicable", "squad2"] = "not_applicable",
    ) -> None:
        if must_abstain_em_f1 not in ("not_applicable", "squad2"):
            raise OptionError("must_abstain_em_f1", "must be not_applicable or squad2, got "
                                                    f"{must_abstain_em_f1!r}")
        if rel_tol < 0 or abs_tol < 0:
            raise OptionError("rel_tol" if rel_tol < 0 else "abs_tol", "must be >= 0")
        if not 0 < claim_f1_threshold <= 1:
            raise OptionError("claim_f1_threshold", f"must be in (0, 1], got {claim_f1_threshold}")
        if not 0 <= correct_threshold <= 1:
            raise OptionError("correct_threshold", f"must be in [0, 1], got {correct_threshold}")
        bad = [m for m in correct_metrics if m not in _CORRECTNESS_SOURCES]
        if bad or not correct_metrics:
            raise OptionError("correct_metrics",
                              f"must be a non-empty list of {_CORRECTNESS_SOURCES}, got {bad}")
        self.rel_tol, self.abs_tol = rel_tol, abs_tol
        self.claim_f1_threshold = claim_f1_threshold
        self.correct_metrics = tuple(correct_metrics)
        self.correct_threshold = correct_threshold
        self.detector = AbstentionDetector(
            patterns=refusal_patterns, empty_is_abstention=empty_is_abstention
        )
        self.must_abstain_em_f1 = must_abstain_em_f1

    def cache_params(self) -> dict[str, object]:
        return {
            "rel_tol": self.rel_tol, "abs_tol": self.abs_tol,
            "claim_f1_threshold": self.claim_f1_threshold,
            "correct_metrics": list(self.correct_metrics),
            "correct_threshold": self.correct_threshold,
            "refusal_patterns": list(self.detector.patterns),
            "empty_is_abstention": self.detector.empty_is_abstention,
            "must_abstain_em_f1": self.must_abstain_em_f1,
        }

    def score_one(self, item: AnswerItem) -> list[QueryValue]:
        """One value per name of :data:`ANSWER_METRICS`, in that order."""
        q = item.query_id
        if item.answer is None:
            return [QueryValue(q, m, 0.0, ERROR) for m in ANSWER_METRICS]
        answer = strip_citations(item.answer)
        abstains = self.detector.abstains(answer)
        squad2 = self.must_abstain_em_f1 == "squad2"
        # SQuAD 2.0's empty prediction: no answer token, or (squad2) a detected abstention
        no_answer = not _tokens(answer) or (squad2 and abstains)
        got: dict[str, tuple[float, str]] = {}
        if item.must_abstain:
            for m in ANSWER_METRICS[:6]:
                got[m] = (0.0, NOT_APPLICABLE)
            if squad2:  # gold [""]: compute_exact = compute_f1 = 1 for the empty prediction
                got["exact_match"] = got["token_f1"] = (float(no_answer), SCORED)
        else:
            # evaluate-v2.0.py keeps the golds with a token after normalisation
            refs = tuple(r for r in item.references if _tokens(r))
            pred = "" if squad2 and abstains else answer
            if refs:
                got["exact_match"] = (exact_match(pred, refs), SCORED)
                got["token_f1"] = (token_f1(pred, refs), SCORED)
            else:
                got["exact_match"] = got["token_f1"] = (0.0, NO_REFERENCE)
            claims = tuple(c for c in item.required_claims if _tokens(c))
            if claims:
                covered = sum(claim_covered(answer, c, f1_threshold=self.claim_f1_threshold)
                              for c in claims)
                got["claims_coverage"] = (covered / len(claims), SCORED)
            else:
                got["claims_coverage"] = (0.0, NO_CLAIMS)
            got["number_match"] = self._best(
                [extract_numbers(r) for r in refs], extract_numbers(answer),
                lambda r, g: _matched(r, g, self.rel_tol, self.abs_tol))
            got["identifier_match"] = self._best(
                [sorted(extract_identifiers(r)) for r in refs],
                sorted(extract_identifiers(answer)), lambda r, g: len(set(r) & set(g)))
            got["quantity_match"] = self._best(
                [extract_quantities(r) for r in refs], extract_quantities(answer),
                lambda r, g: _quantities_matched(r, g, self.rel_tol, self.abs_tol))
        got["abstained"] = (float(abstains), SCORED)
        got["answer_correct"] = self._correct(item, got)
        return [QueryValue(q, m, *got[m]) for m in ANSWER_METRICS]

    def score(self, items: Sequence[AnswerItem]) -> list[QueryValue]:
        """Every check for every item: ``len(items) * len(ANSWER_METRICS)`` values."""
        return [v for item in items for v in self.score_one(item)]

    @staticmethod
    def _best(per_ref, got, count) -> tuple[float, str]:  # type: ignore[no-untyped-def]
        """Matched / reference items of the best reference that has any (references are
        alternatives, as for EM/F1); ``not_applicable`` when none has one."""
        fractions = [count(r, got) / len(r) for r in per_ref if r]
        if not fractions:
            return 0.0, NOT_APPLICABLE
        return max(fractions), SCORED

    def _correct(self, item: AnswerItem, got: dict[str, tuple[float, str]]) -> tuple[float, str]:
        if item.must_abstain:
            return 0.0, NOT_APPLICABLE
        for m in self.correct_metrics:
            value, status = got[m]
            if status == SCORED:
                return float(value >= self.correct_threshold), SCORED
        return 0.0, NO_REFERENCE

    def abstention(self, items: Sequence[AnswerItem],
                   values: Sequence[QueryValue] | None = None) -> AbstentionReport:
        """Abstention precision / recall / coverage / answered accuracy (docs/metrics.md), reusing
        :func:`bench.metrics.setlevel.abstention_scores`. ``values``: the output of
        :meth:`score` for ``items`` (computed when omitted)."""
        values = self.score(items) if values is None else values
        by_key = {(v.query_id, v.metric): v for v in values}
        ok_items = [i for i in items if i.answer is not None]
        abstained = [by_key[(i.query_id, "abstained")].value == 1.0 for i in ok_items]
        must = [i.must_abstain for i in ok_items]
        correct_v = [by_key[(i.query_id, "answer_correct")] for i in ok_items]
        correct = [v.status == SCORED and v.value == 1.0 for v in correct_v]
        base = abstention_scores(abstained, must, correct)
        # answered accuracy only over answered cases whose correctness is known
        judged = [not a and (m or v.status == SCORED)
                  for a, m, v in zip(abstained, must, correct_v, strict=True)]
        n_judged = sum(judged)
        n_right = sum(j and c for j, c in zip(judged, correct, strict=True))
        scores = AbstentionScores(
            precision=base.precision, recall=base.recall, coverage=base.coverage,
            answered_accuracy=n_right / n_judged if n_judged else None,
            n=base.n, n_abstained=base.n_abstained, n_must_abstain=base.n_must_abstain,
            n_answered=base.n_answered,
        )
        return AbstentionReport(scores, len(items) - len(ok_items), base.n_answered - n_judged)



def answer_items(queries: Sequence[Query], generations: Sequence[Generation]) -> list[AnswerItem]:
    """Pair golden queries with their generations (same order); a generation whose status is
    not ``ok`` gives ``answer=None``."""
    if len(queries) != len(generations):
        raise ValueError("queries and generations differ in length")
    return [
        AnswerItem(
            query_id=q.query_id,
            answer=g.text if g.status == "ok" else None,
            references=q.references,
            required_claims=q.required_claims,
            must_abstain=q.must_abstain,
        )
        for q, g in zip(queries, generations, strict=True)
    ]
