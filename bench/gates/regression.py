"""Regression gates: is this run worse than a saved baseline run, per metric, scope and query?

Set ``gates_against=<baseline run dir>`` and a ``regression:`` block (bench.config.schema
``RegressionConfig``) on a run, or compare two finished runs with ``python -m bench.compare
--gate RULES.yaml BASELINE CURRENT``. Both read the two runs' ``per_query.parquet`` through
``bench.compare`` (``config_ids``, ``load_side``; ``bench.metrics.pairing.paired``, the run's own
pairing rule) and judge:

- a gate (``metric``, ``scope``, budget): configs are paired by config_id (as bench.compare
  pairs them; ``pair_by=label`` pairs by label instead), values paired per query on the
  queries both runs scored, and the gain = mean(current - baseline) (sign flipped for a
  lower-is-better metric) gets its paired bootstrap CI (``bench.metrics.stats.paired_compare``,
  the run's resamples, seed and confidence). The budget is ``max_drop`` (metric units) or
  ``max_drop_relative`` x |baseline mean|. ``bound`` picks what is judged against ``-budget``:
  ``ci_upper`` (default) the CI's optimistic end, so a gate fails only on a regression
  established at that confidence; ``ci_lower`` its pessimistic end (fails unless the run is
  shown no worse than the budget: a non-inferiority test, strict on small subsets); ``mean``
  the point estimate.
- critical queries (ids, or every query of some categories): each paired config's value of
  each critical metric on each critical query must not drop by more than ``tolerance``
  (default 0: not at all). A critical query the baseline scored and this run did not fails.

Configs of one run that the other lacks are reported (``unpaired``), never dropped silently;
when no config pairs at all the gate fails (it would otherwise pass having checked nothing).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from bench.config.toplevel import check_scope
from bench.errors import BenchError, ConfigError, InputError
from bench.metrics.cli import format_table
from bench.metrics.pairing import paired
from bench.metrics.registry import find_metric, parse_metric
from bench.metrics.stats import paired_compare
from bench.results.run_dir import config_ids, config_labels, load_side, per_query_path
from bench.results.scores import ConfigScores, read_table, scores_of_table

BOUNDS = ("ci_upper", "ci_lower", "mean")
PAIR_BY = ("config_id", "label")
#: float noise below this never counts as a regression
_EPS = 1e-12


@dataclass(frozen=True)
class RegressionRule:
    """One gate: ``metric`` over ``scope`` may lose at most its budget."""

    metric: str
    scope: str
    max_drop: float | None
    max_drop_relative: float | None

    def budget(self, baseline_mean: float) -> float:
        if self.max_drop is not None:
            return self.max_drop
        assert self.max_drop_relative is not None
        return self.max_drop_relative * abs(baseline_mean)

    def describe(self) -> str:
        if self.max_drop is not None:
            return f"max drop {self.max_drop:g}"
        return f"max drop {100 * (self.max_drop_relative or 0):g} % of the baseline mean"


@dataclass(frozen=True)
class RegressionSettings:
    """The validated ``regression`` block and its baseline."""

    against: Path
    rules: tuple[RegressionRule, ...]
    critical_ids: tuple[str, ...]
    critical_categories: tuple[str, ...]
    critical_metrics: tuple[str, ...]
    tolerance: float
    bound: str
    confidence: float
    resamples: int
    seed: int
    pair_by: str

    @property
    def has_critical(self) -> bool:
        return bool(self.critical_ids or self.critical_categories)


@dataclass(frozen=True)
class RegressionCheck:
    """One gate on one paired config. ``delta``/``ci_*`` are current - baseline as
    bench.compare prints them; ``judged`` is the gain figure compared with ``-budget``."""

    metric: str
    scope: str
    config_id: str
    label: str
    n: int
    baseline_mean: float | None
    current_mean: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    budget: float | None
    judged: float | None
    regressed: bool
    rule: str
    note: str = ""

    @property
    def margin(self) -> float | None:
        """judged + budget: the room left (negative: by how much the budget is broken)."""
        if self.judged is None or self.budget is None:
            return None
        return self.judged + self.budget


@dataclass(frozen=True)
class CriticalCheck:
    """One critical query of one paired config on one metric."""

    config_id: str
    label: str
    metric: str
    query_id: str
    category: str
    baseline: float | None
    current: float | None
    regressed: bool
    note: str = ""
    higher_is_better: bool = True


@dataclass(frozen=True)
class RegressionOutcome:
    """Every check, the pairing, and which splits the two runs evaluated."""

    baseline: str
    current: str
    bound: str
    confidence: float
    pair_by: str
    tolerance: float
    checks: tuple[RegressionCheck, ...]
    critical: tuple[CriticalCheck, ...]
    paired: tuple[tuple[str, str], ...]
    unpaired_baseline: tuple[str, ...]
    unpaired_current: tuple[str, ...]
    baseline_split: str | None
    current_split: str | None
    notes: tuple[str, ...] = ()
    #: what each run evaluated, as its run.json ``queries_selected.summary`` says
    baseline_queries: str | None = None
    current_queries: str | None = None

    @property
    def regressions(self) -> tuple[RegressionCheck, ...]:
        return tuple(c for c in self.checks if c.regressed)

    @property
    def critical_regressions(self) -> tuple[CriticalCheck, ...]:
        return tuple(c for c in self.critical if c.regressed)

    @property
    def nothing_paired(self) -> bool:
        return not self.paired

    @property
    def failed(self) -> bool:
        return bool(self.regressions or self.critical_regressions or self.nothing_paired)

    def failure_lines(self) -> list[str]:
        """One line per failure, in the style of the threshold gates' lines."""
        out = []
        if self.nothing_paired:
            out.append(f"regression: no config of this run pairs with the baseline "
                       f"{self.baseline} by {self.pair_by}" + _notes(self.notes))
        for c in self.regressions:
            if c.judged is None:
                out.append(f"regression: {c.config_id} {c.metric}[{c.scope}]: {c.note}")
                continue
            out.append(f"regression: {c.config_id} {c.metric}[{c.scope}] delta {c.delta:+.4f} "
                       f"(CI [{c.ci_low:+.4f}, {c.ci_high:+.4f}], baseline "
                       f"{c.baseline_mean:.4f} -> {c.current_mean:.4f}): judged gain "
                       f"{c.judged:+.4f} < -{c.budget:.4g} ({c.rule}; over by "
                       f"{-(c.margin or 0.0):.4g})")
        for q in self.critical_regressions:
            out.append(f"regression: critical query {q.query_id} {q.metric} ({q.config_id}): "
                       + (q.note if q.current is None else
                          f"{q.baseline:.4f} -> {q.current:.4f}"))
        return out

    def split_line(self) -> str:
        """Which queries each side evaluated (split, subset), and whether they differ."""
        def side(split: str | None, queries: str | None) -> str:
            return queries or (f"split {split!r}" if split else "every query")

        line = (f"this run: {side(self.current_split, self.current_queries)}; baseline: "
                f"{side(self.baseline_split, self.baseline_queries)}")
        if self.baseline_split != self.current_split:
            line += " (different splits: only the queries both scored are paired)"
        return line

    def table(self) -> str:
        """The plain-text report: gates, critical queries, pairing."""
        head = (f"regression gates vs {self.baseline} (configs paired by {self.pair_by}; "
                f"judged on the gain's {_bound_text(self.bound, self.confidence)}; "
                f"{self.split_line()})")
        parts = [head]
        if self.checks:
            parts.append(format_table(_HEADER, [_row(c) for c in self.checks]))
        if self.critical:
            bad = self.critical_regressions
            parts.append(f"critical queries ({len({q.query_id for q in self.critical})} ids; "
                         f"must not get worse by more than {self.tolerance:g}): "
                         + (f"{len({q.query_id for q in bad})} regressed: "
                            + ", ".join(dict.fromkeys(q.query_id for q in bad))
                            if bad else "none regressed"))
            if bad:
                parts.append(format_table(_CRIT_HEADER, [_crit_row(q) for q in bad]))
        parts.append(self.pairing_line())
        parts += list(self.notes)
        return "\n\n".join(parts)

    def pairing_line(self) -> str:
        return ("unpaired configs: baseline only: "
                + (", ".join(self.unpaired_baseline) or "none") + "; this run only: "
                + (", ".join(self.unpaired_current) or "none"))

    def markdown(self) -> list[str]:
        """report.md's section."""
        verdict = "FAILED" if self.failed else "passed"
        lines = [f"## Regression gates vs the baseline: {verdict}", "",
                 f"Baseline `{self.baseline}`; configs paired by {self.pair_by}; judged on "
                 f"the gain's {_bound_text(self.bound, self.confidence)}; "
                 f"{self.split_line()}.", ""]
        if self.checks:
            lines += ["| " + " | ".join(_HEADER) + " |",
                      "|" + "---|" * len(_HEADER)]
            lines += ["| " + " | ".join(_md(v) for v in _row(c)) + " |" for c in self.checks]
            lines.append("")
        if self.critical:
            bad = self.critical_regressions
            lines.append(f"Critical queries: {len({q.query_id for q in self.critical})}, "
                         f"{len({q.query_id for q in bad})} regressed"
                         + (": " + ", ".join(f"`{q}`" for q in
                                             dict.fromkeys(x.query_id for x in bad))
                            if bad else "") + ".")
            if bad:
                lines += ["", "| " + " | ".join(_CRIT_HEADER) + " |",
                          "|" + "---|" * len(_CRIT_HEADER)]
                lines += ["| " + " | ".join(_md(v) for v in _crit_row(q)) + " |" for q in bad]
            lines.append("")
        lines += [self.pairing_line() + ".", ""]
        lines += [f"{n}" for n in self.notes]
        return [*lines, ""] if self.notes else lines

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["failed"] = self.failed
        out["failures"] = self.failure_lines()
        return out


