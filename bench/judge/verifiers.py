"""Verifiers that are not LLMs: deterministic checks of an answer against its context.

They run as judges (``judge=unsupported_numbers``, or in a suite beside the LLM judges:
``judge.judges=[faithfulness, unsupported_numbers, quantity_consistency]``), return one
``Verdict`` per answer and ask no model, so they need no rubric and no calibration record
before a release gate may read them.

- ``unsupported_numbers`` (lower is better): 1 when the answer states a number, a date or an
  identifier that appears nowhere in its context nor in the question, else 0; its mean is
  the config's rate of answers with an unsupported number. The verdict's detail lists them.
  Numbers compare as values ("1,024" = "1024"), dates as (year, month, day) in ISO or
  "3 March 1999" / "March 3, 1999" form, identifiers after ``normalize_identifier``.
  Citation tags are ignored. A closed-book answer (no context) is ``not_applicable``.
- ``quantity_consistency``: the share of the answer's checkable quantities that are
  consistent: an amount with a unit must equal, after unit conversion
  (``bench.metrics.answer.extract_quantities``), an amount of the same dimension in the
  context when the context states any amount of that dimension; a stated calculation
  ("3 + 4 = 7", "2 x 512 is 1024", "25% of 80 is 20") must hold. Nothing to check:
  ``not_applicable``.
- ``structured_match``: for a query whose expected answer is a JSON object, the first JSON
  object in the answer compared field by field (nested fields by dotted path; numbers within
  ``rel_tol``, strings after SQuAD normalisation, lists as sets): matching fields / expected
  fields, each field's outcome in the detail. Other queries: ``not_applicable``.
- ``nli_support``: answer sentences that some context passage entails / answer sentences,
  scored by an :class:`EntailmentModel` — a cross-encoder NLI model
  (``model: cross-encoder/nli-deberta-v3-xsmall``, sentence-transformers, locally cached)
  or the offline stand-in ``model: lexical`` (content-word containment). The stand-in is a
  PLUMBING CHECK of the interface, not natural-language inference: it cannot see negation or
  paraphrase, and its figures must not be read as hallucination rates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bench.config.build import OptionError
from bench.context.base import Context, strip_citations
from bench.generation.base import Generator
from bench.judge.base import OK, JudgeItem, Verdict
from bench.judge.llm import detail
from bench.metrics.answer import (
    extract_identifiers,
    extract_numbers,
    extract_quantities,
    normalize_answer,
    split_sentences,
    within,
)
from bench.metrics.base import ERROR, NOT_APPLICABLE


class Verifier:
    """A judge that asks no model (``bench.judge.base.Judge``): ``check(item)`` gives one
    answer's verdict; ``judge`` maps it over the batch (an answer never generated is
    ``error``). Subclasses set ``name``, ``metrics`` and ``check``."""

    name = "verifier"
    metrics: tuple[str, ...] = ()
    #: bump when a verifier's rule changes what it reports (part of the cache key)
    version = "1"

    def __init__(self, *, generator: Generator | None = None) -> None:
        # the pipeline hands every judge the judge model; a verifier asks none
        del generator

    def cache_params(self) -> dict[str, object]:
        return {"verifier": self.name, "version": self.version, **self.options()}

    def options(self) -> dict[str, object]:
        return {}

    def check(self, item: JudgeItem) -> Verdict:
        raise NotImplementedError  # each verifier implements it

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        return [Verdict(it.query_id, self.name, ERROR, (), ()) if it.answer is None
                else self.check(it) for it in items]

    def _na(self, item: JudgeItem, why: str) -> Verdict:
        return Verdict(item.query_id, self.name, NOT_APPLICABLE, (), (), detail({"why": why}))

    def _ok(self, item: JudgeItem, value: float, info: dict[str, Any]) -> Verdict:
        return Verdict(item.query_id, self.name, OK, ((self.metrics[0], value),), (),
                       detail(info))


def context_text(context: Context | None) -> str:
    return "\n".join(p.text for p in context.passages) if context is not None else ""


# --------------------------------------------------------------------------- dates

_MONTHS = {m: i for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"), start=1)}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MON})\.?,?\s+(\d{{4}})\b", re.I)
_MDY = re.compile(rf"\b({_MON})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)


def extract_dates(text: str) -> tuple[set[tuple[int, int, int]], str]:
    """Dates of ``text`` as (year, month, day), and the text with them blanked out (so their
    day and year are not checked again as numbers)."""
    found: set[tuple[int, int, int]] = set()

    def iso(m: re.Match[str]) -> str:
        found.add((int(m[1]), int(m[2]), int(m[3])))
        return " "

    def dmy(m: re.Match[str]) -> str:
        found.add((int(m[3]), _MONTHS[m[2].lower()], int(m[1])))
        return " "

    def mdy(m: re.Match[str]) -> str:
        found.add((int(m[3]), _MONTHS[m[1].lower()], int(m[2])))
        return " "

    text = _ISO.sub(iso, text)
    text = _DMY.sub(dmy, text)
    text = _MDY.sub(mdy, text)
    return found, text


_CAPS_NUMBER = re.compile(r"\b[A-Z]{2,}[ -]\d+\b")


def checked_rel_tol(rel_tol: float) -> float:
    """A verifier's ``rel_tol`` option (relative tolerance of a numeric match), checked once
    for every verifier that takes one: a negative value is the option's one-line error."""
    if rel_tol < 0:
        raise OptionError("rel_tol", f"must be >= 0, got {rel_tol}")
    return rel_tol


