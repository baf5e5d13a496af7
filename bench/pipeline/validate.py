"""The whole config checked before any work: top-level keys, the query subset, the latency
pass, the regression gates' baseline, the capacity and freshness studies' settings (each bad
value one line naming its key, exit 2). Per-stage options are checked when the stage list
builds its components (``bench.pipeline.components``)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from bench.config.toplevel import validate_top_level_config
from bench.data.subset import check_subset
from bench.errors import ConfigError
from bench.gates.regression import from_config


def validate_top_level(cfg: DictConfig) -> None:
    # unknown `+` keys, huge ints, gates that can never fire, cache_dir on a file: see there
    validate_top_level_config(cfg)
    check_subset(cfg.subset)
    for key, low in (("queries", 1), ("warmup", 0)):  # the latency pass (bench.pipeline.latency)
        v = cfg.latency[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ConfigError(f"latency.{key}", f"must be an integer >= {low}, got {v!r}")
    from_config(cfg)  # the baseline run and the regression gates (read again by run_settings)
    # the capacity study's settings, before the run they follow
    if cfg.capacity.config or (cfg.capacity.load == "open" and cfg.capacity.target == "http"):
        from bench.capacity.run import check_capacity

        check_capacity(cfg.capacity)
    if cfg.capacity.freshness:  # the freshness study's options, before any work
        from bench.capacity.freshness import build_study

        build_study(cfg.capacity.freshness)
    if cfg.robustness:  # the robustness study's options and generator, before any work
        from bench.config.build import build
        from bench.robustness.study import build_study as build_robustness
        from bench.robustness.study import split_node

        build_robustness(cfg.robustness)
        build(split_node(cfg.robustness)[1], "robustness.generator")  # loads no model
    if cfg.scale_plan.profile:  # the scale planner's profile and stated figures (plan_only)
        from bench.scaling.preview import check_scale_plan

        check_scale_plan(OmegaConf.to_container(cfg.scale_plan, resolve=True))  # type: ignore[arg-type]
