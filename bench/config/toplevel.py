"""Checks of the top-level config (everything outside the stage groups) before any work.

OmegaConf types the top level (``bench.config.schema``), but it lets through what this module
catches, each a ``ConfigError`` naming the dotted key:

- keys added with ``+key=value`` that the schema does not know (OmegaConf stores them; the run
  would record a setting that did nothing);
- integers so large that numpy overflows on them later (seed, relevance level, cutoffs);
- metric names not written in their canonical form (``ndcg@010``), listed twice, or out of
  range;
- metric names that are not ranking metrics in ``metrics.names`` (answer and judge metrics
  are computed by generated configs on their own; gate them directly);
- release gates that can never fire: an unknown or wrongly-cased scope, a ranking metric the
  run does not compute, a set-level figure that is not gateable, a non-canonical metric name
  (gates match summary rows by exact name), a bound that is not a finite number, ``min > max``
  (which configs of the planned run compute an answer, judge or config metric is checked
  once the run is planned, before any work: ``bench.gates.release``);
- a ``cache_dir`` that is (or lies under) a file.

``check_gate_categories`` is the part that needs the loaded dataset: a ``category:<name>``
scope naming a category the dataset does not have can never fire either; and
``check_gates_matched`` is the backstop after scoring (a gate that matched no summary row).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from bench.config.schema import BenchConfig, GateConfig, MetricsConfig
from bench.errors import BenchError, ConfigError
from bench.pipeline.stages import config_gate_metrics

#: 32-bit bound for cutoffs and relevance levels (trec_eval and our kernels' int arrays).
MAX_INT32 = 2**31 - 1
#: numpy seeds must fit an unsigned 64-bit integer; we keep them in the signed range.
MAX_SEED = 2**63 - 1
#: more resamples than this only burns time: the CI's Monte-Carlo error is already < 1e-3.
MAX_RESAMPLES = 1_000_000
#: scopes that are not ``category:<name>``, exactly as ``bench.pipeline.summarize`` writes them.
FIXED_SCOPES = ("all", "macro", "weighted")
CATEGORY_PREFIX = "category:"
#: metric families the pipeline adds on its own (not listed in metrics.names): ANN recall vs
#: the exact search, for approximate indexes. A gate on one is checked after the run instead
#: (``check_gates_matched``), since whether it is computed depends on the index.
PIPELINE_FAMILIES = ("ann_recall",)
#: budget gates: columns of configs.parquet, one value per config, gated with scope ``all``
#: (latency in ms, VRAM in bytes, cost in the configured price's currency); each stage of
#: the stage list names the columns it fills (``bench.pipeline.stages``)
CONFIG_GATE_METRICS = config_gate_metrics()


def validate_top_level_config(cfg: DictConfig) -> None:
    """Raise ConfigError (one line, dotted key) for the first bad top-level setting."""
    check_known_keys(cfg)
    _check_int("seed", cfg.seed, 0, MAX_SEED)
    names = check_metrics(cfg.metrics)
    check_gates(cfg.gates, names)
    check_cache_dir(cfg.cache_dir)


def _fields(schema: type) -> set[str]:
    return {f.name for f in dataclasses.fields(schema)}


def _unknown(node: Any, allowed: set[str], key: str) -> None:
    if not isinstance(node, Mapping | DictConfig):
        return
    for name in node:
        if name not in allowed:
            where = f"{key}.{name}" if key else str(name)
            raise ConfigError(where, "unknown key (not in the config schema; was it added with "
                                     f"`+`?); allowed: {', '.join(sorted(allowed))}")


def check_known_keys(cfg: DictConfig) -> None:
    """Every top-level, ``metrics.*`` and ``gates[i].*`` key must be in the schema."""
    # `hydra` is present only when a caller composed with return_hydra_config=True
    _unknown(cfg, _fields(BenchConfig) | {"hydra"}, "")
    _unknown(cfg.metrics, _fields(MetricsConfig), "metrics")
    gates = cfg.gates
    if not isinstance(gates, ListConfig | list):
        raise ConfigError("gates", f"must be a list of gates, got {_short(gates)}")
    for i, gate in enumerate(gates):
        if not isinstance(gate, DictConfig | Mapping):
            raise ConfigError(f"gates[{i}]", f"must be a mapping with metric/scope/min/max, got "
                                             f"{_short(gate)}")
        _unknown(gate, _fields(GateConfig), f"gates[{i}]")


def _short(value: object) -> str:
    text = repr(OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig)
                else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_int(key: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key, f"expected an integer, got {_short(value)}")
    if not lo <= value <= hi:
        raise ConfigError(key, f"must be between {lo} and {hi}, got {_short(value)}")
    return value


def _check_number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(key, f"expected a number, got {_short(value)}")
    try:
        out = float(value)
    except OverflowError:
        raise ConfigError(key, f"must be a finite number, got {_short(value)}") from None
    if not math.isfinite(out):
        raise ConfigError(key, f"must be a finite number, got {value!r}")
    return out


def _canonical_metric(key: str, name: object) -> str:
    from bench.metrics.registry import parse_metric

    if not isinstance(name, str):
        raise ConfigError(key, f"expected a metric name, got {_short(name)}")
    try:
        spec = parse_metric(name)
    except BenchError as exc:
        raise ConfigError(key, exc.one_line()) from None
    except (ValueError, OverflowError):  # a cutoff of more than 4300 digits
        raise ConfigError(key, f"metric {_short(name)}: the cutoff is too large") from None
    if spec.k is not None and spec.k > MAX_INT32:
        raise ConfigError(key, f"metric {_short(name)}: the cutoff must be <= {MAX_INT32}")
    if spec.name != name:
        # results and gates match metrics by their exact name: only one spelling may exist
        raise ConfigError(key, f"write the metric as {spec.name!r}, not {name!r}")
    return spec.name


def check_metrics(m: Any) -> list[str]:
    """Validate ``metrics.*``; returns the canonical metric names the run computes."""
    if not m.names:
        raise ConfigError("metrics.names", "must list at least one metric")
    from bench.metrics.registry import parse_metric

    names: list[str] = []
    for i, name in enumerate(m.names):
        canonical = _canonical_metric(f"metrics.names[{i}]", name)
        layer = parse_metric(canonical).layer
        if layer != "retrieval":
            # evaluate() scores rankings only: the other layers compute their own metrics
            what = {"answer": "an answer check of generated configs",
                    "judge": "a judge metric of generated configs",
                    "ann": "added by the pipeline for approximate indexes"}.get(
                        layer, "a set-level figure")
            raise ConfigError(f"metrics.names[{i}]",
                              f"{canonical!r} is not a ranking metric ({what}); metrics.names "
                              "lists ranking metrics only — gate it directly with "
                              f"gates=[{{metric: {canonical}, ...}}]")
        if canonical in names:
            raise ConfigError(f"metrics.names[{i}]", f"{canonical!r} is listed twice")
        names.append(canonical)
    _check_int("metrics.relevance_level", m.relevance_level, 1, MAX_INT32)
    if isinstance(m.bootstrap_resamples, int) and m.bootstrap_resamples < 100:
        raise ConfigError("metrics.bootstrap_resamples",
                          "must be >= 100 (docs/metrics.md asks 1000)")
    _check_int("metrics.bootstrap_resamples", m.bootstrap_resamples, 100, MAX_RESAMPLES)
    conf = _check_number("metrics.confidence", m.confidence)
    if not 0.5 < conf < 1.0:
        raise ConfigError("metrics.confidence", f"must be in (0.5, 1), got {m.confidence}")
    for cat, weight in m.category_weights.items():
        w = _check_number(f"metrics.category_weights.{cat}", weight)
        if w < 0:
            raise ConfigError(f"metrics.category_weights.{cat}", f"must be >= 0, got {weight}")
    return names


def check_scope(key: str, scope: object) -> None:
    """A gate scope: ``all``, ``macro``, ``weighted`` or ``category:<name>``, exactly."""
    if not isinstance(scope, str):
        raise ConfigError(key, f"expected a scope string, got {_short(scope)}")
    if scope in FIXED_SCOPES:
        return
    if scope.startswith(CATEGORY_PREFIX):
        name = scope[len(CATEGORY_PREFIX):]
        if name and name == name.strip():
            return
        raise ConfigError(key, f"scope {scope!r}: the category name is empty or has "
                               "surrounding whitespace")
    hint = ""
    low = scope.strip().lower()
    if low in FIXED_SCOPES:
        hint = f" (scopes are case-sensitive: write {low!r})"
    elif low.startswith(CATEGORY_PREFIX):
        name = scope.strip()[len(CATEGORY_PREFIX):]
        hint = f" (the prefix is lower-case: write '{CATEGORY_PREFIX}{name}')"
    raise ConfigError(key, f"unknown scope {scope!r}; use one of all, macro, weighted, "
                           f"category:<name>{hint}")


def check_gates(gates: Iterable[Any], metric_names: list[str]) -> None:
    """Every gate must be able to fire: a computed metric, a known scope, a finite bound."""
    for i, gate in enumerate(gates):
        key = f"gates[{i}]"
        if isinstance(gate.metric, str) and gate.metric in CONFIG_GATE_METRICS:
            if gate.scope != "all":
                raise ConfigError(f"{key}.scope", f"{gate.metric} is one value per config: "
                                                  "use scope all")
            if gate.use_ci_bound:
                raise ConfigError(f"{key}.use_ci_bound", f"{gate.metric} has no CI: set false")
        else:
            metric = _gate_metric(f"{key}.metric", gate.metric)
            layer = _layer(metric)
            if layer == "set":
                raise ConfigError(f"{key}.metric", f"{metric!r} is reported but not gateable; "
                                                   "gateable: ranking metrics in metrics.names, "
                                                   "answer and judge metrics, "
                                                   f"{', '.join(CONFIG_GATE_METRICS)}")
            # answer and judge metrics come from generated configs: which configs of the
            # plan compute them is checked once it is planned (bench.gates.release)
            if layer == "retrieval" and metric not in metric_names:
                raise ConfigError(f"{key}.metric", f"{metric!r} is not computed by this run; "
                                                   f"add it to metrics.names "
                                                   f"({', '.join(metric_names)})")
            check_scope(f"{key}.scope", gate.scope)
        lo = None if gate.min is None else _check_number(f"{key}.min", gate.min)
        hi = None if gate.max is None else _check_number(f"{key}.max", gate.max)
        if lo is None and hi is None:
            raise ConfigError(key, "needs min or max")
        if lo is not None and hi is not None and lo > hi:
            raise ConfigError(key, f"min {lo} > max {hi}: the gate fails on every value")


def _layer(metric: str) -> str:
    from bench.metrics.registry import parse_metric

    return parse_metric(metric).layer


def _gate_metric(key: str, name: object) -> str:
    """A quality metric name; a near-miss of a budget gate name says which one was meant."""
    try:
        return _canonical_metric(key, name)
    except ConfigError as exc:
        import difflib

        close = difflib.get_close_matches(str(name), CONFIG_GATE_METRICS, n=1)
        if not close:
            raise ConfigError(key, f"{exc.message}; budget gates: "
                                   f"{', '.join(CONFIG_GATE_METRICS)}") from None
        raise ConfigError(key, f"unknown gate metric {name!r}; did you mean {close[0]!r}?"
                          ) from None


def check_gate_categories(gates: Iterable[Any], categories: Iterable[str]) -> None:
    """After the dataset is loaded: a ``category:<name>`` scope must name one of its
    categories, else the gate matches no summary row and silently never fires."""
    known = sorted(set(categories))
    for i, gate in enumerate(gates):
        scope = gate.scope
        if isinstance(scope, str) and scope.startswith(CATEGORY_PREFIX):
            name = scope[len(CATEGORY_PREFIX):]
            if name not in known:
                raise ConfigError(f"gates[{i}].scope", f"the dataset has no category {name!r}; "
                                                       f"its categories: {', '.join(known)}")


def check_gates_matched(gates: Iterable[Any], rows: Iterable[tuple[str, str]]) -> None:
    """After scoring: every gate must match at least one summary row ``(metric, scope)``.

    The backstop for what cannot be known before the run (an ``ann_recall@K`` gate on an
    exact index, a cutoff the pipeline does not report): a gate that matches nothing would
    pass silently, so it is a ConfigError instead.
    """
    present = set(rows)
    for i, gate in enumerate(gates):
        if gate.metric in CONFIG_GATE_METRICS:
            continue  # read from configs.parquet rows, present for every config
        if (gate.metric, gate.scope) not in present:
            metrics = sorted({m for m, _ in present})
            raise ConfigError(f"gates[{i}]", f"{gate.metric} [{gate.scope}] was not computed by "
                                             f"this run, so the gate could never fire; computed: "
                                             f"{', '.join(metrics)}")


def check_cache_dir(value: object) -> Path:
    """``cache_dir`` must be a directory or creatable as one (no file on its path)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("cache_dir", f"must be a directory path, got {_short(value)}")
    path = Path(value).expanduser()
    probe = path
    while True:
        if probe.exists():
            if not probe.is_dir():
                what = "is a file" if probe == path else f"lies under the file {probe}"
                raise ConfigError("cache_dir", f"{value} {what}, not a directory")
            return path
        if probe.parent == probe:
            return path
        probe = probe.parent
