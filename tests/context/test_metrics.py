"""Context metrics at the context actually sent, and the context x answer diagnosis, on
hand-built contexts (expected values written as arithmetic)."""

from __future__ import annotations

import pytest

from bench.context.base import Context, ContextPassage
from bench.context.metrics import (
    CONTEXT_METRICS,
    ContextItem,
    context_values,
    diagnose,
    relevant_passages,
)
from bench.metrics.base import ERROR, NO_CLAIMS, NOT_APPLICABLE, SCORED, QueryValue


def _ctx(*passages: tuple[str, str]) -> Context:
    placed = tuple(ContextPassage(d, i, t, i + 1) for i, (d, t) in enumerate(passages))
    return Context("q1", "what is a trie?", placed, (), 10, len(placed))


def _values(item: ContextItem) -> dict[str, tuple[float, str]]:
    return {v.metric: (v.value, v.status) for v in context_values(item)}


def test_document_level_and_chunk_aware() -> None:
    # 4 passages from 3 documents (d1 twice); relevant {d1, d9}: d1 is in, d9 is not
    ctx = _ctx(("d1", "a trie is a prefix tree"), ("d2", "a heap is a tree"),
               ("d1", "tries store strings by prefix"), ("d3", "unrelated text"))
    got = _values(ContextItem("q1", ctx, frozenset({"d1", "d9"})))
    assert got["gold_in_context"] == (1.0, SCORED)
    assert got["context_recall"] == (1 / 2, SCORED)
    # k = 3 distinct documents, not 4 passages: d1's two chunks count once
    assert got["context_precision"] == (1 / 3, SCORED)


def test_no_relevant_in_context_and_empty_context() -> None:
    ctx = _ctx(("d2", "a heap"), ("d3", "a stack"))
    got = _values(ContextItem("q1", ctx, frozenset({"d1"})))
    assert got["gold_in_context"] == (0.0, SCORED)
    assert got["context_recall"] == got["context_precision"] == (0.0, SCORED)
    empty = _values(ContextItem("q1", _ctx(), frozenset({"d1"})))
    assert empty["context_precision"] == (0.0, SCORED)  # as trec_eval scores an empty ranking


def test_claim_recall_and_utilisation_use_the_claims_coverage_matcher() -> None:
    claims = ("a trie is a prefix tree", "tries were described by de la Briandais",
              "radix trees compress tries")
    ctx = _ctx(("d1", "In computing, a trie is a prefix tree for strings."),
               ("d2", "Radix trees compress tries into fewer nodes."))
    # claims 1 and 3 are in the context (one per passage); the answer covers claim 1 only
    item = ContextItem("q1", ctx, frozenset({"d1"}), claims,
                       answer="A trie is a prefix tree [doc:d1].")
    got = _values(item)
    assert got["context_claim_recall"] == (2 / 3, SCORED)
    assert got["context_utilisation"] == (1 / 2, SCORED)
    assert relevant_passages([p.text for p in ctx.passages], claims) == [True, True]


def test_statuses() -> None:
    ctx = _ctx(("d1", "nothing about it"))
    # no required claims on an answerable query: counted as no_claims, never 1.0
    got = _values(ContextItem("q1", ctx, frozenset({"d1"})))
    assert got["context_claim_recall"][1] == got["context_utilisation"][1] == NO_CLAIMS
    # claims the context does not cover: utilisation has an empty denominator
    got = _values(ContextItem("q1", ctx, frozenset({"d1"}), ("a trie is a prefix tree",),
                              answer="x"))
    assert got["context_claim_recall"] == (0.0, SCORED)
    assert got["context_utilisation"][1] == NO_CLAIMS
    # a failed generation: utilisation is an error, the context metrics still score
    got = _values(ContextItem("q1", _ctx(("d1", "a trie is a prefix tree")), frozenset({"d1"}),
                              ("a trie is a prefix tree",), answer=None))
    assert got["context_claim_recall"] == (1.0, SCORED)
    assert got["context_utilisation"][1] == ERROR
    # must-abstain: no relevant document, nothing to recall
    got = _values(ContextItem("q1", ctx, frozenset(), must_abstain=True, answer="I don't know"))
    assert {st for _, st in got.values()} == {NOT_APPLICABLE}
    assert list(got) == list(CONTEXT_METRICS)


def _rows(qid: str, ctx: float | None, correct: float | None,
          abstained: float = 0.0) -> list[QueryValue]:
    out = [QueryValue(qid, "abstained", abstained, SCORED)]
    if ctx is not None:
        out.append(QueryValue(qid, "gold_in_context", ctx, SCORED))
    out.append(QueryValue(qid, "answer_correct", correct or 0.0,
                          SCORED if correct is not None else "no_reference"))
    return out


def test_diagnosis_matrix_places_each_query_once() -> None:
    rows = [*_rows("q1", 1, 1), *_rows("q2", 1, 0), *_rows("q3", 0, 0), *_rows("q4", 0, 1),
            *_rows("q5", 0, 0), *_rows("q6", 1, None),
            QueryValue("q7", "abstained", 1.0, SCORED),
            QueryValue("q8", "abstained", 0.0, SCORED)]
    ids = [f"q{i}" for i in range(1, 9)]
    d = diagnose(ids, {"q7": True, "q8": True}, rows)
    assert d.cell(True, True).query_ids == ("q1",) and d.cell(True, True).layer == "none"
    assert d.cell(True, False).query_ids == ("q2",)
    assert d.cell(True, False).layer == "generation"  # the evidence was in the prompt
    assert d.cell(False, False).query_ids == ("q3", "q5")
    assert d.cell(False, False).layer == "retrieval"  # the generator never saw it
    assert d.cell(False, True).query_ids == ("q4",)
    assert d.cell(False, True).layer.startswith("retrieval")
    assert d.abstain_refused == ("q7",) and d.abstain_answered == ("q8",)
    assert d.unplaced == (("q6", "answer_correct no_reference"),)
    placed = sum(len(c.query_ids) for c in d.cells) + 2 + len(d.unplaced)
    assert placed == len(ids)


@pytest.mark.parametrize("status", ["error", "invalid"])
def test_diagnosis_names_why_a_query_is_not_placed(status: str) -> None:
    rows = [QueryValue("q1", "gold_in_context", 0.0, status),
            QueryValue("q1", "answer_correct", 1.0, SCORED)]
    d = diagnose(["q1"], {}, rows)
    assert d.unplaced == (("q1", f"gold_in_context {status}"),)
