"""``bench.capacity.run.in_process.study_settings`` directly on ``CapacityConfig`` values:
every out-of-range setting is refused by its own key, the http-target rules on faults hold,
a valid config maps field by field, and every setting the study shares with the config
has the config's default and is copied from it (no study run)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace
from typing import Any

import pytest

from bench.capacity.run.in_process import slo_of, study_settings
from bench.capacity.study import (
    RECORD_NAMES,
    RECORD_ORDER,
    StudySettings,
    settings_record,
    study_key,
)
from bench.config.schema import CapacityConfig, LoadSettings
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
            st.price_per_hour, st.target_rps, st.slo_ms) == (
        3.0, 7.0, 50, [0.5, 1.0], 2.5, 40.0, {"e2el": 500.0})



def test_the_config_and_the_study_share_one_declaration() -> None:
    # every load setting is a field of both, declared once (LoadSettings): same name, type
    # and default; the study adds only what the config has no key for or parses
    load = {f.name: (f.type, f.default, f.default_factory) for f in fields(LoadSettings)}
    for cls in (CapacityConfig, StudySettings):
        mine = {f.name: (f.type, f.default, f.default_factory) for f in fields(cls)}
        assert {k: mine[k] for k in load} == load, cls
    study_only = {f.name for f in fields(StudySettings)} - set(load)
    assert study_only == {"slo_ms", "faults", "ceiling_seconds", "seed"}
    assert study_settings(CapacityConfig()) == StudySettings(slo_ms={"e2el": 100.0})


def test_every_load_setting_is_copied_from_the_config() -> None:
    changed: dict[str, Any] = {}
    for f in fields(LoadSettings):
        v = getattr(OK, f.name)
        changed[f.name] = ({"max_concurrency": 3, "price_per_hour": 1.5}[f.name] if v is None
                           else not v if isinstance(v, bool) else v + 1 if isinstance(v, int)
                           else v / 2 if isinstance(v, float) else f"{v}!"
                           if isinstance(v, str) else [x / 2 for x in v])
    st = study_settings(replace(OK, **changed))
    for name, want in changed.items():
        assert getattr(st, name) == want, name


def test_a_yaml_int_for_a_float_setting_is_recorded_as_a_float() -> None:
    # OmegaConf casts on a typed node; a plain CapacityConfig(**dict) does not: the study's
    # record (and so its key) must not tell the two apart
    st = study_settings(replace(OK, target_rps=40, sweep_shares=[1, 2], knee_start_rps=3))
    rec = json.dumps(settings_record(st))
    assert '"plan_rps": 40.0' in rec and '"sweep_shares": [1.0, 2.0]' in rec
    assert '"knee_start_rps": 3.0' in rec


def test_the_record_keeps_its_published_names_and_order() -> None:
    rec = settings_record(study_settings(OK))
    assert tuple(rec) == RECORD_ORDER
    plain = asdict(study_settings(OK))
    assert {RECORD_NAMES.get(k, k): v for k, v in plain.items()} == rec  # each field once


def test_the_level_store_key_of_the_default_config_is_pinned() -> None:
    # levels measured under this key are reused by a rerun (capacity.resume): a change here
    # re-measures every study, so it must be meant (a setting's default or type changed)
    assert study_key("b", study_settings(CapacityConfig())) == "41304c90c4e7936d"
