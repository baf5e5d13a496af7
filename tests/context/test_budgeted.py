"""Context assembly: token budget, truncation, order policies, lost-in-the-middle layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from bench.app import CONF_DIR
from bench.config.build import build
from bench.context.base import Passage, RankedPassages, citations, strip_citations
from bench.context.budgeted import BudgetedContext, best_first_last
from bench.errors import ConfigError


class Words:
    """Token counter test double: one token per whitespace-separated word."""

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _builder(**kw: object) -> BudgetedContext:
    opts: dict[str, object] = {"system_prompt": "S {abstain}", "abstain_phrase": "IDK",
                               "user_template": "{context} Q: {query}",
                               "min_passage_tokens": 1}
    opts.update(kw)
    return BudgetedContext(**opts)  # type: ignore[arg-type]


ITEM = RankedPassages("q1", "q?", (
    Passage("d1", 10, "a b c", 0.9), Passage("d2", 20, "d e f", 0.8),
    Passage("d3", 30, "g h i j k", 0.7),
))


def test_everything_fits() -> None:
    ctx = _builder(max_tokens=100).build([ITEM], Words())[0]
    # system "S IDK" = 2; user: 3 tagged passages (1 + 3, 1 + 3, 1 + 5) + "Q: q?" (2) = 16
    assert ctx.n_tokens == 2 + (4 + 4 + 6) + 2
    assert [(p.doc_id, p.chunk_idx, p.rank) for p in ctx.passages] == [
        ("d1", 10, 1), ("d2", 20, 2), ("d3", 30, 3)]
    assert ctx.messages[0].content == "S IDK"
    assert ctx.messages[1].content.startswith("[doc:d1] a b c\n\n[doc:d2] d e f")
    assert (ctx.n_candidates, ctx.n_dropped, ctx.truncated, ctx.over_budget) == (3, 0, False,
                                                                                 False)


def test_budget_truncates_the_first_passage_that_overflows() -> None:
    # d1 + d2 cost 2 + 4 + 4 + 2 = 12; d3 whole would make 18 > 14; its room is
    # 14 - 12 - 1 (tag) = 1 word
    ctx = _builder(max_tokens=14).build([ITEM], Words())[0]
    assert ctx.n_tokens == 14
    assert ctx.passages[-1].text == "g" and ctx.passages[-1].truncated and ctx.truncated
    assert ctx.n_dropped == 0


def test_budget_drops_when_the_cut_would_be_too_short() -> None:
    ctx = _builder(max_tokens=14, min_passage_tokens=2).build([ITEM], Words())[0]
    assert [p.doc_id for p in ctx.passages] == ["d1", "d2"]
    assert (ctx.n_tokens, ctx.n_dropped, ctx.truncated) == (12, 1, False)
    no_cut = _builder(max_tokens=14, truncate=False).build([ITEM], Words())[0]
    assert no_cut.n_dropped == 1 and not no_cut.truncated


def test_top_k_and_over_budget() -> None:
    ctx = _builder(top_k=1, max_tokens=100).build([ITEM], Words())[0]
    assert [p.doc_id for p in ctx.passages] == ["d1"] and ctx.n_dropped == 0
    tiny = _builder(max_tokens=3).build([ITEM], Words())[0]
    assert tiny.passages == () and tiny.over_budget and tiny.n_dropped == 3
    assert tiny.n_tokens == 2 + 2


def test_best_first_last_order() -> None:
    assert best_first_last(5) == [0, 2, 4, 3, 1]
    assert best_first_last(4) == [0, 2, 3, 1]
    assert best_first_last(1) == [0]
    item = RankedPassages("q", "q", tuple(Passage(f"d{i}", i, "w", 1 - i / 10)
                                          for i in range(1, 6)))
    ctx = _builder(order="best_first_last").build([item], Words())[0]
    assert [p.doc_id for p in ctx.passages] == ["d1", "d3", "d5", "d4", "d2"]
    assert [p.rank for p in ctx.passages] == [1, 3, 5, 4, 2]


def test_default_prompt_allows_i_dont_know() -> None:
    ctx = BudgetedContext().build([ITEM], Words())[0]
    assert "I don't know" in ctx.messages[0].content
    assert "Question: q?" in ctx.messages[1].content


def test_citation_tags() -> None:
    text = "X is a cat [doc:foldoc:cat]. It purrs [doc: d2 ][doc:d3]."
    assert citations(text) == ["foldoc:cat", "d2", "d3"]
    assert strip_citations(text) == "X is a cat. It purrs."


@pytest.mark.parametrize("option", sorted(p.stem for p in (Path(CONF_DIR) / "context").glob(
    "*.yaml")))
def test_conf_options_build(option: str) -> None:
    from bench.context.base import ContextSweep

    node = OmegaConf.load(Path(CONF_DIR) / "context" / f"{option}.yaml")
    built = build(node, "context")
    assert isinstance(built, BudgetedContext | ContextSweep), option


@pytest.mark.parametrize(("key", "value"), [("top_k", 0), ("order", "random"),
                                            ("user_template", "{query} only")])
def test_bad_options_name_the_key(key: str, value: object) -> None:
    node = OmegaConf.create({"_target_": "bench.context.budgeted.BudgetedContext", key: value})
    with pytest.raises(ConfigError) as err:
        build(node, "context")
    assert err.value.key == f"context.{key}"


def test_ranked_passages_from_columns() -> None:
    from bench.context.base import ranked_passages

    item = ranked_passages("q", "q?", ["d1", "d2"], [4, 9], ["a", "b"], [0.5, 0.25])
    assert item.passages == (Passage("d1", 4, "a", 0.5), Passage("d2", 9, "b", 0.25))
    with pytest.raises(ValueError):
        ranked_passages("q", "q?", ["d1"], [], ["a"], [0.5])
