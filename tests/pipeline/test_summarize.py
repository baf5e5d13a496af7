from __future__ import annotations

import numpy as np
import pytest

from bench.errors import ConfigError
from bench.pipeline.summarize import summarize


def _rows(weights: dict[str, float]) -> dict[str, float | None]:
    vals = {"mrr": np.array([1.0, 0.0, 0.5, 0.5, 1.0])}
    cats = ["a", "a", "b", "b", "b"]
    rows = summarize("c", cats, vals, category_weights=weights, resamples=200, confidence=0.95,
                     seed=0)
    return {r.scope: r.mean for r in rows}


def test_macro_and_weighted_points() -> None:
    got = _rows({})
    assert got["macro"] == pytest.approx((0.5 + 2.0 / 3) / 2)  # categories weigh the same
    assert got["weighted"] == pytest.approx(3.0 / 5)  # frequency weights = the plain mean
    assert _rows({"a": 3.0, "b": 1.0})["weighted"] == pytest.approx(0.75 * 0.5 + 0.25 * 2 / 3)


def test_missing_traffic_weight_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        _rows({"a": 1.0})  # "b" has no weight: dropping it would change the number
    assert err.value.key == "metrics.category_weights"
