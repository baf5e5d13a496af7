"""The stage budget's estimators and option checks."""

from __future__ import annotations

import numpy as np
import pytest

from bench.budget.stages import StageBudget, power_fit, ratio_estimate, sample_estimate
from bench.config.build import OptionError


def test_power_fit_recovers_an_exact_power_law() -> None:
    n = np.array([64, 64, 128, 128, 256, 256], dtype=float)
    y = 2e-6 * n ** 1.5
    est = power_fit(n, y, 10_000.0, confidence=0.95, name="index_build_s", unit="seconds")
    assert est.predicted == pytest.approx(2e-6 * 10_000 ** 1.5, rel=1e-6)
    assert est.lower == pytest.approx(est.predicted, rel=1e-6)  # no residual: no width
    assert "b=1.500" in est.how


def test_power_fit_bounds_widen_with_noise() -> None:
    rng = np.random.default_rng(0)
    n = np.repeat([64.0, 128.0, 256.0], 3)
    y = 1e-3 * n * np.exp(rng.normal(0, 0.2, n.size))
    est = power_fit(n, y, 5000.0, confidence=0.95, name="x", unit="seconds")
    assert est.lower < est.predicted < est.upper
    with pytest.raises(ValueError, match="3 sizes"):
        power_fit(np.array([1.0, 2.0]), np.array([1.0, 2.0]), 10.0, confidence=0.9,
                  name="x", unit="s")


def test_ratio_estimate_scales_seconds_per_unit() -> None:
    # 4 batches at exactly 1 ms per token: 1e6 tokens take 1000 s, no spread
    est = ratio_estimate(np.array([0.1, 0.2, 0.1, 0.2]), np.array([100, 200, 100, 200]),
                         1e6, confidence=0.95, resamples=200, seed=0, name="e", how="")
    assert est.predicted == pytest.approx(1000.0)
    assert est.lower == pytest.approx(1000.0) and est.upper == pytest.approx(1000.0)


def test_sample_estimate_scale_is_a_price() -> None:
    est = sample_estimate(np.array([1000.0, 1000.0]), "mean", confidence=0.9, resamples=100,
                          seed=0, name="c", how="", scale=3.6 / 3_600_000.0)
    assert est.predicted == pytest.approx(0.001)


@pytest.mark.parametrize(("kw", "option"), [
    ({"max_index_build_s": -1.0}, "max_index_build_s"),
    ({"max_gen_ttft_p95_ms": 0.0}, "max_gen_ttft_p95_ms"),
    ({"max_embed_docs_cost": 1.0}, "max_embed_docs_cost"),
    ({"probe_chunks": 4}, "probe_chunks"),
    ({"max_e2e_p95_ms": -5.0}, "max_e2e_p95_ms"),
])
def test_bad_options_name_their_key(kw: dict, option: str) -> None:
    with pytest.raises(OptionError) as exc:
        StageBudget(**kw)
    assert exc.value.option == option


def test_ceilings_kept_by_key() -> None:
    b = StageBudget(max_index_bytes=10, price_per_hour=1.0, max_gen_cost_per_request=0.5,
                    max_stage_p95_ms={"rerank": 4.0})
    assert b.set_ceilings(("max_index_bytes", "max_index_build_s")) == {"max_index_bytes": 10.0}
    assert b.stage_ceiling("rerank") == 4.0 and b.stage_ceiling("embed_query") is None
