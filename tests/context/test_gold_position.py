"""The lost-in-the-middle probe: gold placement, hard distractors, injection, exclusions."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from bench.chunking.base import ChunkTable
from bench.config.build import build
from bench.context.base import (
    ContextSweep,
    JudgedContextBuilder,
    JudgedPassages,
    Passage,
    RankedPassages,
    citations,
)
from bench.context.gold_position import GoldAt, GoldPositionContext, gold_index
from bench.data.base import Dataset, Document, Query
from bench.errors import ConfigError
from bench.generation.stage import judged_items, judged_scope
from bench.retrieval.base import Hits, Pool


class Words:
    """Token counter test double: one token per whitespace-separated word."""

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _probe(**kw: object) -> GoldPositionContext:
    opts: dict[str, object] = {"system_prompt": "S {abstain}", "abstain_phrase": "IDK",
                               "user_template": "{context} Q: {query}"}
    opts.update(kw)
    return GoldPositionContext(**opts)  # type: ignore[arg-type]


def _item(pool: list[str], relevant: tuple[str, ...] = ("g",), *, judged: tuple[str, ...] = (),
          first: tuple[Passage, ...] | None = None, must_abstain: bool = False,
          qid: str = "q1") -> JudgedPassages:
    """A pool of passages named by doc id (best first): doc d's passage is chunk ``10 + i``
    with text ``"text of d"``."""
    ranked = RankedPassages(qid, "q?", tuple(
        Passage(d, 10 + i, f"text of {d}", 1.0 - i / 100) for i, d in enumerate(pool)))
    if first is None:
        first = tuple(Passage(d, 900 + i, f"first chunk of {d}") for i, d in enumerate(relevant))
    return JudgedPassages(ranked, relevant, frozenset(relevant) | frozenset(judged), first,
                          must_abstain)


def _at(probe: GoldPositionContext, position: str) -> GoldAt:
    (v,) = [v for v in probe.variants() if v.params["gold_position"] == position]
    assert isinstance(v.builder, GoldAt)
    return v.builder


def test_gold_index_first_middle_last() -> None:
    assert [gold_index(p, 4) for p in ("first", "middle", "last")] == [0, 2, 4]  # type: ignore[arg-type]
    assert [gold_index(p, 3) for p in ("first", "middle", "last")] == [0, 1, 3]  # type: ignore[arg-type]
    assert [gold_index(p, 1) for p in ("first", "middle", "last")] == [0, 0, 1]  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [1, 3, 4])
def test_gold_moves_distractors_stay(n: int) -> None:
    # x1 is judged relevant but the caller may not see it: never gold, never a distractor
    pool = ["x0", "x1", "g", "x2", "x3", "x4", "x5", "x6"]
    item = _item(pool, judged=("x1",))
    probe = _probe(n_distractors=n)
    assert isinstance(probe, ContextSweep)
    layouts = {}
    for pos, expect in (("first", 0), ("middle", n // 2), ("last", n)):
        at = _at(probe, pos)
        assert isinstance(at, JudgedContextBuilder)
        built = at.build_judged([item], Words())
        (ctx,) = built.contexts
        ids = [p.doc_id for p in ctx.passages]
        assert len(ids) == n + 1 and ids.index("g") == expect
        (pl,) = built.placements
        assert (pl.doc_id, pl.chunk_idx, pl.index, pl.injected) == ("g", 12, expect, False)
        layouts[pos] = [i for i in ids if i != "g"]
        # the prompt is BudgetedContext's: tags in layout order, the query after the context
        assert citations(ctx.messages[1].content) == ids
        assert ctx.messages[0].content == "S IDK" and ctx.messages[1].content.endswith("Q: q?")
    # hard distractors: the best-ranked non-relevant passages, in rank order, at every position
    expected = [d for d in pool if d not in ("g", "x1")][:n]
    assert layouts["first"] == layouts["middle"] == layouts["last"] == expected


def test_absent_gold_is_injected_from_its_first_chunk() -> None:
    item = _item(["x0", "x1", "x2", "x3", "x4"])
    item = JudgedPassages(RankedPassages("q1", "q?", tuple(
        p for p in item.ranked.passages)), ("g",), frozenset({"g"}),
        (Passage("g", 900, "first chunk of g"),))
    built = _at(_probe(), "middle").build_judged([item], Words())
    (ctx,) = built.contexts
    assert [p.doc_id for p in ctx.passages] == ["x0", "x1", "g", "x2", "x3"]
    assert ctx.passages[2].text == "first chunk of g" and ctx.passages[2].chunk_idx == 900
    (pl,) = built.placements
    assert pl.injected and pl.index == 2


def test_best_graded_relevant_doc_is_gold_without_single_gold() -> None:
    # relevant is best grade first: g1 (grade 2) before g2 (grade 1) though g2 ranks higher
    item = _item(["g2", "x0", "g1", "x1", "x2", "x3", "x4"], relevant=("g1", "g2"))
    assert _at(_probe(), "first").build_judged([item], Words()).excluded == (
        ("q1", "multi_gold"),)
    built = _at(_probe(single_gold=False), "first").build_judged([item], Words())
    (ctx,) = built.contexts
    # the other relevant document is neither gold nor distractor
    assert [p.doc_id for p in ctx.passages] == ["g1", "x0", "x1", "x2", "x3"]


def test_exclusions_are_counted_with_their_reason() -> None:
    items = [
        _item(["x0", "x1", "x2", "x3", "x4"], (), must_abstain=True, qid="a"),
        _item(["x0", "x1", "x2", "x3", "x4"], (), qid="b"),
        _item(["g", "h", "x0", "x1", "x2", "x3"], ("g", "h"), qid="c"),
        _item(["g", "x0", "x1", "x2"], qid="d"),  # 3 distractors for 4
        _item(["g", "x0", "x1", "x2", "x3"], qid="e"),
    ]
    at = _at(_probe(), "last")
    built = at.build_judged(items, Words())
    assert built.excluded == (("a", "must_abstain"), ("b", "no_gold"), ("c", "multi_gold"),
                              ("d", "few_distractors"))
    assert [c.query_id for c in built.contexts] == ["e"]
    # over budget: the 5 passages never fit; excluded at every position, never cut
    for pos in ("first", "middle", "last"):
        tight = _at(_probe(max_tokens=12), pos).build_judged(items[4:], Words())
        assert tight.contexts == () and tight.excluded == (("e", "over_budget"),)
    # what the judgments alone decide (the subset is drawn from the rest)
    assert at.exclusion(True, ["g"]) == "must_abstain"
    assert at.exclusion(False, []) == "no_gold"
    assert at.exclusion(False, ["g", "h"]) == "multi_gold"
    assert at.exclusion(False, ["g"]) is None


def test_variants_keys_and_labels() -> None:
    probe = _probe()
    vs = probe.variants()
    assert [v.label for v in vs] == ["gold@first(4)", "gold@middle(4)", "gold@last(4)"]
    assert [v.params["gold_index"] for v in vs] == [0, 2, 4]
    params = [v.builder.cache_params() for v in vs]
    assert [p["position"] for p in params] == ["first", "middle", "last"]
    assert len({str(sorted(p.items())) for p in params}) == 3
    # a variant's params do not depend on which other positions are swept
    assert _at(_probe(positions=["last"]), "last").cache_params() == params[2]


def test_judged_items_pool_first_chunks_and_visibility() -> None:
    docs = (Document("d0", "zero"), Document("d1", "one"),
            Document("d2", "two", allowed_roles=("admin",)), Document("d3", "three"))
    queries = (Query("q0", "what?", "exact_lookup", (("d1", 2), ("d2", 1), ("d3", 0)),
                     allowed_roles=("staff",)),
               Query("q1", "none?", "unanswerable", must_abstain=True))
    ds = Dataset("t", docs, queries)
    # chunk rows: d0 -> 0, d1 -> 1 and 2, d3 -> 3 (d2 has none)
    chunks = ChunkTable(np.array([0, 1, 1, 3], np.int32), np.zeros(4, np.int32),
                        np.ones(4, np.int32), np.ones(4, np.int32), ("",) * 4,
                        ("c0", "c1a", "c1b", "c3"))
    # q0's pool: d3, d2, d0 (d1's passages are not retrieved); q1's: d0
    hits = Hits(np.array([0, 3, 4], np.int64), np.array([3, 2, 0, 0], np.int32),
                np.array([0.9, 0.8, 0.7, 0.5], np.float32), np.array([3, -1, 0, 0], np.int32))
    items = judged_items(Pool(hits), chunks, ds, ["q0", "q1"], 1)
    a, b = items
    assert [p.doc_id for p in a.ranked.passages] == ["d3", "d2", "d0"]
    assert [p.text for p in a.ranked.passages] == ["c3", "two", "c0"]
    # d2 (grade 1) is relevant but hidden from the caller: not gold, yet never a distractor
    assert a.relevant == ("d1",) and a.judged_relevant == frozenset({"d1", "d2"})
    assert [(p.doc_id, p.chunk_idx, p.text) for p in a.first_chunks] == [("d1", 1, "c1a")]
    assert b.must_abstain and b.relevant == () and b.first_chunks == ()
    built = _at(_probe(n_distractors=2), "last").build_judged(items[:1], Words())
    (ctx,) = built.contexts
    assert [p.doc_id for p in ctx.passages] == ["d3", "d0", "d1"] and built.placements[0].injected
    scope = judged_scope(_at(_probe(), "first"), ds, 1)
    assert scope.eligible == ("q0",) and scope.excluded == (("must_abstain", 1),)
    # at relevance level 2 only d1 counts: d2 may then serve as a distractor
    (a2,) = judged_items(Pool(hits), chunks, ds, ["q0"], 2)
    assert a2.judged_relevant == frozenset({"d1"})


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("positions", ["first", "centre"], "centre"),
    ("positions", [], "at least one"),
    ("positions", ["first", "first"], "at most once"),
    ("n_distractors", 0, ">= 1"),
    ("max_tokens", 0, ">= 1"),
    ("user_template", "{query} only", "{context}"),
])
def test_bad_options_name_the_key(key: str, value: object, needle: str) -> None:
    node = OmegaConf.create({"_target_": "bench.context.gold_position.GoldPositionContext",
                             key: value})
    with pytest.raises(ConfigError) as err:
        build(node, "context")
    assert err.value.key == f"context.{key}" and needle in str(err.value)