class UnsupportedNumbers(Verifier):
    """Options: ``rel_tol`` (a number is supported by a context number within this relative
    tolerance; 0: equal values), ``identifiers`` (check identifiers too), ``dates``."""

    name = "unsupported_numbers"
    metrics = ("unsupported_numbers",)

    def __init__(self, *, generator: Generator | None = None, rel_tol: float = 0.0,
                 identifiers: bool = True, dates: bool = True) -> None:
        super().__init__(generator=generator)
        self.rel_tol = checked_rel_tol(rel_tol)
        self.identifiers = identifiers
        self.dates = dates

    def options(self) -> dict[str, object]:
        return {"rel_tol": self.rel_tol, "identifiers": self.identifiers, "dates": self.dates}

    def unsupported(self, answer: str, sources: str) -> dict[str, list[Any]]:
        """What ``answer`` states that ``sources`` does not: numbers, dates, identifiers."""
        a_dates, a_rest = extract_dates(answer) if self.dates else (set(), answer)
        s_dates = extract_dates(sources)[0] if self.dates else set()
        s_nums = extract_numbers(sources)
        # "RFC 2549" is an identifier: its number is not checked twice
        nums = [x for x in extract_numbers(_CAPS_NUMBER.sub(" ", a_rest)
                                           if self.identifiers else a_rest)
                if not any(within(x, s, rel_tol=self.rel_tol, abs_tol=0.0) for s in s_nums)]
        out: dict[str, list[Any]] = {"numbers": sorted(set(nums)),
                                     "dates": sorted(f"{y:04d}-{m:02d}-{d:02d}"
                                                     for y, m, d in a_dates - s_dates)}
        if self.identifiers:
            # an identifier made of digits only is a number, checked above
            ids = {i for i in extract_identifiers(a_rest) if not i.isdigit()}
            out["identifiers"] = sorted(ids - extract_identifiers(sources))
        return out

    def check(self, item: JudgeItem) -> Verdict:
        if item.context is None:
            return self._na(item, "closed-book answer: no context to check against")
        answer = strip_citations(item.answer or "")
        found = self.unsupported(answer, f"{item.query}\n{context_text(item.context)}")
        shown = [f"{x:g}" if isinstance(x, float) else str(x) for v in found.values() for x in v]
        info: dict[str, Any] = {**found, "flagged": ("not in the context: " + " | ".join(shown)
                                                     if shown else "")}
        return self._ok(item, 1.0 if shown else 0.0, info)


# --------------------------------------------------------------------------- quantities

_N = r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?"
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "x": lambda a, b: a * b, "×": lambda a, b: a * b, "/": lambda a, b: a / b,
        "÷": lambda a, b: a / b}
_CALC = re.compile(rf"(?<![\w.])({_N})\s*([-+*x×/÷])\s*({_N})\s*(?:=|is|equals|makes)\s*"
                   rf"({_N})(?![\w]|\.\d)")
