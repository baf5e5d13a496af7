"""Verifiers that ask no model: unsupported numbers, quantity consistency, structured answers,
the NLI interface with its lexical stand-in, and their place in a judge suite."""

from __future__ import annotations

import json

import pytest

from bench.context.base import Context, ContextPassage
from bench.judge.base import OK, JudgeItem
from bench.judge.suite import JudgeSuite, pointwise_judges
from bench.judge.verifiers import (
    LexicalEntailment,
    NLISupport,
    QuantityConsistency,
    StructuredMatch,
    UnsupportedNumbers,
    calculations,
    compare_fields,
    extract_dates,
)
from bench.metrics.base import ERROR, NOT_APPLICABLE
from bench.metrics.registry import find_metric
from tests.judge.scripted import ScriptedGenerator


def _ctx(*texts: str) -> Context:
    return Context("q", "question", tuple(ContextPassage(f"d{i}", 0, t, i + 1)
                                          for i, t in enumerate(texts)), (), 10, len(texts))


def _item(answer: str | None, *texts: str, query: str = "question",
          reference: str | None = None, context: bool = True) -> JudgeItem:
    return JudgeItem("q", query, answer, _ctx(*texts) if context else None,
                     reference=reference)


def test_dates_in_three_forms_are_one_date():
    found, rest = extract_dates("on 1999-03-03, 3 March 1999 and March 3, 1999.")
    assert found == {(1999, 3, 3)}
    assert "1999" not in rest


def test_unsupported_number_date_and_identifier_are_flagged():
    v = UnsupportedNumbers().check(_item(
        "RFC 2549 from 1 April 1999 lists 1,024 hosts and 7 gateways [doc:d0].",
        "RFC 1149 was published on 1 April 1990. It lists 1024 hosts."))
    assert v.status == OK and v.score("unsupported_numbers") == 1.0
    got = json.loads(v.detail)
    assert got == {"numbers": [7.0], "dates": ["1999-04-01"], "identifiers": ["rfc2549"],
                   "flagged": "not in the context: 7 | 1999-04-01 | rfc2549"}
    # judgements.parquet's failure mode and rationale of the verdict
    from bench.judge.base import failure_mode

    assert failure_mode(v) == ("flagged", "not in the context: 7 | 1999-04-01 | rfc2549")


def test_answer_whose_numbers_are_all_in_context_or_question_is_not_flagged():
    v = UnsupportedNumbers().check(_item(
        "RFC 1149 lists 1,024 hosts; it was published 1990-04-01.",
        "RFC 1149 was published on April 1, 1990. It lists 1024 hosts.", query="What is RFC 1149?"))
    assert v.score("unsupported_numbers") == 0.0
    assert not any(json.loads(v.detail).values())
    from bench.judge.base import failure_mode

    assert failure_mode(v) == ("", "")


def test_closed_book_and_missing_answers():
    ver = UnsupportedNumbers()
    [na, err] = ver.judge([_item("42", context=False), _item(None, "x")])
    assert (na.status, err.status) == (NOT_APPLICABLE, ERROR)


def test_rel_tol_lets_a_rounded_number_pass():
    item = _item("about 3.14 units", "pi is 3.14159")
    assert UnsupportedNumbers().check(item).score("unsupported_numbers") == 1.0
    assert UnsupportedNumbers(rel_tol=0.01).check(item).score("unsupported_numbers") == 0.0


def test_calculations_hold_or_not():
    assert calculations("3 + 4 = 7, 2 x 512 is 1024, 10 / 4 = 3 and 25% of 80 is 20", 0.0) == [
        ("3 + 4 = 7", True), ("2 x 512 is 1024", True), ("10 / 4 = 3", False),
        ("25% of 80 is 20", True)]


def test_quantity_consistency_converts_units_and_checks_arithmetic():
    v = QuantityConsistency().check(_item(
        "The disk holds 2048 MB, the cable is 3 km long and 3 + 4 = 8.",
        "A 2 GB disk and a 3000 m cable."))
    checks = json.loads(v.detail)["checks"]
    # 2048 MB vs 2 GB: 2.4 % apart, inside rel_tol 0.03; 3 km = 3000 m; 3 + 4 != 8
    assert [c["consistent"] for c in checks] == [True, True, False]
    assert v.score("quantity_consistency") == pytest.approx(2 / 3)
    strict = QuantityConsistency(rel_tol=0.0).check(_item("2048 MB", "2 GB"))
    assert strict.score("quantity_consistency") == 0.0


