from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from bench.data.base import Dataset, Document
from bench.robustness import cases as cases_mod
from bench.robustness.base import CASE_TYPES
from bench.robustness.cases import (
    LOW_TRUST,
    CaseOptions,
    build_cases,
    current_answer,
    mentions,
    rename,
)
from tests.robustness.fixtures import TERMS, tiny_dataset


def by_type(cases: list, t: str) -> list:
    return [c for c in cases if c.case_type == t]


def test_cases_are_deterministic_and_seeded() -> None:
    ds = tiny_dataset()
    a = build_cases(ds, CaseOptions(n=3, n_poison=4, cluster_size=3))
    b = build_cases(ds, CaseOptions(n=3, n_poison=4, cluster_size=3))
    assert a == b
    other = build_cases(ds, CaseOptions(n=3, n_poison=4, cluster_size=3, seed=1))
    assert [c.source_query_id for c in a] != [c.source_query_id for c in other]
    counts = Counter(c.case_type for c in a)
    assert counts == {**{t: 3 for t in CASE_TYPES}, "poison_mono": 4, "poison_poly": 4}
    # the must-abstain query is never a source: it has no term to answer
    assert all(c.source_query_id != "q-abstain" for c in a)


def test_attacker_term_is_another_gold_and_the_gold_passage_does_not_name_it() -> None:
    cases = build_cases(tiny_dataset(), CaseOptions(n=6, n_poison=6))
    for c in by_type(cases, "low_trust_conflict"):
        assert c.wrong in TERMS and c.wrong != c.expected
        gold = next(p for p in c.context if not p.planted)
        assert not mentions(gold.text, c.wrong)
        low = next(p for p in c.context if p.planted)
        assert low.label == LOW_TRUST and mentions(low.text, c.wrong)
        assert not mentions(low.text, c.expected)


def test_a_frequent_one_word_title_is_never_an_attacker(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    ds = tiny_dataset()
    # "modem" as a term, but every filler document contains the word: not distinctive
    docs = (*ds.documents, Document("t:modem", "A device that modulates a carrier wave "
                                    "to carry bits over a telephone line.", title="modem"))
    docs = tuple(dataclasses.replace(d, text=d.text + " modem") if d.doc_id.startswith(
        "filler") else d for d in docs)
    q = dataclasses.replace(ds.queries[0], query_id="q-modem", text="What is a modem?",
                            qrels=(("t:modem", 2),), expected_answer="modem")
    ds2 = Dataset("tiny2", docs, (*ds.queries, q))
    cases = build_cases(ds2, CaseOptions(n=7, n_poison=7))
    assert any(c.source_query_id == "q-modem" for c in cases)  # a source, still
    # the attacker's term of every other source (entity swaps: the swapped-in term)
    others = [c for c in cases if c.source_query_id != "q-modem" and not c.yes_no]
    assert others and all("modem" not in (c.wrong, c.expected) for c in others)
    # the frequency rule is what kept it out: without it, "modem" is someone's attacker
    monkeypatch.setattr(cases_mod, "MAX_TERM_DF", 100)
    loose = [c for seed in range(10) for c in build_cases(ds2, CaseOptions(n=7, seed=seed))]
    assert any(c.wrong == "modem" for c in loose if c.source_query_id != "q-modem")


def test_current_answer_follows_the_latest_source_on_or_before_as_of() -> None:
    sources = [("2020-01-01", "old"), ("2024-01-01", "new")]
    assert current_answer(sources, "2025-01-01") == "new"
    assert current_answer(sources, "2024-01-01") == "new"  # on the day counts
    assert current_answer(sources, "2022-06-01") == "old"
    assert current_answer(sources, "2019-12-31") is None


@pytest.mark.parametrize("as_of", [None, "2023-03-15"])
def test_stale_conflict_dates_read_as_of(as_of: str | None) -> None:
    cases = by_type(build_cases(tiny_dataset(as_of=as_of), CaseOptions(n=6, as_of="2026-01-01")),
                    "stale_conflict")
    want = as_of or "2026-01-01"
    assert cases
    for c in cases:
        assert c.as_of == want
        current = next(p for p in c.context if not p.planted)
        stale = next(p for p in c.context if p.planted)
        d_cur, d_old = current.label[-11:-1], stale.label[-11:-1]
        assert d_old < d_cur <= want  # ISO dates order as strings
        assert c.expected == current_answer([(d_cur, c.expected), (d_old, c.wrong)], want)
        assert mentions(stale.text, c.wrong) and not mentions(stale.text, c.expected)


def test_entity_swap_renames_the_term_everywhere() -> None:
    assert rename("Bit rot is bad; bit rot again. Bitrot no.", "bit rot", "X Y") == \
        "X Y is bad; X Y again. Bitrot no."
    for c in by_type(build_cases(tiny_dataset(), CaseOptions(n=6)), "entity_swap"):
        (p,) = c.context
        assert mentions(p.text, c.expected) and not mentions(p.text, c.wrong)


def test_negation_questions_are_balanced_yes_no_with_a_negation_or_quantifier() -> None:
    cases = by_type(build_cases(tiny_dataset(), CaseOptions(n=6)), "negation")
    assert {c.expected for c in cases} == {"yes", "no"}
    for c in cases:
        assert c.yes_no and {c.expected, c.wrong} == {"yes", "no"}
        assert any(w in c.question for w in (" not ", " never ", " no "))


def test_poison_clusters_mono_repeat_poly_vary_and_rate_leaves_controls() -> None:
    cases = build_cases(tiny_dataset(), CaseOptions(n=6, n_poison=6, cluster_size=4))
    for c in by_type(cases, "poison_mono"):
        assert len(c.planted) == 4 and len({p.text for p in c.planted}) == 1
        assert all(mentions(p.text, c.wrong) for p in c.planted)
    for c in by_type(cases, "poison_poly"):
        assert len(c.planted) == 4 and len({p.text for p in c.planted}) == 4
        assert all(mentions(p.text, c.wrong) for p in c.planted)
    half = build_cases(tiny_dataset(), CaseOptions(n=6, n_poison=6, poison_rate=0.5))
    mono = by_type(half, "poison_mono")
    assert any(c.attacked for c in mono) and any(not c.attacked for c in mono)
    assert all(bool(c.planted) == c.attacked for c in mono)
