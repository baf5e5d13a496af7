"""Shared fixtures. GPU tests are marked `gpu` and skipped on machines without CUDA."""

from __future__ import annotations

import os
from typing import ClassVar

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def compose_cfg():  # type: ignore[no-untyped-def]
    """compose_cfg(overrides) -> the config `python -m bench` would run, hydra resolvers set."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    def _compose(overrides: list[str]) -> DictConfig:
        register()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg

    return _compose


class RewriteGenerator:
    """Deterministic test double of the Generator protocol for query rewrites (referenced by
    ``_target_: conftest.RewriteGenerator``): the answer repeats the prompt's last line's
    query words, plus ``variant <seed>`` for seeds > 0; ``fail_every`` > 0 fails every
    request whose seed is a multiple of it (status error). Records every request id."""

    calls: ClassVar[list[str]] = []

    def __init__(self, *, fail_every: int = 0) -> None:
        self.fail_every = fail_every

    def cache_params(self) -> dict[str, object]:
        return {"backend": "rewrite-fake", "model": "fake-1", "fail_every": self.fail_every}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests):  # type: ignore[no-untyped-def]
        from bench.generation.base import Generation

        out = []
        for r in requests:
            type(self).calls.append(r.request_id)
            seed = r.sampling.seed
            if self.fail_every and seed % self.fail_every == 0:
                out.append(Generation(r.request_id, "", "error", "error", 0, 0, None, None,
                                      1.0, error="scripted failure"))
                continue
            user = r.messages[-1].content
            query = next((ln.split(":", 1)[1] for ln in user.splitlines()
                          if ln.startswith(("Query:", "Question:"))), user).strip()
            text = query + (f" variant {seed}" if seed else "")
            out.append(Generation(r.request_id, text, "ok", "stop", len(user.split()),
                                  len(text.split()), 1.0, 0.5, 2.0))
        return out

    def close(self) -> None:
        pass
