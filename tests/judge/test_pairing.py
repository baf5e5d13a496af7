"""The pairwise judge's options (orders, aggregation, a cross judge) and the biases measured on
its verdicts (position consistency, verbosity, self-preference), with a scripted judge model."""

from __future__ import annotations

import json

import pytest

from bench.config.build import OptionError
from bench.generation.base import GenerationRequest
from bench.judge.base import OK, PairItem, PairVerdict
from bench.judge.pairing import (
    PairRun,
    agreement,
    family,
    pairwise_summary,
    self_preference,
    verbosity,
)
from bench.judge.pairwise import PairwisePreferenceJudge
from tests.judge.scripted import ScriptedGenerator

STATS = {"resamples": 500, "seed": 0, "confidence": 0.95}


def _longer(r: GenerationRequest) -> str:
    """A judge model that always prefers the longer of the two answers shown (position-
    consistent, fully verbosity-biased)."""
    user = r.messages[-1].content
    a = user.split("Answer A: ", 1)[1].split("\n\nAnswer B: ", 1)[0]
    b = user.split("Answer B: ", 1)[1].split("\n\nReturn", 1)[0]
    winner = "A" if len(a.split()) > len(b.split()) else "B" if len(b.split()) > len(
        a.split()) else "tie"
    return json.dumps({"reason": "r", "winner": winner})


def _items(lengths: list[tuple[int, int]]) -> list[PairItem]:
    return [PairItem(f"q{i}", "?", "candidate", " ".join(["w"] * a), "baseline",
                     " ".join(["w"] * b)) for i, (a, b) in enumerate(lengths)]


def test_one_order_asks_once_and_cannot_measure_position_bias() -> None:
    gen = ScriptedGenerator(lambda r: json.dumps({"reason": "r", "winner": "A"}))
    judge = PairwisePreferenceJudge(generator=gen, orders="ab")
    verdicts = judge.compare(_items([(3, 3), (3, 3)]))
    assert len(gen.requests) == 2  # one call per pair
    assert [v.winner for v in verdicts] == ["candidate", "candidate"]
    assert pairwise_summary(PairRun(tuple(verdicts), (), {"q0": (3, 3), "q1": (3, 3)}),
                            candidate_id="c", candidate="c", baseline_id="b", baseline="b",
                            judge="j", cross_judge=None, orders="ab", aggregate="flip_is_tie",
                            candidate_generator="x", baseline_generator="x",
                            **STATS).position_consistency.rate is None


def test_aggregation_is_a_config_choice() -> None:
    # ab: candidate wins; ba: tie -> flip_is_tie gives a tie, mean gives (1 + 0.5) / 2
    script = {"q0/ab": "A", "q0/ba": "tie"}

    def gen() -> ScriptedGenerator:
        return ScriptedGenerator(lambda r: json.dumps(
            {"reason": "r", "winner": script["/".join(r.request_id.split("/")[:2])]}))
    [tie] = PairwisePreferenceJudge(generator=gen()).compare(_items([(2, 2)]))
    [mean] = PairwisePreferenceJudge(generator=gen(), aggregate="mean").compare(_items([(2, 2)]))
    assert (tie.winner, tie.preference_a, tie.consistent) == ("tie", 0.5, False)
    assert tie.prefs == mean.prefs == (1.0, 0.5)
    assert mean.preference_a == 0.75
    # the defaults keep the judge's cache key; a changed option changes it
    g = ScriptedGenerator(lambda r: "")
    assert "aggregate" not in PairwisePreferenceJudge(generator=g).cache_params()
    assert PairwisePreferenceJudge(generator=g, aggregate="mean").cache_params()[
        "aggregate"] == "mean"
    with pytest.raises(OptionError, match="orders"):
        PairwisePreferenceJudge(generator=g, orders="ba")  # type: ignore[arg-type]


