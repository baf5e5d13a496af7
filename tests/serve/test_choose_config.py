"""Which config ``bench.serve`` serves: by id, by a unique label, or by a unique kind
(``config=generated``: the one generated config of a run that also lists its pool)."""

from __future__ import annotations

import pytest

from bench.errors import ConfigError
from bench.pipeline.lanes import ConfigKind, ConfigSpec
from bench.serve.service import choose_config


def _spec(cid: str, label: str, kind: ConfigKind) -> ConfigSpec:
    return ConfigSpec(cid, label, kind, None, {})  # type: ignore[arg-type]


POOL = _spec("a1", "dense(ef_search=16)", ConfigKind.DENSE)
GEN = _spec("b2", "dense(ef_search=16)>gen(smollm2-135m-instruct)", ConfigKind.GENERATED)


def test_by_id_label_or_unique_kind() -> None:
    assert choose_config([POOL, GEN], "b2") is GEN
    assert choose_config([POOL, GEN], "dense(ef_search=16)") is POOL
    assert choose_config([POOL, GEN], "generated") is GEN
    with pytest.raises(ConfigError, match="this run has 2 configs: name one"):
        choose_config([POOL, GEN], None)


def test_a_kind_of_several_configs_is_refused() -> None:
    other = _spec("c3", "dense>gen(x)", ConfigKind.GENERATED)
    with pytest.raises(ConfigError, match="kind 'generated' names 2 configs; use a config id"):
        choose_config([POOL, GEN, other], "generated")
    with pytest.raises(ConfigError, match="no config 'reranked' in this run"):
        choose_config([POOL, GEN], "reranked")
