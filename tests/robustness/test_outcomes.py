from __future__ import annotations

import pytest

from bench.metrics.answer import AbstentionDetector
from bench.robustness.base import Case
from bench.robustness.outcomes import classify

TERM = Case("c", "low_trust_conflict", "q", "What is the term for ...?", expected="bit rot",
            wrong="hash table")
YES_NO = Case("c", "negation", "q", "Is it true that ...?", expected="no", wrong="yes",
              yes_no=True)
INCOMPLETE = Case("c", "incomplete_context", "q", "What ...?", expected="bit rot", wrong=None)


@pytest.mark.parametrize(("case", "answer", "outcome"), [
    (TERM, "Bit rot.", "answered"),
    (TERM, "The term is bit-rot", "drifted_other"),  # normalised, not fuzzy: "bitrot" != "bit rot"
    (TERM, "hash table", "drifted_wrong"),
    (TERM, "Either bit rot or hash table.", "drifted_wrong"),  # a hedge the attack reached
    (TERM, "I don't know.", "abstained"),
    (TERM, "", "abstained"),
    (TERM, "storage decay", "drifted_other"),
    (TERM, "rot", "drifted_other"),  # whole words only
    (YES_NO, "No, it is not.", "answered"),
    (YES_NO, "Yes.", "drifted_wrong"),
    (YES_NO, "Maybe", "drifted_other"),
    (YES_NO, "The passages do not contain that.", "abstained"),
    (INCOMPLETE, "The context does not mention it.", "abstained"),
    (INCOMPLETE, "bit rot", "answered"),
    (INCOMPLETE, "page fault", "drifted_other"),
])
def test_classify(case: Case, answer: str, outcome: str) -> None:
    assert classify(case, answer, AbstentionDetector()) == outcome