def test_quantity_without_counterpart_is_not_applicable():
    v = QuantityConsistency().check(_item("It weighs 5 kg.", "It is 3 m long."))
    assert v.status == NOT_APPLICABLE


def test_structured_answer_compared_field_by_field():
    ref = json.dumps({"name": "RFC 1149", "year": 1990, "authors": ["Waitzman"],
                      "meta": {"status": "Experimental"}})
    v = StructuredMatch().check(_item(
        'Here: {"name": "rfc 1149", "year": 1991, "authors": ["waitzman"], '
        '"meta": {"status": "experimental"}, "pages": 2}', reference=ref))
    got = json.loads(v.detail)
    assert got["fields"] == {"name": "match", "year": "mismatch", "authors": "match",
                             "meta.status": "match"}
    assert got["extra"] == ["pages"]
    assert v.score("structured_match") == 3 / 4


def test_structured_without_json_answer_scores_zero_and_string_reference_is_na():
    assert compare_fields({"a": 1, "b": 2}, None, 0.0) == {"a": "missing", "b": "missing"}
    v = StructuredMatch().check(_item("no json here", reference='{"a": 1}'))
    assert v.score("structured_match") == 0.0
    assert StructuredMatch().check(_item("x", reference="Paris")).status == NOT_APPLICABLE


def test_lexical_entailment_is_containment_of_content_words():
    [a, b] = LexicalEntailment().entailment([("The cat sat on the mat.", "The cat sat."),
                                             ("The cat sat on the mat.", "A dog barked.")])
    assert (a, b) == (1.0, 0.0)


def test_nli_support_counts_entailed_sentences_and_says_plumbing():
    v = NLISupport().check(_item("The cat sat. A dog barked loudly.",
                                 "The cat sat on the mat.", "Birds sing."))
    assert v.score("nli_support") == 1 / 2
    assert json.loads(v.detail)["supported"] == [True, False]
    assert NLISupport().cache_params()["plumbing_check"] is True


def test_verifiers_are_declared_metrics_and_suite_members():
    for name in ("unsupported_numbers", "quantity_consistency", "structured_match",
                 "nli_support"):
        assert find_metric(name) is not None and name in pointwise_judges()
    assert find_metric("unsupported_numbers").higher_is_better is False
    gen = ScriptedGenerator(lambda r: "unused")
    suite = JudgeSuite(generator=gen, judges=["unsupported_numbers", "structured_match"])
    vs = suite.judge([_item("7 hosts", "3 hosts", reference='{"n": 7}')])
    assert [(v.judge, v.status) for v in vs] == [("unsupported_numbers", OK),
                                                ("structured_match", OK)]
    assert gen.requests == []  # no model asked


def test_cross_encoder_wrapper_takes_the_entailment_label_of_a_softmax(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The wrapper around a sentence-transformers NLI cross-encoder, on a stand-in model
    object (no weights offline): label order from ``id2label``, softmax over the logits."""
    import math
    import types

    import numpy as np

    class FakeCrossEncoder:
        def __init__(self, name: str, device: str) -> None:
            labels = {0: "contradiction", 1: "entailment", 2: "neutral"}
            self.model = types.SimpleNamespace(config=types.SimpleNamespace(id2label=labels))

        def predict(self, pairs, batch_size: int):  # type: ignore[no-untyped-def]
            return np.array([[0.0, math.log(3.0), 0.0] for _ in pairs])

    import sentence_transformers

    from bench.judge.verifiers import CrossEncoderNLI

    monkeypatch.setattr(sentence_transformers, "CrossEncoder", FakeCrossEncoder)
    nli = CrossEncoderNLI("fake-nli")
    # softmax([0, ln 3, 0]) = (1, 3, 1) / 5: entailment 3/5
    assert nli.entailment([("p", "h"), ("p2", "h2")]) == pytest.approx([0.6, 0.6])
    assert nli.entailment([]) == []
    v = NLISupport(threshold=0.5)
    v.nli = nli  # the verifier reads whichever EntailmentModel it holds
    assert v.check(_item("One sentence.", "p")).score("nli_support") == 1.0


def test_a_suite_with_a_verifier_repeats_it_unchanged() -> None:
    from bench.judge.repeats import RepeatedJudge

    gen = ScriptedGenerator(lambda r: "unused")
    suite = JudgeSuite(generator=gen, judges=["unsupported_numbers"])
    vs = RepeatedJudge(suite, 2).judge([_item("7 hosts", "3 hosts")])
    assert [(v.repeat, v.score("unsupported_numbers")) for v in vs] == [(0, 1.0), (1, 1.0)]
