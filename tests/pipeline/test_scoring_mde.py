"""comparisons' ``mde``: the paired effect each comparison detects with 80 % power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.metrics.power import z_sum
from bench.pipeline.scoring import compare
from bench.results.scores import scores_from_long


def _scores(config_id: str, values: np.ndarray, cats: list[str]):  # type: ignore[no-untyped-def]
    n = values.size
    return scores_from_long(config_id, [f"q{i}" for i in range(n)], cats, ["ndcg@10"] * n,
                            values.tolist(), ["scored"] * n)


def test_mde_from_the_deltas_sd_at_the_bonferroni_level() -> None:
    rng = np.random.default_rng(0)
    n = 200
    cats = ["a" if i % 4 else "b" for i in range(n)]
    base = rng.random(n)
    b = np.clip(base + rng.normal(0.02, 0.1, n), 0, 1)
    c = np.clip(base + rng.normal(0.00, 0.2, n), 0, 1)
    rows = compare([_scores("A", base, cats), _scores("B", b, cats), _scores("C", c, cats)],
                   ["ndcg@10"], resamples=200, confidence=0.95, seed=0)
    got = {(r.config_id, r.scope): r for r in rows}
    assert set(got) == {(x, s) for x in "BC" for s in ("all", "category:a", "category:b")}
    # two configs compared with A: z_{1 - 0.05 / 4} + z_{0.8}
    k = z_sum(alpha=0.05, power=0.8, comparisons=2)
    assert k == pytest.approx(2.241403 + 0.841621, abs=1e-5)
    for (cfg, scope), r in got.items():
        vals = {"B": b, "C": c}[cfg]
        sel = np.ones(n, bool) if scope == "all" else np.asarray(cats) == scope[-1]
        sd = float(np.std(vals[sel] - base[sel], ddof=1))
        assert r.mde == pytest.approx(k * sd / math.sqrt(int(sel.sum())), rel=1e-12)
    # C's deltas spread twice as wide: about twice the MDE
    assert got[("C", "all")].mde > 1.7 * got[("B", "all")].mde  # type: ignore[operator]


def test_mde_is_none_without_spread_and_power_is_a_knob() -> None:
    v = np.linspace(0, 1, 50)
    cats = ["x"] * 50
    same = compare([_scores("A", v, cats), _scores("B", v.copy(), cats)], ["ndcg@10"],
                   resamples=100, confidence=0.95, seed=0)
    assert {r.mde for r in same} == {None}
    rng = np.random.default_rng(1)
    w = v + rng.normal(0, 0.1, 50)
    lo = compare([_scores("A", v, cats), _scores("B", w, cats)], ["ndcg@10"], resamples=100,
                 confidence=0.95, seed=0, power=0.5)[0].mde
    hi = compare([_scores("A", v, cats), _scores("B", w, cats)], ["ndcg@10"], resamples=100,
                 confidence=0.95, seed=0, power=0.9)[0].mde
    assert lo is not None and hi is not None
    # z_{0.5} = 0 and z_{0.9} = 1.281552
    assert hi / lo == pytest.approx((1.959964 + 1.281552) / 1.959964, rel=1e-5)