def test_verbosity_bias_of_a_judge_that_prefers_the_longer_answer() -> None:
    lengths = [(10, 4), (4, 10), (8, 6), (6, 8), (12, 2), (5, 5)]
    items = _items(lengths)
    verdicts = PairwisePreferenceJudge(generator=ScriptedGenerator(_longer)).compare(items)
    words = {it.query_id: lw for it, lw in zip(items, lengths, strict=True)}
    slope, r, longer = verbosity(verdicts, words, **STATS)
    assert all(v.consistent for v in verdicts)  # length, not position, decides
    # every decided pair went to the longer answer (5 of the 5 of unequal length)
    assert longer == (5, 5)
    assert r.value is not None and r.value > 0.8
    assert slope.value is not None and slope.ci_low is not None and slope.ci_low > 0
    # a position-biased judge ("A" always) has no length preference: slope 0, all ties
    biased = PairwisePreferenceJudge(generator=ScriptedGenerator(
        lambda _r: json.dumps({"reason": "r", "winner": "A"}))).compare(items)
    s2, _, l2 = verbosity(biased, words, **STATS)
    assert s2.value == 0.0 and l2 == (0, 0)
    assert sum(v.consistent for v in biased) == 0


def _v(qid: str, pref: float, judge: str) -> PairVerdict:
    winner = {1.0: "candidate", 0.5: "tie", 0.0: "baseline"}[pref]
    return PairVerdict(qid, "candidate", "baseline", OK, winner, True, (), (pref, pref),
                       None, judge)


def test_self_preference_needs_two_families_and_a_cross_judge() -> None:
    assert family("SmolLM2-135M-Instruct") == "smollm2" and family("qwen2.5-0.5b") == "qwen2.5"
    # the candidate is answered by a qwen model; the qwen judge prefers it more than the llama
    # judge on each query: 1 vs 0.5, 1 vs 1, 0.5 vs 0 -> mean difference (0.5 + 0 + 0.5) / 3
    same = [_v("q1", 1.0, "qwen2.5-7b"), _v("q2", 1.0, "qwen2.5-7b"), _v("q3", 0.5, "qwen2.5-7b")]
    other = [_v("q1", 0.5, "llama-3-8b"), _v("q2", 1.0, "llama-3-8b"), _v("q3", 0.0, "llama-3-8b")]
    est, note = self_preference(same, other, judge="qwen2.5-7b", cross_judge="llama-3-8b",
                                candidate_generator="qwen2.5-0.5b",
                                baseline_generator="llama-3-1b", **STATS)
    assert note == "" and est is not None and est.value == pytest.approx(1 / 3) and est.n == 3
    # the llama judge as the primary: it shares the BASELINE's family, so its preference for
    # the baseline (1 - 0.5, 1 - 1, 1 - 0) is compared with the qwen judge's (0, 0, 0.5)
    est2, _ = self_preference(other, same, judge="llama-3-8b", cross_judge="qwen2.5-7b",
                              candidate_generator="qwen2.5-0.5b",
                              baseline_generator="llama-3-1b", **STATS)
    assert est2 is not None and est2.value == pytest.approx((0.5 + 0 + 0.5) / 3)
    # a judge that prefers the candidate's family less than the cross judge: negative
    est3, _ = self_preference(same, [_v(q, 1.0, "llama-3-8b") for q in ("q1", "q2", "q3")],
                              judge="qwen2.5-7b", cross_judge="llama-3-8b",
                              candidate_generator="qwen2.5-0.5b",
                              baseline_generator="llama-3-1b", **STATS)
    assert est3 is not None and est3.value == pytest.approx((0 + 0 - 0.5) / 3)
    # one generator family on both sides: nothing to prefer
    none, why = self_preference(same, other, judge="qwen2.5-7b", cross_judge="llama-3-8b",
                                candidate_generator="smollm2-135m",
                                baseline_generator="smollm2-135m", **STATS)
    assert none is None and "smollm2" in why
    none, why = self_preference(same, [], judge="qwen2.5-7b", cross_judge=None,
                                candidate_generator="a", baseline_generator="b", **STATS)
    assert none is None and "cross_generator" in why
    rate = agreement(same, other)
    assert (rate.numerator, rate.denominator) == (1, 3)


def test_cross_judge_answers_the_same_pairs() -> None:
    first = ScriptedGenerator(lambda _r: json.dumps({"reason": "r", "winner": "A"}))
    second = ScriptedGenerator(_longer)
    judge = PairwisePreferenceJudge(generator=first, cross_generator=second)
    cross = judge.cross()
    assert cross is not None and cross.generator is second
    assert judge.cache_params()["cross_generator"] == second.cache_params()
    items = _items([(6, 2)])
    assert cross.compare(items)[0].winner == "candidate"
    assert judge.compare(items)[0].winner == "tie"  # "A" both times: a flip
    assert len(second.requests) == 2
