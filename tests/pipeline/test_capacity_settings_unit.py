"""``bench.capacity.run.in_process.study_settings`` directly on ``CapacityConfig`` values:
every out-of-range setting is refused by its own key, the http-target rules on faults hold,
and a valid config maps field by field (no study run)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bench.capacity.run.in_process import slo_of, study_settings
from bench.config.schema import CapacityConfig
from bench.errors import ConfigError

OK = CapacityConfig(slo_e2el_ms=500.0)

BAD: tuple[tuple[str, Any], ...] = (
    ("level_seconds", 0.0), ("level_min_requests", 0), ("burstiness", 0.0),
    ("timeout_s", 0.0), ("retries", -1), ("attainment", 1.5), ("attainment", 0.0),
    ("knee_start_rps", 0.0), ("knee_repeats", 0), ("knee_ci_width", 0.0),
    ("knee_max_levels", 0), ("ceiling_limit_ms", 0.0), ("ceiling_max_rps", -1.0),
    ("ceiling_min_requests", 0), ("closed_users", 0), ("sweep_shares", [0.5, 0.0]),
    ("fault_share", 0.0), ("workers", 0), ("component_max_levels", 0),
    ("component_max_seconds", 0.0), ("component_passages", 0), ("target_rps", 0.0),
    ("unloaded_queries", 0), ("generator_processes", 0), ("max_concurrency", 0))


@pytest.mark.parametrize(("field", "value"), BAD, ids=[f"{f}={v}" for f, v in BAD])
def test_each_out_of_range_setting_names_its_key(field: str, value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        study_settings(replace(OK, **{field: value}))
    assert err.value.key == f"capacity.{field}"


def test_cross_field_ranges_and_the_target_rules() -> None:
    with pytest.raises(ConfigError, match="level_max_requests"):
        study_settings(replace(OK, level_min_requests=50, level_max_requests=10))
    with pytest.raises(ConfigError, match="knee_repeats"):
        study_settings(replace(OK, knee_repeats=5, knee_max_repeats=3))
    with pytest.raises(ConfigError, match=r"capacity\.target.*in_process or serve or http"):
        study_settings(replace(OK, target="grpc"))
    with pytest.raises(ConfigError, match="no fault is injected unless"):
        study_settings(replace(OK, target="http", faults=["status_503"]))
    with pytest.raises(ConfigError, match="restart: bench has no process"):
        study_settings(replace(OK, target="http", faults=["restart"], allow_faults=True))
    assert study_settings(replace(OK, target="http", faults=["status_503"],
                                  allow_faults=True)).faults[0].kind == "status_503"
    with pytest.raises(ConfigError, match=r"capacity\.components.*unknown \['chain'\]"):
        study_settings(replace(OK, components=["chain"]))  # the chain is not a component


def test_slos_need_one_and_each_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="goodput needs at least one SLO"):
        slo_of(replace(OK, slo_e2el_ms=None, slo_ttft_ms=None, slo_tpot_ms=None))
    with pytest.raises(ConfigError) as err:
        slo_of(replace(OK, slo_ttft_ms=-1.0))
    assert err.value.key == "capacity.slo_ttft_ms"
    assert slo_of(replace(OK, slo_ttft_ms=200.0)) == {"ttft": 200.0, "e2el": 500.0}


def test_a_valid_config_maps_field_by_field() -> None:
    cap = replace(OK, level_seconds=3.0, knee_start_rps=7.0, ceiling_min_requests=50,
                  sweep_shares=[0.5, 1.0], price_per_hour=2.5, target_rps=40.0)
    st = study_settings(cap)
    assert (st.level_seconds, st.knee_start_rps, st.ceiling_min_requests, st.sweep_shares,
            st.price_per_hour, st.plan_rps, st.slo_ms) == (
        3.0, 7.0, 50, (0.5, 1.0), 2.5, 40.0, {"e2el": 500.0})
