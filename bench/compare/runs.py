"""The modes of ``python -m bench.compare`` that read every config of run or multirun dirs.

Each run dir is read through the one typed view of finished results (``bench.report.load``:
``configs.parquet`` as ``ConfigRow``, ``per_query.parquet`` as ``ConfigScores``), so finished
runs are evaluated with the same pairing the pipeline's comparisons use. A multirun folder
contributes every finished job (``bench.report.load.expand``); configs of
several runs are keyed ``<run>/<config_id>`` and must come from the same dataset (run.json
fingerprint), or their queries would not pair.

``--cheapest-equivalent``: ``bench.metrics.equivalence.cheapest_equivalent``; ``--decide``:
``bench.metrics.decisions.evaluate_decisions`` on the rules of the run's config (run.json) or
of a ``--rules`` file, at the run's confidence, resamples and seed.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.errors import InputError
from bench.metrics.cli import UsageError, format_table
from bench.metrics.equivalence import CheapestEquivalent, CostedConfig, cheapest_equivalent
from bench.report.load import ConfigView, load_runs
from bench.results.scores import ConfigScores


@dataclass(frozen=True)
class LoadedConfig:
    """One kept config of a finished run that has per-query values."""

    view: ConfigView
    scores: ConfigScores

    @property
    def key(self) -> str:
        return self.view.key

    @property
    def label(self) -> str:
        return self.view.label or self.view.config_id


@dataclass(frozen=True)
class Loaded:
    configs: tuple[LoadedConfig, ...]
    #: run.json of each run, in order
    manifests: tuple[dict[str, Any], ...]
    #: keys of configs left out (pruned) and multirun jobs without results
    skipped: tuple[str, ...]


def _fingerprint(manifest: dict[str, Any]) -> str | None:
    ds = manifest.get("dataset")
    fp = ds.get("fingerprint") if isinstance(ds, dict) else None
    return str(fp) if fp is not None else None


def load_configs(dirs: Sequence[Path]) -> Loaded:
    """Every kept config of the run dirs (multirun folders expanded), see the module doc."""
    merged = load_runs(dirs)
    configs: list[LoadedConfig] = []
    skipped = [f"{m} (no results)" for m in merged.missing_jobs]
    prints: dict[str, str] = {}
    for run in merged.runs:
        fp = _fingerprint(run.manifest)
        if fp is not None:
            prints.setdefault(fp, run.name)
        if len(prints) > 1:
            a, b = list(prints.items())[:2]
            raise UsageError(f"{b[1]} is on another dataset than {a[1]} (fingerprints "
                             f"{b[0][:12]} vs {a[0][:12]}): its queries do not pair")
        if run.per_query is None:
            raise InputError(run.run_dir / "per_query.parquet", 0,
                             "missing: not a finished run dir")
        for c in run.configs:
            if not c.kept:
                skipped.append(f"{c.key} (pruned)")
            elif c.scores is None:
                skipped.append(f"{c.key} (no per-query rows)")
            else:
                configs.append(LoadedConfig(c, c.scores))
    if not configs:
        raise UsageError("no kept config with per-query values in " + ", ".join(map(str, dirs)))
    return Loaded(tuple(configs), tuple(r.manifest for r in merged.runs), tuple(skipped))


def resolve(configs: Sequence[LoadedConfig], wanted: str, flag: str) -> LoadedConfig:
    """A config named by key, config id or label; ambiguity and absence are UsageErrors."""
    names: tuple[Callable[[LoadedConfig], str], ...] = (
        lambda c: c.key, lambda c: c.scores.config_id, lambda c: c.label)
    for name in names:
        hits = [c for c in configs if name(c) == wanted]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise UsageError(f"{flag} {wanted!r} names {[c.key for c in hits]}: use a key")
    shown = ", ".join(f"{c.key} ({c.label})" for c in configs)
    raise UsageError(f"{flag} {wanted!r} names no config; there are {shown}")


def _cost(c: LoadedConfig, column: str) -> float | None:
    v = c.view.columns.get(column)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise UsageError(f"--cost {column!r} is not a numeric column of configs.parquet "
                         f"({c.key}: {v!r})")
    return float(v) if math.isfinite(v) else None


def cheapest_main(args: argparse.Namespace) -> int:
    if args.margin is None or not (math.isfinite(args.margin) and args.margin > 0):
        raise UsageError("--cheapest-equivalent needs --margin D (> 0, in the metrics' units)")
    if not args.metric:
        raise UsageError("--cheapest-equivalent needs --metric M ... (the first picks the best)")
    loaded = load_configs(args.runs)
    columns = set().union(*(c.view.columns.keys() for c in loaded.configs))
    if args.cost not in columns:
        numeric = sorted(k for k in columns if k.endswith(("_ms", "_bytes", "_s", "per_query")))
        raise UsageError(f"--cost {args.cost!r} is not a configs.parquet column; try one of "
                         f"{numeric}")
    for m in args.metric:
        if not any(m in c.scores.values for c in loaded.configs):
            have = sorted({k for c in loaded.configs for k in c.scores.values})
            raise UsageError(f"--metric {m!r} is in no config; the runs have {have}")
    costed = [CostedConfig(c.key, c.label, _cost(c, args.cost), c.scores)
              for c in loaded.configs]
    best = None if args.best is None else resolve(loaded.configs, args.best, "--best").key
    try:
        result = cheapest_equivalent(costed, metrics=list(dict.fromkeys(args.metric)),
                                     margin=args.margin, alpha=args.alpha, best=best,
                                     scope=args.scope)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.format == "json":
        print(json.dumps({"cost": args.cost, "skipped": list(loaded.skipped),
                          **asdict(result)}, indent=2, default=str))
    else:
        print(render_cheapest(result, args.cost, loaded.skipped))
    return 0


def _shown(cost: float | None) -> object:
    """A cost as printed: integral costs (bytes) as integers, not as 4-decimal floats."""
    return int(cost) if cost is not None and cost.is_integer() else cost


def _cost_text(cost: float | None) -> str:
    shown = _shown(cost)
    return "-" if shown is None else f"{shown:.4g}" if isinstance(shown, float) else str(shown)


def render_cheapest(r: CheapestEquivalent, cost: str, skipped: Sequence[str] = ()) -> str:
    level = f"{100 * (1 - 2 * r.alpha):g} %"
    head = (f"best: {r.best} · equivalent: every metric's paired delta vs the best has its "
            f"{level} t interval inside +-{r.margin:g} (TOST at alpha {r.alpha}, scope "
            f"{r.scope}; all metrics must hold, an intersection-union test) · cost: {cost}, "
            "lower is cheaper")
    header = ["config", "label", cost] + [f"{m} delta [{level} CI]" for m in r.metrics] + [
        "equivalent"]
    rows: list[list[object]] = []
    for row in r.rows:
        cells: list[object] = [row.key, row.label, _shown(row.cost)]
        for _, t in row.tests:
            cells.append("-" if t is None else
                         f"{t.delta:+.4f} [{t.ci_low:+.4f}, {t.ci_high:+.4f}]")
        cells.append("best" if row.key == r.best else "yes" if row.equivalent else "no")
        rows.append(cells)
    chosen = next((x for x in r.rows if x.key == r.chosen), None)
    ref = next(x for x in r.rows if x.key == r.best)
    if chosen is None:
        verdict = f"no equivalent config has a {cost}: nothing to choose"
    elif chosen.key == r.best:
        verdict = (f"cheapest equivalent: the best itself ({r.best}, {cost} "
                   f"{_cost_text(chosen.cost)})")
    else:
        verdict = (f"cheapest equivalent: {chosen.key} ({chosen.label}), {cost} "
                   f"{_cost_text(chosen.cost)} vs the best's {_cost_text(ref.cost)}")
    why = [f"{row.key}: " + "; ".join(row.reasons) for row in r.rows if row.reasons]
    parts = [head, format_table(header, rows), verdict]
    if why:
        parts.append("not equivalent:\n" + "\n".join(f"  {w}" for w in why))
    if skipped:
        parts.append("left out: " + ", ".join(skipped))
    return "\n\n".join(parts)


def _rules_source(args: argparse.Namespace, manifest: dict[str, Any]
                  ) -> tuple[list[Any], str]:
    """The raw ``decisions`` list and where it came from (the --rules file or run.json)."""
    if args.rules is None:
        items = manifest_rules(manifest)
        if not items:
            raise UsageError(f"{args.runs[0]}/run.json has no 'decisions' in its config: pass "
                             "--rules FILE (YAML or JSON with a 'decisions' list)")
        return items, "run.json"
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError

    if not args.rules.is_file():
        raise InputError(args.rules, 0, "not found")
    try:
        raw = OmegaConf.to_container(OmegaConf.load(args.rules), resolve=True)
    except (YAMLError, OmegaConfBaseException, UnicodeDecodeError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InputError(args.rules, 0, f"not readable YAML/JSON ({first})") from None
    found = raw.get("decisions") if isinstance(raw, dict) else raw
    if not isinstance(found, list) or not found:
        raise InputError(args.rules, 0, "expected a non-empty 'decisions' list")
    return found, str(args.rules)


def run_settings(manifest: dict[str, Any], *, resamples: int = 1000, seed: int = 0
                 ) -> tuple[float, int, int]:
    """(confidence, bootstrap resamples, seed) of a run from its run.json config (the given
    defaults where it has none), so a decision rests on the CIs the run reports."""
    raw_cfg = manifest.get("config")
    cfg: dict[str, Any] = raw_cfg if isinstance(raw_cfg, dict) else {}
    raw_metrics = cfg.get("metrics")
    metrics_cfg: dict[str, Any] = raw_metrics if isinstance(raw_metrics, dict) else {}
    return (float(metrics_cfg.get("confidence", 0.95)),
            int(metrics_cfg.get("bootstrap_resamples", resamples)), int(cfg.get("seed", seed)))


def manifest_rules(manifest: dict[str, Any]) -> list[Any]:
    """The raw ``decisions`` list of a run's config (empty when it has none)."""
    cfg = manifest.get("config")
    items = cfg.get("decisions") if isinstance(cfg, dict) else None
    return list(items) if isinstance(items, list) else []


