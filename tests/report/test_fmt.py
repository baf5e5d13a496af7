"""The one number formatter (bench/report/fmt.py): every report module writes numbers with it,
so these cases are the formats the reports print."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.report.fmt import cell, common_value, num


@pytest.mark.parametrize(("args", "kwargs", "text"), [
    ((None,), {}, "-"),
    ((0.123456,), {}, "0.1235"),  # the default: 4 decimals (metric means)
    ((2 / 3, 3), {}, "0.667"),
    ((1.25, 1, "+"), {}, "+1.2"),  # round half to even, as f-strings do
    ((-0.5, 1, "+"), {}, "-0.5"),
    ((1234.5, 0), {}, "1234"),
    ((math.nan, 3), {}, "nan"),  # a NaN is shown as such unless the caller says it is missing
    ((math.nan, 3), {"finite": True}, "-"),
    ((np.float64(np.inf), 3), {"finite": True}, "-"),
    ((np.float32(0.5), 3), {"finite": True}, "0.500"),
    ((0.000123456789,), {"spec": ".6g"}, "0.000123457"),  # a gate's bound in JUnit
    ((None,), {"spec": ".6g"}, "-"),
])
def test_num(args: tuple[object, ...], kwargs: dict[str, object], text: str) -> None:
    assert num(*args, **kwargs) == text  # type: ignore[arg-type]


def test_cell_keeps_the_number_for_sorting() -> None:
    assert cell(0.5, 2) == ("0.50", 0.5)
    assert cell(None) == ("-", None)


def test_a_metric_is_saturated_only_when_two_or_more_configs_agree() -> None:
    assert common_value([1.0, 1.0, 1.0 + 1e-12]) == 1.0
    assert common_value([1.0]) is None
    assert common_value([1.0, 0.99]) is None
