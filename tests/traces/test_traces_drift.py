"""Drift tests: the unbiased MMD² by its formula, calibrated p-values on clean windows,
power on shifted ones, too-small windows without a p-value, and the calibration loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.traces.__main__ import main
from bench.traces.drift import _mmd2_unbiased, calibrate, classifier_test, mmd_test


def test_unbiased_mmd_matches_its_formula() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(4, 2)), rng.normal(size=(3, 2)) + 1
    z = np.vstack([x, y])
    k = np.exp(-((z[:, None] - z[None]) ** 2).sum(-1) / 2.0)
    m, n = 4, 3
    kxx, kyy, kxy = k[:m, :m], k[m:, m:], k[:m, m:]
    expect = ((kxx.sum() - m) / (m * (m - 1)) + (kyy.sum() - n) / (n * (n - 1))
              - 2 * kxy.sum() / (m * n))
    assert _mmd2_unbiased(k, np.r_[np.zeros(m), np.ones(n)]) == pytest.approx(expect)


def test_false_alarms_near_alpha_and_power_on_a_shift() -> None:
    rng = np.random.default_rng(1)
    alarms = {"mmd": 0, "c2st": 0}
    for s in range(20):
        a, b = rng.normal(size=(40, 8)), rng.normal(size=(40, 8))
        alarms["mmd"] += mmd_test(a, b, n_perm=200, seed=s).drifted(0.05)
        alarms["c2st"] += classifier_test(a, b, seed=s).drifted(0.05)
    # Binomial(20, 0.05): P(X >= 5) = 0.003
    assert alarms["mmd"] <= 4 and alarms["c2st"] <= 4
    shifted = rng.normal(size=(40, 8)) + np.r_[np.full(2, 1.0), np.zeros(6)]
    ref = rng.normal(size=(40, 8))
    assert mmd_test(ref, shifted, n_perm=200).p_value < 0.01
    c = classifier_test(ref, shifted)
    assert c.p_value < 0.01 and c.statistic > 0.6  # AUC


def test_too_small_windows_have_no_p_value(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(2)
    r = mmd_test(rng.normal(size=(10, 3)), rng.normal(size=(50, 3)))
    assert r.status == "too_small" and r.p_value is None and not r.drifted(0.05)
    assert classifier_test(rng.normal(size=(50, 3)), rng.normal(size=(5, 3))).p_value is None
    ref, cur = tmp_path / "ref.jsonl", tmp_path / "cur.jsonl"
    ref.write_text("".join(f'{{"query": "q{i}"}}\n' for i in range(30)))
    cur.write_text("".join(f'{{"query": "c{i}"}}\n' for i in range(7)))
    assert main(["drift", str(ref), str(cur)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{cur}: 7 queries: the drift tests need at least 20 per window (--min-window); "
        "no p-value")


def test_calibration_counts_alarms_per_shift() -> None:
    """Four clusters, the fourth absent from the reference; paraphrases are small jitters
    (same meaning): the absent category is found as its share grows, clean windows and
    paraphrases rarely alarm."""
    rng = np.random.default_rng(3)
    centers = rng.normal(scale=3.0, size=(4, 6))
    cats = np.repeat(["a", "b", "c", "new"], 150)
    emb = centers[np.repeat(np.arange(4), 150)] + rng.normal(size=(600, 6))
    para = emb + rng.normal(scale=0.05, size=emb.shape)
    rows = calibrate(emb, cats, absent="new", paraphrased=para, sizes=(0.1, 0.5), window=40,
                     n_windows=20, n_perm=100, tests=("mmd",))
    rate = {(r.shift, r.size): r.rate for r in rows}
    assert all(r.windows == 20 for r in rows)
    assert rate[("none", 0.0)] <= 0.2
    assert rate[("absent_category", 0.5)] == 1.0
    assert rate[("absent_category", 0.5)] >= rate[("absent_category", 0.1)]
    assert rate[("paraphrase", 0.5)] <= 0.2
