"""Deterministic answer checks: worked examples computed by hand."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from bench.app import CONF_DIR
from bench.config.build import build
from bench.errors import ConfigError
from bench.metrics.answer import (
    ANSWER_METRICS,
    AbstentionDetector,
    AnswerChecks,
    AnswerItem,
    Quantity,
    claim_covered,
    exact_match,
    extract_identifiers,
    extract_numbers,
    extract_quantities,
    normalize_answer,
    token_f1,
)
from bench.metrics.base import QueryValue
from bench.metrics.registry import parse_metric


def test_squad_normalisation_and_exact_match() -> None:
    assert normalize_answer("The  Cat's hat, a BIG one!") == "cats hat big one"
    assert exact_match("The Cat!", ["cat"]) == 1.0
    assert exact_match("a cat", ["dog", "the cat"]) == 1.0
    assert exact_match("cats", ["cat"]) == 0.0


def test_token_f1_worked_example() -> None:
    # pred tokens [cat, sat, on, mat] (articles dropped), gold [cat, sat, on, red, mat]:
    # common 4, P = 4/4, R = 4/5, F1 = 2 * 1 * 0.8 / 1.8
    assert token_f1("the cat sat on the mat", ["a cat sat on a red mat"]) == pytest.approx(
        2 * 1 * (4 / 5) / (1 + 4 / 5))
    # multiplicity: common = min(2, 1) + min(1, 2) = 2, P = R = 2/3
    assert token_f1("cat cat dog", ["cat dog dog"]) == pytest.approx(2 / 3)
    # the best reference wins; both empty -> 1, one empty -> 0
    assert token_f1("cat", ["dog", "cat"]) == 1.0
    assert token_f1("the", ["a"]) == 1.0 and token_f1("the", ["cat"]) == 0.0


def test_claims_coverage_worked_example() -> None:
    answer = ("Manchester encoding is a method of transmitting bits, used on Ethernet. "
              "The receiver synchronises with the sender.")
    # contiguous in the normalised answer
    assert claim_covered(answer, "Manchester encoding is a method of transmitting bits.")
    # sentence 2 [receiver synchronises with sender] vs claim [it synchronises receiver with
    # sender]: common 4, P = 1, R = 4/5, F1 = 8/9 >= 0.5
    assert claim_covered(answer, "It synchronises the receiver with the sender.")
    assert not claim_covered(answer, "It synchronises the receiver with the sender.",
                             f1_threshold=0.9)
    assert not claim_covered(answer, "It was invented in 1949.")


def test_numbers_identifiers_quantities() -> None:
    assert extract_numbers("x86 has 1,024 and 3.5 or -2 and 1e6. End 7.") == [
        1024.0, 3.5, -2.0, 1e6, 7.0]
    assert extract_identifiers("See RFC 1149 and IPv6, foo_bar, std::vector.") == {
        "rfc1149", "ipv6", "foobar", "stdvector"}
    assert extract_identifiers("rfc-1149") == {"rfc1149"}
    assert extract_quantities("512 MiB at 2.4 GHz for $5 million, 10 ms, 50%") == [
        Quantity("currency:USD", 5e6), Quantity("bytes", 512 * 2**20),
        Quantity("hertz", 2.4e9), Quantity("seconds", 10 * 1e-3), Quantity("percent", 50.0)]


def _values(checks: AnswerChecks, item: AnswerItem) -> dict[str, tuple[float, str]]:
    return {v.metric: (v.value, v.status) for v in checks.score_one(item)}


def test_per_query_values_with_tolerances() -> None:
    ref = "It has 1,024 entries, RFC 1149 and IPv6, 512 MiB at 2.4 GHz for $5 million."
    answer = ("About 1030 entries [doc:d1], rfc-1149, 0.5 GiB, 2400 MHz, 5,000,000 EUR and "
              "3 more.")
    got = _values(AnswerChecks(rel_tol=0.01), AnswerItem("q", answer, (ref,)))
    # ref numbers 1024, 1149, 512, 2.4, 5: |1030 - 1024| = 6 <= 0.01 * 1024; 1149 matched
    # by itself; 512 / 2.4 / 5 have no answer number within 1 % -> 2 of 5
    assert got["number_match"] == (2 / 5, "scored")
    assert got["identifier_match"] == (1 / 2, "scored")  # rfc1149 yes, ipv6 no
    # bytes 0.5 GiB == 512 MiB, 2400 MHz == 2.4 GHz, EUR is not USD -> 2 of 3
    assert got["quantity_match"] == (2 / 3, "scored")
    strict = _values(AnswerChecks(rel_tol=0.001), AnswerItem("q", answer, (ref,)))
    assert strict["number_match"] == (1 / 5, "scored")  # 6 > 0.001 * 1024
    assert got["claims_coverage"] == (0.0, "no_claims")
    assert [m for m in got] == list(ANSWER_METRICS)


def test_abstention_detector() -> None:
    d = AbstentionDetector()
    assert d.abstains("I don’t know.") and d.abstains("The context does not contain it.")
    assert d.abstains("") and not AbstentionDetector(empty_is_abstention=False).abstains(" ")
    assert not d.abstains("X is a cat.")
    custom = AbstentionDetector(patterns=[r"^no answer$"])
    assert custom.abstains("No answer") and not custom.abstains("I don't know")
    with pytest.raises(ConfigError) as err:
        build(OmegaConf.create({"_target_": "bench.metrics.answer.AnswerChecks",
                                "refusal_patterns": ["("]}), "answers")
    assert err.value.key == "answers.refusal_patterns[0]"


def test_abstention_figures_worked_example() -> None:
    checks = AnswerChecks()
    items = [
        AnswerItem("q1", "The cat sat.", ("the cat sat",)),  # answered, correct
        AnswerItem("q2", "A dog.", ("the cat sat",)),  # answered, wrong
        AnswerItem("q3", "I don't know.", ("the cat sat",)),  # abstained, should not have
        AnswerItem("q4", "I don't know.", must_abstain=True),  # correct abstention
        AnswerItem("q5", "It is a cat.", must_abstain=True),  # answered, must abstain
        AnswerItem("q6", None, ("x",)),  # generation failed: excluded, counted
        AnswerItem("q7", "Something.", ()),  # answered, no reference: unjudged
    ]
    rep = checks.abstention(items)
    s = rep.scores
    assert s.precision == 1 / 2  # abstained q3, q4; correct q4
    assert s.recall == 1 / 2  # must abstain q4, q5
    assert s.coverage == 4 / 6  # answered q1 q2 q5 q7 of six generated
    assert s.answered_accuracy == 1 / 3  # judged answered q1 q2 q5; correct q1
    assert (rep.n_error, rep.n_answered_unjudged) == (1, 1)
    vals = {(v.query_id, v.metric): (v.value, v.status) for v in checks.score(items)}
    assert vals[("q4", "exact_match")] == (0.0, "not_applicable")
    assert vals[("q4", "abstained")] == (1.0, "scored")
    assert vals[("q6", "token_f1")] == (0.0, "error")
    assert vals[("q7", "token_f1")] == (0.0, "no_reference")
    assert vals[("q7", "answer_correct")] == (0.0, "no_reference")
    assert vals[("q1", "answer_correct")] == (1.0, "scored")


def test_values_are_never_nan_and_metrics_are_registered() -> None:
    with pytest.raises(ValueError):
        QueryValue("q", "token_f1", float("nan"), "scored")
    with pytest.raises(ValueError):
        QueryValue("q", "token_f1", 0.0, "dropped")
    for name in ANSWER_METRICS:
        assert parse_metric(name).aggregation == "mean"


def test_conf_option_builds() -> None:
    node = OmegaConf.load(f"{CONF_DIR}/answers/default.yaml")
    assert isinstance(build(node, "answers"), AnswerChecks)
