"""The iterative loop: decomposition rules, the look, each budget, the merge, bad options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.config.build import OptionError, build
from bench.data.base import Query
from bench.errors import ConfigError, InputError
from bench.iterative.base import BUDGET_EXHAUSTED
from bench.iterative.decompose import parts_of
from bench.iterative.loop import IterativeLoop, merge, run_loop


@pytest.mark.parametrize(("text", "parts"), [
    ("Explain Text Encoding Initiative and its connection to Standard Generalized Markup "
     "Language.", ["Text Encoding Initiative", "Standard Generalized Markup Language"]),
    ("Explain control flow, software and run time, and how they are connected.",
     ["control flow", "software", "run time"]),
    ("What is the term for the organization of data (and its storage allocations in a "
     "computer), and how does it relate to data and array?",
     ["the organization of data (and its storage allocations in a computer)", "data",
      "array"]),
    ("Which term means a program, and how is it connected to system software and operating "
     "system?", ["a program", "system software", "operating system"]),
    ("What does the term hop mean?", ["hop"]),
])
def test_decomposition_of_foldoc_phrasings(text: str, parts: list[str]) -> None:
    assert parts_of(text) == parts


def _ranking(docs: list[int], scores: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.asarray(docs, np.int32), np.asarray(scores, np.float32),
            np.asarray([10 * d for d in docs], np.int32))


#: per query text, what the fake index returns
_INDEX = {"A": _ranking([1], [0.9]), "B": _ranking([2], [0.8]), "C": _ranking([3], [0.7])}
_KEY = np.arange(10, dtype=np.int64)


def _loop(**kw: object) -> IterativeLoop:
    opts: dict[str, object] = {"max_calls": 10, "max_wall_ms": 1e9, "max_tokens": 1000,
                               "stop_score": 0.75, **kw}
    return IterativeLoop(**opts)  # type: ignore[arg-type]


def _run(loop: IterativeLoop, text: str, first: tuple[np.ndarray, np.ndarray, np.ndarray]):  # type: ignore[no-untyped-def]
    searched: list[str] = []

    def search(t: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        searched.append(t)
        return _INDEX[t]

    ranking, rec = run_loop(loop, Query("q1", text), first, search,
                            lambda t: len(t.split()), _KEY, k=10)
    return ranking, rec, searched


def test_a_question_of_several_parts_searches_each_part_then_stops() -> None:
    ranking, rec, searched = _run(_loop(), "Explain A, B and C.", _ranking([5], [0.95]))
    assert searched == ["A", "B", "C"]  # confident first search, but three parts
    assert rec.stop == "nothing_left" and rec.status == "ok"
    assert rec.calls == 4 and [t.turn for t in rec.turns] == [1, 2, 3, 4]
    # tokens: "Explain A, B and C." is 5 words, then 1 per part
    assert rec.tokens == 5 + 3 and rec.evidence == (5, 1, 2, 3)
    # max merge: every document once, best score first, its best chunk
    assert ranking[0].tolist() == [5, 1, 2, 3]
    assert ranking[2].tolist() == [50, 10, 20, 30]


def test_a_confident_one_part_question_stops_after_the_first_search() -> None:
    _, rec, searched = _run(_loop(), "What does the term A mean?", _ranking([1], [0.9]))
    assert searched == [] and rec.stop == "sufficient" and rec.calls == 1


def test_an_unconfident_one_part_question_searches_its_bare_term() -> None:
    _, rec, searched = _run(_loop(), "What does the term A mean?", _ranking([4], [0.3]))
    assert searched == ["A"] and rec.stop == "sufficient"  # "A" found doc 1 at 0.9


@pytest.mark.parametrize(("kw", "stop", "n_searched"), [
    ({"max_calls": 2}, "max_calls", 1),     # the first search + one part
    ({"max_tokens": 6}, "max_tokens", 1),   # 5 tokens + "A" (1) = 6; "B" would be the 7th
    ({"max_wall_ms": 1e-9}, "max_wall_ms", 0),  # any loop time is over it
])
def test_each_budget_stops_the_loop_budget_exhausted(kw: dict, stop: str,
                                                    n_searched: int) -> None:
    ranking, rec, searched = _run(_loop(**kw), "Explain A, B and C.", _ranking([5], [0.95]))
    assert rec.stop == stop and rec.status == BUDGET_EXHAUSTED
    assert len(searched) == n_searched and rec.calls == 1 + n_searched
    # the query keeps the evidence it had
    assert ranking[0].tolist() == [5, 1][:1 + n_searched]


def test_rrf_merge_by_hand() -> None:
    a = _ranking([1, 2], [0.9, 0.8])
    b = _ranking([2, 3], [0.5, 0.4])
    docs, scores, chunks = merge([a, b], "rrf", _KEY, k=10)
    # doc 2: 1/62 + 1/61; doc 1: 1/61; doc 3: 1/62
    assert docs.tolist() == [2, 1, 3]
    assert chunks.tolist() == [20, 10, 30]  # rrf: the passage of the earliest turn's hit
    np.testing.assert_allclose(scores, [1 / 62 + 1 / 61, 1 / 61, 1 / 62], rtol=1e-6)
    docs, scores, _ = merge([a, b], "max", _KEY, k=2)
    assert docs.tolist() == [1, 2] and scores.tolist() == pytest.approx([0.9, 0.8])


@pytest.mark.parametrize(("kw", "key"), [
    ({"max_calls": 0}, "max_calls"), ({"max_wall_ms": -1.0}, "max_wall_ms"),
    ({"max_tokens": 0}, "max_tokens"), ({"merge": "sum"}, "merge"),
    ({"reformulations": "llm"}, "reformulations"), ({"reformulations": "supplied"}, "path"),
])
def test_bad_options_name_the_key(kw: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        build({"_target_": "bench.iterative.loop.IterativeLoop", **kw}, "iterative")
    assert err.value.key == f"iterative.{key}"
    with pytest.raises(OptionError):
        IterativeLoop(**kw)


def test_supplied_reformulations_are_read_in_order_and_bad_rows_name_the_line(
        tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"query_id": "q1", "reformulations": ["B", "A"]}) + "\n")
    _, rec, searched = _run(_loop(reformulations="supplied", path=str(p)), "x y",
                            _ranking([5], [0.1]))
    assert searched == ["B", "A"] and rec.stop == "nothing_left"
    p.write_text(json.dumps({"query_id": "q1", "reformulations": ["B"]}) + "\n"
                 + json.dumps({"query_id": "q1", "reformulations": "A"}) + "\n")
    with pytest.raises(InputError) as err:
        IterativeLoop(reformulations="supplied", path=str(p))
    assert ":2:" in str(err.value) or err.value.line == 2
    p.write_text(json.dumps({"query_id": "nope", "reformulations": ["B"]}) + "\n")
    loop = IterativeLoop(reformulations="supplied", path=str(p))
    with pytest.raises(InputError):
        loop.reformulator.check({"q1"})  # type: ignore[attr-defined]