_HEADER = ("verdict", "metric", "scope", "config", "n", "baseline", "current", "delta",
           "ci_low", "ci_high", "budget", "judged")
_CRIT_HEADER = ("config", "metric", "query_id", "category", "baseline", "current", "change",
                "note")


def _row(c: RegressionCheck) -> list[object]:
    return ["REGRESSED" if c.regressed else "ok", c.metric, c.scope,
            f"{c.config_id} ({c.label})" if c.label and c.label != c.config_id else c.config_id,
            c.n, c.baseline_mean, c.current_mean, c.delta, c.ci_low, c.ci_high,
            None if c.budget is None else -c.budget, c.judged if c.note == "" else c.note]


def _crit_row(q: CriticalCheck) -> list[object]:
    change = None if q.baseline is None or q.current is None else q.current - q.baseline
    return [q.config_id, q.metric, q.query_id, q.category, q.baseline, q.current, change,
            q.note or "-"]


def _md(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return "-" if v is None else str(v).replace("|", "\\|")


def _bound_text(bound: str, confidence: float) -> str:
    level = f"{100 * confidence:g} %"
    return {"ci_upper": f"{level} CI upper bound (an established regression fails)",
            "ci_lower": f"{level} CI lower bound (no-worse-than-budget must be shown)",
            "mean": "point estimate"}[bound]


def _notes(notes: Sequence[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""


# --- settings --------------------------------------------------------------------------------

def check_against(value: object, key: str = "gates_against") -> Path:
    """The baseline: a run dir holding per_query.parquet (or the file), readable, with the
    columns bench.compare reads. A ConfigError naming ``key`` otherwise."""
    if not isinstance(value, str | Path) or not str(value).strip():
        raise ConfigError(key, f"expected a run dir, got {value!r}")
    path = Path(value).expanduser()
    if not path.exists():
        raise ConfigError(key, f"{path} does not exist (expected a baseline run dir holding "
                               "per_query.parquet)")
    try:
        file = per_query_path(path)
        names = pq.read_schema(file).names
    except BenchError:
        raise ConfigError(key, f"{path} is not a run dir: it holds no per_query.parquet"
                          ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(key, f"{path}: per_query.parquet is not readable ({exc})") from None
    missing = [c for c in ("config_id", "query_id", "category", "metric", "value")
               if c not in names]
    if missing:
        raise ConfigError(key, f"{file} lacks columns {missing}: not a bench per_query table")
    try:  # read now what the gate reads after the run: a corrupt column is found before work
        if not scores_of_table(read_table(file), file):
            raise InputError(file, 0, "holds no rows")
        config_labels(path)
    except BenchError as exc:
        raise ConfigError(key, exc.one_line()) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(key, f"{path}: configs.parquet is not readable ({first})") from None
    return path


def _metrics_of(path: Path) -> set[str]:
    table = pq.read_table(per_query_path(path), columns=["metric"])
    return set(table.column("metric").to_pylist())


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(key, f"expected a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise ConfigError(key, f"must be a finite number, got {value!r}")
    return out


def _metric(key: str, name: object, available: set[str]) -> str:
    if not isinstance(name, str):
        raise ConfigError(key, f"expected a metric name, got {name!r}")
    try:
        spec = parse_metric(name)
    except BenchError as exc:
        raise ConfigError(key, exc.one_line()) from None
    except (ValueError, OverflowError):
        raise ConfigError(key, f"metric {name[:40]!r}: the cutoff is too large") from None
    if spec.name != name:
        raise ConfigError(key, f"write the metric as {spec.name!r}, not {name!r}")
    if name not in available:
        raise ConfigError(key, f"the baseline has no values of {name!r}; it has "
                               f"{', '.join(sorted(available))}")
    return name


def regression_settings(block: Mapping[str, Any], against: object, *, confidence: float,
                        resamples: int, seed: int, default_metric: str,
                        key: str = "regression", against_key: str = "gates_against"
                        ) -> RegressionSettings:
    """Validate a ``regression`` block (a plain mapping, RegressionConfig's fields) against
    its baseline; every error is a ConfigError naming the dotted key, raised before any
    work."""
    path = check_against(against, against_key)
    available = _metrics_of(path)
    rules = []
    for i, g in enumerate(block.get("gates") or []):
        k = f"{key}.gates[{i}]"
        metric = _metric(f"{k}.metric", g.get("metric"), available)
        scope = g.get("scope", "all")
        check_scope(f"{k}.scope", scope)
        if scope in ("macro", "weighted"):
            raise ConfigError(f"{k}.scope", f"{scope} has no paired per-query delta; use all "
                                            "or category:<name>")
        absolute, relative = g.get("max_drop"), g.get("max_drop_relative")
        if (absolute is None) == (relative is None):
            raise ConfigError(k, "give exactly one of max_drop (metric units) or "
                                 "max_drop_relative (share of the baseline mean)")
        name = "max_drop" if absolute is not None else "max_drop_relative"
        budget = _number(f"{k}.{name}", absolute if absolute is not None else relative)
        if budget < 0:
            raise ConfigError(f"{k}.{name}", f"is the allowed worsening, >= 0; got {budget:g} "
                                             f"(write {-budget:g})")
        rules.append(RegressionRule(metric, scope, budget if name == "max_drop" else None,
                                    budget if name == "max_drop_relative" else None))
    crit = block.get("critical") or {}
    ids = tuple(str(q) for q in crit.get("query_ids") or [])
    if len(set(ids)) != len(ids):
        dup = next(q for q in ids if ids.count(q) > 1)
        raise ConfigError(f"{key}.critical.query_ids", f"{dup!r} is listed twice")
    cats = tuple(str(c) for c in crit.get("categories") or [])
    metrics = tuple(_metric(f"{key}.critical.metrics[{i}]", m, available)
                    for i, m in enumerate(crit.get("metrics") or []))
    if (ids or cats) and not metrics:
        metrics = tuple(dict.fromkeys(r.metric for r in rules)) or (
            _metric(f"{key}.critical.metrics", default_metric, available),)
    tolerance = _number(f"{key}.critical.tolerance", crit.get("tolerance", 0.0))
    if tolerance < 0:
        raise ConfigError(f"{key}.critical.tolerance", f"must be >= 0, got {tolerance:g}")
    if not rules and not (ids or cats):
        raise ConfigError(key, f"{against_key} is set but no regression gate or critical "
                               f"query is: add {key}.gates or {key}.critical")
    bound = block.get("bound", "ci_upper")
    if bound not in BOUNDS:
        raise ConfigError(f"{key}.bound", f"must be one of {', '.join(BOUNDS)}, got {bound!r}")
    pair_by = block.get("pair_by", "config_id")
    if pair_by not in PAIR_BY:
        raise ConfigError(f"{key}.pair_by", f"must be one of {', '.join(PAIR_BY)}, got "
                                            f"{pair_by!r}")
    conf = block.get("confidence")
    level = confidence if conf is None else _number(f"{key}.confidence", conf)
    if not 0.5 < level < 1.0:
        raise ConfigError(f"{key}.confidence", f"must be in (0.5, 1), got {level:g}")
    return RegressionSettings(path, tuple(rules), ids, cats, metrics, tolerance, bound, level,
                              resamples, seed, pair_by)


def from_config(cfg: Any) -> RegressionSettings | None:
    """The run's regression settings (None without ``gates_against``); ConfigError on a bad
    ``gates_against``, ``regression.*`` or ``gates_junit``, before any work."""
    from omegaconf import OmegaConf

    junit = cfg.gates_junit
    if junit is not None:
        if not isinstance(junit, str) or not junit.strip():
            raise ConfigError("gates_junit", f"expected a file path, got {junit!r}")
        if Path(junit).expanduser().is_dir():
            raise ConfigError("gates_junit", f"{junit} is a directory; name the XML file")
    block = cast(dict[str, Any], OmegaConf.to_container(cfg.regression, resolve=True))
    if cfg.gates_against is None:
        # critical query ids alone are allowed: they keep those queries in a subset, so the
        # run that becomes a baseline evaluates the queries the gated runs will
        if block.get("gates") or (block.get("critical") or {}).get("categories"):
            raise ConfigError("gates_against", "regression gates are set but no baseline: "
                                               "set gates_against=<baseline run dir>")
        return None
    m = cfg.metrics
    return regression_settings(block, cfg.gates_against, confidence=float(m.confidence),
                               resamples=int(m.bootstrap_resamples), seed=int(cfg.seed),
                               default_metric=str(m.names[0]))


def check_critical(critical_ids: Sequence[str], critical_categories: Sequence[str],
                   query_ids: Sequence[str], categories: Sequence[str]) -> None:
    """After the dataset is loaded: critical ids and categories must exist in it."""
    known = set(query_ids)
    missing = [q for q in critical_ids if q not in known]
    if missing:
        raise ConfigError("regression.critical.query_ids",
                          f"{len(missing)} id(s) are not queries of the dataset: "
                          f"{', '.join(missing[:5])}")
    cats = set(categories)
    bad = [c for c in critical_categories if c not in cats]
    if bad:
        raise ConfigError("regression.critical.categories",
                          f"the dataset has no category {bad[0]!r}; its categories: "
                          f"{', '.join(sorted(cats))}")


# --- evaluation ------------------------------------------------------------------------------

def _selection_of(run: Path) -> tuple[str | None, str | None]:
    """(split, summary) of what a finished run evaluated (run.json ``queries_selected``);
    Nones for a run without it (an older run, a bare per_query.parquet)."""
    manifest = per_query_path(run).parent / "run.json"
    try:
        data = json.loads(manifest.read_text())
    except (OSError, json.JSONDecodeError):
        return None, None
    sel = data.get("queries_selected") if isinstance(data, dict) else None
    if not isinstance(sel, dict):
        return None, None
    split, summary = sel.get("split"), sel.get("summary")
    return (split if isinstance(split, str) else None,
            summary if isinstance(summary, str) else None)


def _corpus_fingerprint(run: Path) -> str | None:
    """run.json's corpus fingerprint; "" for a run made before config ids were rooted in
    the corpus (its ids differ); None when unreadable."""
    try:
        data = json.loads((per_query_path(run).parent / "run.json").read_text())
        return str(data["dataset"].get("corpus_fingerprint", ""))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None


def _pairs(s: RegressionSettings, baseline: Path, current: Path
           ) -> tuple[list[tuple[str, str]], list[str], list[str], dict[str, str]]:
    """(baseline id, current id) pairs, the unpaired of each side (shown with labels), and
    the current run's labels."""
    base_ids, cur_ids = config_ids(baseline), config_ids(current)
    lb, lc = config_labels(baseline), config_labels(current)

    def shown(cid: str, labels: dict[str, str]) -> str:
        return f"{cid} ({labels[cid]})" if cid in labels else cid

    if s.pair_by == "config_id":
        pairs = [(c, c) for c in cur_ids if c in set(base_ids)]
    else:
        def unique(ids: list[str], labels: dict[str, str]) -> dict[str, str]:
            names = [labels.get(c, c) for c in ids]
            return {n: c for n, c in zip(names, ids, strict=True) if names.count(n) == 1}

        ub, uc = unique(base_ids, lb), unique(cur_ids, lc)
        pairs = [(ub[n], uc[n]) for n in uc if n in ub]
    got_b, got_c = {b for b, _ in pairs}, {c for _, c in pairs}
    return (pairs, [shown(c, lb) for c in base_ids if c not in got_b],
            [shown(c, lc) for c in cur_ids if c not in got_c], lc)


def _gain(hib: bool, delta: float, lo: float, hi: float) -> tuple[float, float, float]:
    return (delta, lo, hi) if hib else (-delta, -hi, -lo)


def _has(side: ConfigScores, metric: str) -> bool:
    return metric in side.values and bool(side.valued(metric).any())


def _check(s: RegressionSettings, rule: RegressionRule, a: ConfigScores, b: ConfigScores,
           label: str) -> RegressionCheck | None:
    in_a, in_b = _has(a, rule.metric), _has(b, rule.metric)
    base = dict(metric=rule.metric, scope=rule.scope, config_id=b.config_id, label=label,
                rule=rule.describe())
    if not in_a and not in_b:
        return None  # this kind of config does not compute the metric (e.g. answers)
    none = dict(baseline_mean=None, current_mean=None, delta=None, ci_low=None, ci_high=None,
                budget=None, judged=None)
    if not in_b:
        return RegressionCheck(**base, n=0, **none, regressed=True,  # type: ignore[arg-type]
                               note="the baseline has it, this run does not")
    if not in_a:
        return RegressionCheck(**base, n=0, **none, regressed=False,  # type: ignore[arg-type]
                               note="new in this run: nothing to regress from")
    va, vb, cats = paired(a, b, rule.metric)  # the one pairing rule
    if rule.scope != "all":
        sel = cats == rule.scope.removeprefix("category:")
        va, vb = va[sel], vb[sel]
    if va.size == 0:
        return RegressionCheck(**base, n=0, **none, regressed=True,  # type: ignore[arg-type]
                               note="no query scored in both runs")
    pc = paired_compare(va, vb, resamples=s.resamples, seed=s.seed, confidence=s.confidence)
    spec = find_metric(rule.metric)
    hib = True if spec is None else spec.higher_is_better
    gain, lo, hi = _gain(hib, pc.delta, pc.ci_low, pc.ci_high)
    judged = {"ci_upper": hi, "ci_lower": lo, "mean": gain}[s.bound]
    budget = rule.budget(pc.mean_a)
    return RegressionCheck(**base, n=pc.n, baseline_mean=pc.mean_a,  # type: ignore[arg-type]
                           current_mean=pc.mean_b, delta=pc.delta, ci_low=pc.ci_low,
                           ci_high=pc.ci_high, budget=budget, judged=judged,
                           regressed=judged < -budget - _EPS)


def _per_query(side: ConfigScores, metric: str) -> dict[str, tuple[float, str]]:
    if metric not in side.values:
        return {}
    ok = side.valued(metric)
    return {q: (float(v), c) for q, v, c, keep in zip(side.query_ids, side.values[metric],
                                                      side.categories, ok, strict=True) if keep}


def _critical(s: RegressionSettings, a: ConfigScores, b: ConfigScores, label: str
              ) -> list[CriticalCheck]:
    out = []
    cats = set(s.critical_categories)
    for metric in s.critical_metrics:
        va, vb = _per_query(a, metric), _per_query(b, metric)
        if not va and not vb:
            continue
        spec = find_metric(metric)
        sign = 1.0 if spec is None or spec.higher_is_better else -1.0
        ids = list(s.critical_ids) + sorted(
            q for q, (_, c) in {**va, **vb}.items() if c in cats and q not in s.critical_ids)
        for qid in ids:
            base, cur = va.get(qid), vb.get(qid)
            cat = (cur or base or (0.0, "-"))[1]
            if base is None and cur is None:
                out.append(CriticalCheck(b.config_id, label, metric, qid, cat, None, None,
                                         False, "scored in neither run (not in its split or "
                                                "subset, or no value)"))
            elif cur is None:
                out.append(CriticalCheck(b.config_id, label, metric, qid, cat, base[0], None,  # type: ignore[index]
                                         True, "scored in the baseline, not in this run"))
            elif base is None:
                out.append(CriticalCheck(b.config_id, label, metric, qid, cat, None, cur[0],
                                         False, "not in the baseline"))
            else:
                worse = sign * (cur[0] - base[0]) < -s.tolerance - _EPS
                out.append(CriticalCheck(b.config_id, label, metric, qid, cat, base[0], cur[0],
                                         worse, higher_is_better=sign > 0))
    return out


def evaluate(s: RegressionSettings, current: Path, *,
             current_selection: tuple[str | None, str | None] | None = None,
             current_corpus: str | None = None) -> RegressionOutcome:
    """Every gate and critical query of ``s`` on ``current`` (a run dir) vs the baseline.
    ``current_selection`` (split, summary) / ``current_corpus`` (corpus fingerprint): what
    this run evaluated (read from its run.json unless given, for a run whose run.json is not
    written yet)."""
    baseline = s.against
    pairs, only_b, only_c, labels = _pairs(s, baseline, current)
    checks: list[RegressionCheck] = []
    critical: list[CriticalCheck] = []
    for bid, cid in pairs:
        a = load_side(baseline, bid, "--config-a")
        b = load_side(current, cid, "--config-b")
        label = labels.get(cid, "")
        for rule in s.rules:
            c = _check(s, rule, a, b, label)
            if c is not None:
                checks.append(c)
        if s.has_critical:
            critical += _critical(s, a, b, label)
    for rule in s.rules if pairs else ():  # a gate that matched nothing must not pass
        if not any(c.metric == rule.metric and c.scope == rule.scope for c in checks):
            checks.append(RegressionCheck(
                rule.metric, rule.scope, "-", "", 0, None, None, None, None, None, None, None,
                True, rule.describe(), "no paired config has this metric in either run"))
    notes = []
    if not pairs and s.pair_by == "config_id":
        fb, fc = _corpus_fingerprint(baseline), current_corpus or _corpus_fingerprint(current)
        if fb == "":
            notes.append("the baseline was made before config ids were rooted in the corpus "
                         "alone, so its ids differ once (its values do not): rerun the "
                         "baseline, or pair by label (regression.pair_by=label)")
        elif fb and fc and fb != fc:
            notes.append(f"the corpus fingerprints differ (baseline {fb[:12]}, this run "
                         f"{fc[:12]}) and config ids are rooted in them: the two runs did not "
                         "search the same documents; regression.pair_by=label pairs by label")
    cur = current_selection if current_selection is not None else _selection_of(current)
    base = _selection_of(baseline)
    return RegressionOutcome(
        str(baseline), str(current), s.bound, s.confidence, s.pair_by, s.tolerance,
        tuple(checks), tuple(critical), tuple(pairs), tuple(only_b), tuple(only_c),
        base[0], cur[0], tuple(notes), base[1], cur[1])



# --- python -m bench.compare --gate RULES BASELINE CURRENT ----------------------------------

def read_rules(path: Path) -> dict[str, Any]:
    """A YAML/JSON rules file: a ``regression:`` block (or the block itself), checked against
    RegressionConfig's keys and types; one line naming the file otherwise."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError

    from bench.config.schema import RegressionConfig

    if not path.is_file():
        raise BenchError(f"{path}: --gate rules file not found")
    try:
        loaded = OmegaConf.load(path)
        if not isinstance(loaded, DictConfig):
            raise BenchError(f"{path}: expected a mapping (a 'regression:' block)")
        node = loaded.get("regression", loaded)
        merged = OmegaConf.merge(OmegaConf.structured(RegressionConfig), node)
    except YAMLError as exc:  # a malformed file: where the parser stopped, in one line
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or type(exc).__name__
        raise BenchError(f"{path}{line}: not readable YAML/JSON ({what})") from None
    except (OmegaConfBaseException, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BenchError(f"{path}: {first}") from None
    return cast(dict[str, Any], OmegaConf.to_container(merged, resolve=True))


def gate_main(runs: Sequence[Path], rules: Path, *, resamples: int, seed: int,
              junit: Path | None, fmt: str) -> int:
    """``bench.compare --gate``: exit 3 when a gate regressed, 0 otherwise; the rules and
    both runs are checked before any work (exit 2, one line)."""
    from bench.gates.junit import regression_cases, write_junit
    from bench.metrics.cli import UsageError

    if len(runs) != 2:
        raise UsageError(f"--gate takes two run dirs (BASELINE CURRENT), got {len(runs)}")
    block = read_rules(rules)
    conf = block.get("confidence")
    s = regression_settings(block, runs[0], confidence=0.95 if conf is None else conf,
                            resamples=resamples, seed=seed, default_metric="ndcg@10",
                            key=f"{rules}: regression", against_key="BASELINE")
    check_against(runs[1], "CURRENT")
    outcome = evaluate(s, runs[1])
    print(json.dumps(outcome.to_json(), indent=2) if fmt == "json" else outcome.table())
    if junit is not None:
        write_junit(junit, regression_cases(outcome))
    for line in outcome.failure_lines():
        print(f"bench: gate failed: {line}", file=sys.stderr)
    return 3 if outcome.failed else 0
