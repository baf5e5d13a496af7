"""judge.repeats: each answer judged N times with seeds seed..seed+N-1; per-query means, the
variance split into query variation and judge noise, and a two-level bootstrap CI."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scripted import ScriptedGenerator

from bench.config.build import OptionError
from bench.context.base import Context, ContextPassage
from bench.generation.base import ChatMessage, GenerationRequest
from bench.judge.base import JudgeItem
from bench.judge.context_relevance import ContextRelevanceJudge
from bench.judge.repeats import (
    REPEAT_SEED_STRIDE,
    RepeatedJudge,
    mean_over_repeats,
    noise,
    repeat_rows,
    two_level_ci,
)
from bench.judge.stage import judge_metrics, judge_name, judge_repeats, verdict_values
from bench.metrics.base import SCORED

N_PASSAGES = 4


def _items(n: int) -> list[JudgeItem]:
    return [JudgeItem(f"q{i}", f"question {i}", "an answer", Context(
        f"q{i}", f"question {i}",
        tuple(ContextPassage(f"d{i}-{j}", j, f"text {j}", j + 1) for j in range(N_PASSAGES)),
        (ChatMessage("user", "..."),), 10, N_PASSAGES)) for i in range(n)]


def _script(r: GenerationRequest) -> str:
    """Query i: relevant passages = 1 + (i + seed) % 3 — the verdict moves with the seed, so
    repeats disagree; the query's own part (i) is query variation."""
    i = int(re.search(r"q(\d+)", r.request_id).group(1))  # type: ignore[union-attr]
    k = 1 + (i + r.sampling.seed // REPEAT_SEED_STRIDE) % 3
    nums = list(range(1, N_PASSAGES + 1))
    return json.dumps({"relevant": nums[:k], "irrelevant": nums[k:]})


def test_repeats_vary_the_seed_and_average_per_query() -> None:
    gen = ScriptedGenerator(_script)
    judge = RepeatedJudge(ContextRelevanceJudge(generator=gen, seed=5), 3)
    verdicts = judge.judge(_items(6))
    assert len(verdicts) == 18 and sorted({v.repeat for v in verdicts}) == [0, 1, 2]
    assert sorted({r.sampling.seed for r in gen.requests}) == [5, 1005, 2005]
    assert (judge_name(judge), judge_repeats(judge)) == ("context_relevance", 3)
    assert judge.cache_params()["repeats"] == 3
    rows = verdict_values(judge, verdicts)
    assert len(rows) == 6 and all(r.status == SCORED for r in rows)
    by_q = {r.query_id: r.value for r in rows}
    for v in (v for v in verdicts if v.query_id == "q0"):
        assert v.score("context_relevance") is not None
    expect = np.mean([v.score("context_relevance") for v in verdicts if v.query_id == "q2"])
    assert by_q["q2"] == pytest.approx(expect)


def test_one_repeat_is_the_single_verdict() -> None:
    judge = ContextRelevanceJudge(generator=ScriptedGenerator(_script))
    verdicts = judge.judge(_items(3))
    assert all(v.repeat == 0 for v in verdicts)
    assert [r.value for r in verdict_values(judge, verdicts)] == [
        v.score("context_relevance") for v in verdicts]
    with pytest.raises(OptionError, match="repeats"):
        RepeatedJudge(judge, 1)


def test_noise_split_matches_the_variance_decomposition() -> None:
    judge = RepeatedJudge(ContextRelevanceJudge(generator=ScriptedGenerator(_script)), 4)
    verdicts = judge.judge(_items(12))
    rows = repeat_rows(verdicts, judge_metrics(judge))
    got = noise(rows, "context_relevance", 4, resamples=300, seed=0, confidence=0.95)
    per_q: dict[str, list[float]] = {}
    for v in verdicts:
        per_q.setdefault(v.query_id, []).append(v.score("context_relevance"))  # type: ignore[arg-type]
    within = np.mean([np.var(x, ddof=1) for x in per_q.values()])
    between = np.var([np.mean(x) for x in per_q.values()], ddof=1)
    assert got.n_queries == 12 and got.judge_variance == pytest.approx(within)
    assert got.query_variance == pytest.approx(between)
    assert got.judge_share == pytest.approx(within / (within + between))
    assert got.ci_two_level is not None and got.ci_queries is not None
    # the two-level CI includes the repeats' noise: wider than resampling queries alone
    assert (got.ci_two_level[1] - got.ci_two_level[0]) > (got.ci_queries[1] - got.ci_queries[0])


def test_a_deterministic_judge_has_no_judge_noise() -> None:
    groups = [[0.5, 0.5, 0.5], [0.25, 0.25, 0.25], [1.0, 1.0, 1.0]]
    lo, hi = two_level_ci(groups, resamples=200, seed=0, confidence=0.95)
    assert 0.25 <= lo <= hi <= 1.0
    rows = mean_over_repeats([])
    assert rows == []
