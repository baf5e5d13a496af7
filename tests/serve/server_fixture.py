"""Helpers for tests that need a real ``bench.serve`` process (reuse them in other suites:
``bench.serve.launch.ServedProcess`` is the launcher; this adds the test-side conveniences).

``served(overrides, cache_dir)`` starts ``python -m bench.serve`` on a free port with the
given Hydra overrides and a cache dir, waits (bounded) until ``/ready`` answers 200 and
ALWAYS stops it (SIGTERM, then SIGKILL) when the ``with`` block ends, whatever happened in it.
``in_process(overrides, cache_dir)`` is the same config prepared in this process
(``bench.pipeline.run.prepare``), for comparing a served answer with the run's own values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.serve.launch import ServedProcess

#: a served test config should be small: seconds, not minutes (the synthetic corpus)
SMALL = ("dataset=synthetic", "device=cpu", "metrics.bootstrap_resamples=200")
#: how long a test waits for readiness (a cold cache builds chunks, vectors, the index)
READY_TIMEOUT_S = 300.0


@contextmanager
def served(overrides: Sequence[str], cache_dir: Path, **kwargs: Any) -> Iterator[ServedProcess]:
    with ServedProcess([*overrides, f"cache_dir={cache_dir}"],
                       ready_timeout_s=kwargs.pop("ready_timeout_s", READY_TIMEOUT_S),
                       **kwargs) as proc:
        yield proc


def in_process(overrides: Sequence[str], cache_dir: Path) -> Any:
    """``bench.pipeline.run.Prepared`` for these overrides (composed like ``python -m bench``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register
    from bench.pipeline.run import prepare

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=[*overrides, f"cache_dir={cache_dir}"])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return prepare(cfg)