_PERCENT_OF = re.compile(rf"(?<![\w.])({_N})\s?%\s+of\s+({_N})\s+(?:=|is|equals|makes)\s+"
                         rf"({_N})(?![\w]|\.\d)")


def _f(s: str) -> float:
    return float(s.replace(",", ""))


def calculations(text: str, rel_tol: float) -> list[tuple[str, bool]]:
    """Each stated calculation of ``text`` and whether it holds (within ``rel_tol``)."""
    out = []
    for m in _CALC.finditer(text):
        a, op, b, c = _f(m[1]), m[2], _f(m[3]), _f(m[4])
        if op in "/÷" and b == 0:
            out.append((m[0], False))
            continue
        out.append((m[0], within(_OPS[op](a, b), c, rel_tol=rel_tol, abs_tol=1e-9)))
    for m in _PERCENT_OF.finditer(text):
        p, base, c = _f(m[1]), _f(m[2]), _f(m[3])
        out.append((m[0], within(p / 100 * base, c, rel_tol=rel_tol, abs_tol=1e-9)))
    return out


class QuantityConsistency(Verifier):
    """Options: ``rel_tol`` (relative tolerance of a unit conversion or a calculation; the
    default 0.03 lets 1 GiB match "1.07 GB" but not "1 GB" against "2 GB")."""

    name = "quantity_consistency"
    metrics = ("quantity_consistency",)

    def __init__(self, *, generator: Generator | None = None, rel_tol: float = 0.03) -> None:
        super().__init__(generator=generator)
        self.rel_tol = checked_rel_tol(rel_tol)

    def options(self) -> dict[str, object]:
        return {"rel_tol": self.rel_tol}

    def check(self, item: JudgeItem) -> Verdict:
        answer = strip_citations(item.answer or "")
        checks: list[dict[str, Any]] = []
        ctx = extract_quantities(context_text(item.context))
        dims = {q.dimension for q in ctx}
        for q in extract_quantities(answer):
            if q.dimension not in dims:
                continue  # nothing in the context to convert it against
            ok = any(c.dimension == q.dimension and within(q.value, c.value, rel_tol=self.rel_tol,
                                                           abs_tol=0.0) for c in ctx)
            checks.append({"kind": "unit", "dimension": q.dimension, "value": q.value,
                           "consistent": ok})
        for text, ok in calculations(answer, self.rel_tol):
            checks.append({"kind": "arithmetic", "text": text, "consistent": ok})
        if not checks:
            return self._na(item, "no quantity with a counterpart in the context, no calculation")
        good = sum(c["consistent"] for c in checks)
        return self._ok(item, good / len(checks), {"checks": checks})