def decide_main(args: argparse.Namespace) -> int:
    from bench.errors import ConfigError
    from bench.metrics.decisions import evaluate_decisions, rules_from_config

    if len(args.runs) != 1:
        raise UsageError(f"--decide takes one run dir, got {len(args.runs)}")
    if not 0 < args.power < 1:
        raise UsageError(f"--power must be in (0, 1), got {args.power}")
    loaded = load_configs(args.runs)
    manifest = loaded.manifests[0]
    if len(loaded.manifests) != 1:
        raise UsageError(f"{args.runs[0]} is a multirun: --decide takes one run (job) dir")
    items, source = _rules_source(args, manifest)
    try:
        rules = rules_from_config(items)
    except ConfigError as err:
        if source == "run.json":
            raise
        raise InputError(args.rules, 0, f"{err.key}: {err.message}") from None
    confidence, resamples, seed = run_settings(manifest, resamples=args.resamples,
                                               seed=args.seed)
    by_name: dict[str, ConfigScores] = {c.scores.config_id: c.scores for c in loaded.configs}
    labels = [c.label for c in loaded.configs]
    for c in loaded.configs:
        if labels.count(c.label) == 1:
            by_name.setdefault(c.label, c.scores)
    try:
        records = evaluate_decisions(rules, by_name, resamples=resamples,
                                     confidence=confidence, seed=seed, power=args.power)
    except ValueError as err:
        raise UsageError(f"{source}: {err}") from None
    if args.format == "json":
        print(json.dumps({"source": source, "skipped": list(loaded.skipped),
                          "decisions": [asdict(r) for r in records]}, indent=2))
        return 0
    label = {c.scores.config_id: c.label for c in loaded.configs}
    parts = [f"pre-registered decisions from {source} · paired bootstrap CIs at "
             f"{100 * confidence:g} % ({resamples} resamples, seed {seed}) · n needed at "
             f"power {args.power}"]
    for r in records:
        head = (f"{r.name}: {r.verdict.upper()} — {r.candidate} ({label.get(r.candidate)}) "
                f"over {r.baseline} ({label.get(r.baseline)}) · rule sha256 {r.rule_hash[:16]}")
        rows = [[c.role, c.metric, c.scope, c.n, c.gain, c.ci_low, c.ci_high, c.threshold,
                 c.outcome, c.n_needed_total] for c in r.checks]
        table = format_table(["check", "metric", "scope", "n", "gain", "ci_low", "ci_high",
                              "threshold", "outcome", "golden set needed"], rows)
        parts.append("\n".join([head, table, *(f"  - {x}" for x in r.reasons)]))
    if loaded.skipped:
        parts.append("left out: " + ", ".join(loaded.skipped))
    print("\n\n".join(parts))
    return 0
