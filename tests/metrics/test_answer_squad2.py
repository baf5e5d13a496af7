"""Multi-reference EM/F1 and no-answer scoring against SQuAD 2.0's official definition.

The reference functions below follow the official ``evaluate-v2.0.py`` of SQuAD 2.0
(Rajpurkar, Jia, Liang 2018; https://rajpurkar.github.io/SQuAD-explorer/), written from its
published definition: ``normalize_answer``, ``get_tokens``, ``compute_exact``, ``compute_f1``
and ``get_raw_scores``' max over the gold answers that normalise to something, ``[""]`` for a
question without any. Predictions are built by hand; bench's checks must give the same EM/F1
per question, with an abstention read as SQuAD's empty prediction.
"""

from __future__ import annotations

import collections
import re
import string

import pytest

from bench.data.base import Query
from bench.generation.base import Generation
from bench.metrics.answer import AnswerChecks, AnswerItem, answer_items


def official_normalize_answer(s: str) -> str:
    def remove_articles(text: str) -> str:
        return re.sub(re.compile(r"\b(a|an|the)\b", re.UNICODE), " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def official_get_tokens(s: str) -> list[str]:
    if not s:
        return []
    return official_normalize_answer(s).split()


def official_compute_exact(a_gold: str, a_pred: str) -> int:
    return int(official_normalize_answer(a_gold) == official_normalize_answer(a_pred))


def official_compute_f1(a_gold: str, a_pred: str) -> float:
    gold_toks = official_get_tokens(a_gold)
    pred_toks = official_get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def official_scores(answers: list[str], a_pred: str) -> tuple[float, float]:
    """get_raw_scores for one question: (exact, f1), max over the usable gold answers."""
    gold_answers = [a for a in answers if official_normalize_answer(a)]
    if not gold_answers:
        # For unanswerable questions, only correct answer is empty string
        gold_answers = [""]
    return (max(official_compute_exact(a, a_pred) for a in gold_answers),
            max(official_compute_f1(a, a_pred) for a in gold_answers))


# (gold answers, prediction as generated, what SQuAD's script is given for it)
CASES: list[tuple[list[str], str, str]] = [
    (["Denmark, Iceland and Norway"], "Denmark, Iceland and Norway.",
     "Denmark, Iceland and Norway."),
    (["10th and 11th centuries", "in the 10th and 11th centuries"],
     "In the 10th and 11th centuries", "In the 10th and 11th centuries"),
    (["10th and 11th centuries", "in the 10th and 11th centuries"], "the 10th century",
     "the 10th century"),
    (["Rollo", "Rollo, the Viking"], "The Viking Rollo", "The Viking Rollo"),
    (["France"], "It is in France, in Europe.", "It is in France, in Europe."),
    (["William the Conqueror", "William", "Duke William"], "duke william II",
     "duke william II"),
    (["Richard I", "Richard I of Normandy"], "Richard", "Richard"),
    (["cat cat dog", "dog"], "cat dog dog", "cat dog dog"),  # multiplicity
    (["The Normans"], "normans", "normans"),  # articles and case
    (["Catholic orthodoxy", "Catholic", "Catholicism"], "Protestant", "Protestant"),
    (["Fulk", "Fulk Nerra"], "I don't know.", ""),  # abstained on an answerable question
    (["$5 million", "5 million dollars"], "5 million", "5 million"),
    # no-answer questions (SQuAD 2.0 plausible answers are not golds): gold [""]
    ([], "", ""),
    ([], "I don't know.", ""),
    ([], "The context does not mention it.", ""),
    ([], "Rollo", "Rollo"),
    ([], "...", "..."),  # normalises to nothing: SQuAD's no-answer
    # golds that normalise to nothing are dropped by the script
    (["the", "Rollo"], "a", "a"),
]


@pytest.mark.parametrize(("golds", "generated", "squad_pred"), CASES)
def test_em_f1_equal_squad2_official(golds: list[str], generated: str, squad_pred: str) -> None:
    checks = AnswerChecks(must_abstain_em_f1="squad2")
    item = AnswerItem("q", generated, tuple(golds), must_abstain=not golds)
    got = {v.metric: (v.value, v.status) for v in checks.score_one(item)}
    em, f1 = official_scores(golds, squad_pred)
    assert got["exact_match"] == (pytest.approx(em, abs=1e-15), "scored")
    assert got["token_f1"] == (pytest.approx(f1, abs=1e-15), "scored")


def test_hand_values_of_some_cases() -> None:
    checks = AnswerChecks(must_abstain_em_f1="squad2")

    def em_f1(golds: tuple[str, ...], pred: str) -> tuple[float, float]:
        got = {v.metric: v.value for v in checks.score_one(
            AnswerItem("q", pred, golds, must_abstain=not golds))}
        return got["exact_match"], got["token_f1"]

    # [10th, century] vs [10th, and, 11th, centuries]: common 1, P 1/2, R 1/4 -> F1 1/3;
    # vs [in, 10th, and, 11th, centuries]: P 1/2, R 1/5 -> 2/7: the max is 1/3
    assert em_f1(("10th and 11th centuries", "in the 10th and 11th centuries"),
                 "the 10th century") == (0.0, pytest.approx(1 / 3))
    assert em_f1(("Rollo", "Rollo, the Viking"), "The Viking Rollo") == (0.0, 1.0)
    assert em_f1((), "I don't know.") == (1.0, 1.0)
    assert em_f1((), "Rollo") == (0.0, 0.0)


def test_default_mode_keeps_must_abstain_out_and_scores_text_as_written() -> None:
    checks = AnswerChecks()
    vals = {v.metric: (v.value, v.status)
            for v in checks.score_one(AnswerItem("q", "", (), must_abstain=True))}
    assert vals["exact_match"] == vals["token_f1"] == (0.0, "not_applicable")
    # an abstention on an answerable question is scored as its text, as before
    vals = {v.metric: (v.value, v.status) for v in checks.score_one(
        AnswerItem("q", "I don't know the cat.", ("the cat",)))}
    assert vals["token_f1"] == (pytest.approx(2 * (1 / 4) * 1 / (1 / 4 + 1)), "scored")


def test_several_references_also_for_numbers_ids_and_amounts() -> None:
    # alternatives: the best reference counts, as for EM/F1
    vals = {v.metric: (v.value, v.status) for v in AnswerChecks().score_one(
        AnswerItem("q", "It costs $5 million and ships as RFC 1149 in 1990.",
                   ("$5 million in 1990", "five million dollars", "RFC 1149 and RFC 2549")))}
    assert vals["number_match"] == (1.0, "scored")  # first reference: 5, 1990 both found
    assert vals["identifier_match"] == (1 / 2, "scored")  # third: rfc1149 of rfc1149, rfc2549
    assert vals["quantity_match"] == (1.0, "scored")


def test_answer_items_take_every_reference() -> None:
    queries = [Query("q1", "?", expected_answer="a1", expected_answers=("a1", "a2")),
               Query("q2", "?", expected_answer="b"), Query("q3", "?")]
    gens = [Generation(request_id=q.query_id, text="a2", status="ok", finish_reason="stop",
                       prompt_tokens=1, output_tokens=1, ttft_ms=None, tpot_ms=None, e2e_ms=1.0)
            for q in queries]
    items = answer_items(queries, gens)
    assert [i.references for i in items] == [("a1", "a2"), ("b",), ()]


def test_squad2_sample_loaded_and_scored_like_the_official_script() -> None:
    """Hand-written predictions for the 17 questions of the SQuAD 2.0 sample fixture; the
    per-question values and the all-question means equal the official script's."""
    from pathlib import Path

    from bench.data.golden import GoldenDataset

    root = Path(__file__).parents[1] / "data" / "squad2_sample"
    ds = GoldenDataset(corpus=str(root / "documents.jsonl"),
                       queries=str(root / "golden.jsonl")).load()
    preds = {
        "56ddde6b9a695914005b9628": "France",
        "56ddde6b9a695914005b9629": "the 10th century",
        "56ddde6b9a695914005b962a": "Norway",
        "56ddde6b9a695914005b962b": "Rollo.",
        "56ddde6b9a695914005b962c": "In the first half of the 10th century",
        "5ad39d53604f3c001a3fe8d1": "I don't know.",
        "5ad39d53604f3c001a3fe8d2": "France",
        "5ad39d53604f3c001a3fe8d3": "",
        "5ad39d53604f3c001a3fe8d4": "The context does not say.",
        "56dddf4066d3e219004dad5f": "William the Conqueror",
        "56dddf4066d3e219004dad60": "Richard II",
        "56dddf4066d3e219004dad61": "I cannot answer that.",
        "5ad3a266604f3c001a3fea27": "Norman dynasty",
        "5ad3a266604f3c001a3fea28": "I don't know",
        "5ad3a266604f3c001a3fea29": "The Normans",
        "5ad3a266604f3c001a3fea2a": "",
        "5ad3a266604f3c001a3fea2b": "Not enough information to say.",
    }
    assert set(preds) == {q.query_id for q in ds.queries}
    checks = AnswerChecks(must_abstain_em_f1="squad2")
    gens = [Generation(request_id=q.query_id, text=preds[q.query_id], status="ok",
                       finish_reason="stop", prompt_tokens=1, output_tokens=1, ttft_ms=None,
                       tpot_ms=None, e2e_ms=1.0) for q in ds.queries]
    values = checks.score(answer_items(ds.queries, gens))
    got = {(v.query_id, v.metric): v.value for v in values if v.status == "scored"}
    em_sum = f1_sum = 0.0
    for q in ds.queries:
        text = preds[q.query_id]
        squad_pred = "" if checks.detector.abstains(text) else text
        em, f1 = official_scores(list(q.references), squad_pred)
        assert got[(q.query_id, "exact_match")] == em, q.query_id
        assert got[(q.query_id, "token_f1")] == pytest.approx(f1, abs=1e-15), q.query_id
        em_sum, f1_sum = em_sum + em, f1_sum + f1
    n = len(ds.queries)
    ems = [got[(q.query_id, "exact_match")] for q in ds.queries]
    assert sum(ems) / n == em_sum / n
    # by hand: answerable France, "Rollo.", William the Conqueror (3; the refusal on dad61 is
    # the empty prediction: 0); must-abstain: 6 of 9 give no answer (d2 "France", fea27 and
    # fea29 answer: 0)
    assert sum(ems) == 3 + 6