# --------------------------------------------------------------------------- structured


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (None: none parses)."""
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch != "{":
            continue
        try:
            obj, _ = dec.raw_decode(text[i:])
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def _same(expected: Any, got: Any, rel_tol: float) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return within(float(got), float(expected), rel_tol=rel_tol, abs_tol=0.0)
    if isinstance(expected, str) and isinstance(got, str):
        return normalize_answer(expected) == normalize_answer(got)
    if isinstance(expected, list) and isinstance(got, list):
        def norm(xs: list[Any]) -> set[str]:
            return {normalize_answer(x) if isinstance(x, str) else json.dumps(x, sort_keys=True)
                    for x in xs}
        return norm(expected) == norm(got)
    return bool(expected == got)


def compare_fields(expected: dict[str, Any], got: dict[str, Any] | None, rel_tol: float
                   ) -> dict[str, str]:
    """Per expected field (dotted path): ``match``, ``mismatch`` or ``missing``."""
    want = _flatten(expected)
    have = _flatten(got) if got else {}
    return {k: ("missing" if k not in have else "match" if _same(v, have[k], rel_tol)
                else "mismatch") for k, v in want.items()}


class StructuredMatch(Verifier):
    """Options: ``rel_tol`` (numeric fields)."""

    name = "structured_match"
    metrics = ("structured_match",)

    def __init__(self, *, generator: Generator | None = None, rel_tol: float = 0.0) -> None:
        super().__init__(generator=generator)
        self.rel_tol = checked_rel_tol(rel_tol)

    def options(self) -> dict[str, object]:
        return {"rel_tol": self.rel_tol}

    def check(self, item: JudgeItem) -> Verdict:
        expected = first_json_object(item.reference or "")
        if expected is None or not (item.reference or "").lstrip().startswith("{"):
            return self._na(item, "the expected answer is not a JSON record")
        got = first_json_object(item.answer or "")
        fields = compare_fields(expected, got, self.rel_tol)
        extra = sorted(set(_flatten(got)) - set(fields)) if got else []
        score = sum(v == "match" for v in fields.values()) / len(fields)
        return self._ok(item, score, {"fields": fields, "extra": extra,
                                      "answer_has_json": got is not None})


# --------------------------------------------------------------------------- NLI


class EntailmentModel(Protocol):
    """Scores (premise, hypothesis) pairs: the probability that the premise entails the
    hypothesis, in [0, 1], one per pair, same order."""

    @property
    def name(self) -> str: ...

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> list[float]: ...


_STOP = frozenset(normalize_answer(
    "is are was were be been of in on at to for with by from and or as that this it its "
    "which who what when where how can does do has have had not no").split())


@dataclass(frozen=True)
class LexicalEntailment:
    """Offline stand-in: the share of the hypothesis's content words found in the premise.
    A PLUMBING CHECK of the NLI interface, not inference (module docstring)."""

    name: str = "lexical"

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        out = []
        for premise, hyp in pairs:
            words = [w for w in normalize_answer(hyp).split() if w not in _STOP]
            have = set(normalize_answer(premise).split())
            out.append(sum(w in have for w in words) / len(words) if words else 0.0)
        return out


class CrossEncoderNLI:
    """A sentence-transformers NLI cross-encoder (e.g. cross-encoder/nli-deberta-v3-xsmall):
    softmax over its labels, the ``entailment`` label's probability. Loaded from the local
    Hugging Face cache (``HF_HUB_OFFLINE=1`` runs never download)."""

    def __init__(self, model: str, *, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:  # pragma: no cover - the extra is part of the default install
            from bench.errors import MissingDependencyError

            raise MissingDependencyError("sentence-transformers", "rerank",
                                         "an NLI cross-encoder") from None
        self.name = model
        self.batch_size = batch_size
        self.model = CrossEncoder(model, device=device)
        labels = {str(v).lower(): int(k) for k, v in
                  self.model.model.config.id2label.items()}
        if "entailment" not in labels:
            raise OptionError("model", f"{model} has no 'entailment' label: {sorted(labels)}")
        self.entail = labels["entailment"]

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        import numpy as np

        logits = np.asarray(self.model.predict(list(pairs), batch_size=self.batch_size))
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return [float(x) for x in (z / z.sum(axis=1, keepdims=True))[:, self.entail]]


class NLISupport(Verifier):
    """Options: ``model`` (``lexical``: the offline stand-in; else a cross-encoder NLI model
    name), ``threshold`` (a sentence is supported when some passage entails it with at least
    this probability), ``device``."""

    name = "nli_support"
    metrics = ("nli_support",)

    def __init__(self, *, generator: Generator | None = None, model: str = "lexical",
                 threshold: float = 0.5, device: str = "cpu") -> None:
        super().__init__(generator=generator)
        if not 0.0 <= threshold <= 1.0:
            raise OptionError("threshold", f"must be in [0, 1], got {threshold}")
        self.model_name = model
        self.threshold = threshold
        self.nli: EntailmentModel = (LexicalEntailment() if model == "lexical"
                                     else CrossEncoderNLI(model, device=device))

    def options(self) -> dict[str, object]:
        return {"model": self.model_name, "threshold": self.threshold,
                "plumbing_check": self.model_name == "lexical"}

    def check(self, item: JudgeItem) -> Verdict:
        if item.context is None or not item.context.passages:
            return self._na(item, "closed-book answer: no passage to entail it")
        sentences = split_sentences(strip_citations(item.answer or ""))
        if not sentences:
            return self._na(item, "no sentence to check")
        passages = [p.text for p in item.context.passages]
        probs = self.nli.entailment([(p, s) for s in sentences for p in passages])
        best = [max(probs[i * len(passages):(i + 1) * len(passages)])
                for i in range(len(sentences))]
        supported = [b >= self.threshold for b in best]
        return self._ok(item, sum(supported) / len(sentences), {
            "model": self.nli.name, "sentences": sentences,
            "entailment": [round(b, 4) for b in best], "supported": supported})
