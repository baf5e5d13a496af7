"""Release gates on every metric a run computes, and which configs each gate reads.

A gate bounds one metric (``min`` / ``max``, inclusive; ``use_ci_bound`` gates the CI bound
instead of the mean). Two sources:

- **summary metrics** (one mean per config and scope, with its CI): ranking metrics listed in
  ``metrics.names``, ANN recall, the deterministic answer checks (``exact_match``,
  ``token_f1``, ``claims_coverage``, ``answer_correct``, ...) and the judges' metrics
  (``faithfulness``, ``answer_relevancy``, ``context_relevance``, ``citation_precision`` /
  ``citation_recall``, ``refusal_correct``, ...) of generated configs. A mean is over the
  SCORED queries only — a judge's ``invalid`` / ``no_claims`` verdicts and failed or timed
  out answers are counted, never averaged — so ``faithfulness >= 0.85`` is the seed's "when
  scored". When nothing was scored the gate FAILS ("no scored queries", with the statuses):
  a requirement nobody measured is not met. Bound the unscored share with a completion gate.
- **config metrics** (one value per config, scope ``all``, no CI): configs.parquet columns —
  whole-request latency (``e2e_*``: for a generated config, retrieval chain + context +
  generation), ``ttft_*`` / ``tpot_*``, first-stage and rerank latency, index size, filter
  exclusion rates, abstention figures, cost, and completion: ``failed_share``,
  ``timeout_share``, ``invalid_share``, ``incomplete_share`` (any of the three) — for each
  config the LARGEST share over its metrics of expected queries ending in that status.

Each stage entry of the stage list names the configs.parquet columns it fills and which
configs' rows hold them (``Stage.config_kinds`` / ``config_nodes``). A gate reads only the
configs that have its metric; a gate on a metric no config of the run has is a config error
before any work (:func:`check_gate_metrics`), naming the key and what would compute it.
Each failure says the config, the metric, its value, the bound and the margin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.config.schema import GateConfig
from bench.errors import ConfigError
from bench.metrics.registry import find_metric
from bench.pipeline.lanes import ConfigKind, ConfigSpec, Stage
from bench.pipeline.stages import (
    CHAIN_METRICS,
    STAGES,
    completion_figures,
    config_gate_metrics,
    every_config_metrics,
    query_statuses,
)
from bench.results.records import Accounting, ConfigRow, SummaryRow

if TYPE_CHECKING:
    from bench.pipeline.components import Components


@dataclass(frozen=True)
class GateResult:
    """One gate on one config: the value it read (None: nothing to read), pass or fail, and
    why (``line``)."""

    config_id: str
    label: str
    metric: str
    scope: str
    value: float | None
    passed: bool
    line: str


def stages_enabled(comps: Components) -> dict[str, bool]:
    """Per stage entry: whether the run built any of its groups (a required stage always).
    ``cost_per_query`` also comes from a budget's ``price_per_hour`` (bench.budget.chain)."""
    from bench.budget.chain import ChainBudget

    out = {s.name: s.required or any(comps.parts.get(g) is not None for g in s.groups)
           for s in STAGES}
    budget = comps.budget
    if isinstance(budget, ChainBudget) and budget.price_per_hour is not None:
        out["budget_price"] = True
    return out


def _stage_of(metric: str) -> Stage | None:
    return next((s for s in STAGES if metric in s.config_metrics), None)


def config_has(metric: str, spec: ConfigSpec, enabled: Mapping[str, bool]) -> bool:
    """Whether ``spec``'s configs.parquet row holds the config metric ``metric``:
    ``enabled``: per stage entry name, whether the run built any of its groups."""
    if metric in CHAIN_METRICS or metric in every_config_metrics():
        return True
    if metric == "cost_per_query" and enabled.get("budget_price", False):
        return True  # the budget's price x the probe's mean time (no components)
    stage = _stage_of(metric)
    if stage is None:
        return False
    if not (stage.required or enabled.get(stage.name, False)):
        return False
    if stage.config_kinds and str(spec.kind) not in stage.config_kinds:
        return False
    return not stage.config_nodes or any(n.stage in stage.config_nodes for n in spec.chain)


def summary_kinds(metric: str, specs: Sequence[ConfigSpec], judged: Iterable[str],
                  answers: bool) -> list[ConfigSpec]:
    """The configs that compute the summary metric ``metric``: every config for ranking
    metrics (ANN recall: decided after the run), generated configs for answer checks (when
    ``answers``) and for the judge metrics the run's judge scores (``judged``)."""
    spec = find_metric(metric)
    if spec is None:
        return []
    if spec.layer == "answer":
        return [s for s in specs if s.kind is ConfigKind.GENERATED] if answers else []
    if spec.layer == "judge":
        return ([s for s in specs if s.kind is ConfigKind.GENERATED]
                if spec.name in set(judged) else [])
    return list(specs)


def _needs(metric: str) -> str:
    """What a run needs for ``metric``, for the error of a gate no config can read."""
    spec = find_metric(metric) if metric not in config_gate_metrics() else None
    if spec is not None and spec.layer == "answer":
        return ("generated configs compute it (generator=..., with answers=default): kinds "
                "generated")
    if spec is not None and spec.layer == "judge":
        return ("generated configs judged by a judge that scores it (judge=... or "
                "judge=suite with it in judge.judges): kinds generated")
    stage = _stage_of(metric)
    if stage is None:
        return "every config computes it"
    who = f"configs of kinds {', '.join(stage.config_kinds)}" if stage.config_kinds \
        else "configs"
    if stage.config_nodes:
        who += f" whose chain has a {'/'.join(stage.config_nodes)} stage"
    elif not stage.config_kinds:
        who = "every config"
    groups = "|".join(stage.groups)
    return f"{who} compute it (stage {stage.name}: set {groups}=...)"


def check_run_gates(gates: Sequence[GateConfig], specs: Sequence[ConfigSpec],
                    comps: Components) -> None:
    """:func:`check_gate_metrics` for a planned run (its configs and components)."""
    from bench.judge.stage import judge_metrics

    judged = () if comps.judge is None else tuple(
        m for ms in judge_metrics(comps.judge).values() for m in ms)
    check_gate_metrics(gates, specs, stages_enabled(comps), judged, comps.answers is not None)


def check_gate_metrics(gates: Sequence[GateConfig], specs: Sequence[ConfigSpec],
                       enabled: Mapping[str, bool], judged: Iterable[str], answers: bool
                       ) -> None:
    """Before any work: every gate's metric must be computed by some config of the plan,
    else ConfigError naming ``gates[i].metric``, the configs that would have it and this
    run's config kinds. ``judged``: the metrics the run's judge scores; ``answers``: whether
    answers are checked (``answers`` group)."""
    judged = tuple(judged)
    have = ", ".join(dict.fromkeys(str(s.kind) for s in specs)) or "none"
    for i, gate in enumerate(gates):
        metric = gate.metric
        if metric in config_gate_metrics():
            ok = any(config_has(metric, s, enabled) for s in specs)
        else:
            found = find_metric(metric)
            if found is not None and found.layer in ("retrieval", "ann"):
                continue  # in metrics.names (checked with the config) or after the run
            ok = bool(summary_kinds(metric, specs, judged, answers))
        if not ok:
            raise ConfigError(f"gates[{i}].metric",
                              f"no config of this run computes {metric}: {_needs(metric)}; "
                              f"this run's config kinds: {have}")


def _num(x: float) -> str:
    return f"{x:.1f}" if abs(x) >= 1000 else f"{x:.4f}"


def _margin(x: float) -> str:
    return f"{x:.1f}" if abs(x) >= 1000 else f"{x:.4g}"


def bound_failures(what: str, g_min: float | None, g_max: float | None,
                   lo: float | None, hi: float | None, note: str = "") -> list[str]:
    """Failure lines of one value against ``[g_min, g_max]`` (``lo`` / ``hi``: the value,
    or its CI bounds), each with the value, the bound and the margin."""
    tail = f"; {note}" if note else ""
    out = []
    if g_min is not None and lo is not None and lo < g_min:
        out.append(f"{what} {_num(lo)} < min {g_min:g} (short by {_margin(g_min - lo)}{tail})")
    if g_max is not None and hi is not None and hi > g_max:
        out.append(f"{what} {_num(hi)} > max {g_max:g} (over by {_margin(hi - g_max)}{tail})")
    return out


def _passed_line(what: str, g_min: float | None, g_max: float | None, value: float,
                 note: str) -> str:
    parts = []
    if g_min is not None:
        parts.append(f">= min {g_min:g} (margin {_margin(value - g_min)})")
    if g_max is not None:
        parts.append(f"<= max {g_max:g} (margin {_margin(g_max - value)})")
    tail = f"; {note}" if note else ""
    return f"{what} {_num(value)} {' and '.join(parts)}{tail}"


def accounting_note(a: Accounting | None) -> str:
    """``3 scored of 4 expected (1 invalid)``: what a mean rests on."""
    if a is None:
        return ""
    # the core's unscored statuses first, then what the stages declare
    first = ("invalid", "no_claims", "failed", "timeout", "missing_run")
    names = [*first, *(s.name for s in query_statuses()
                       if s.name not in first and s.name not in ("scored", "pruned"))]
    rest = [f"{n} {name}" for name in names if (n := a.count(name))]
    return f"{a.n_scored} scored of {a.n_expected} expected" + (f" ({', '.join(rest)})"
                                                               if rest else "")


def completion_shares(accounting: Mapping[str, Accounting]) -> dict[str, tuple[float, str]]:
    """Per completion figure: the largest share over ``accounting``'s metrics of expected
    queries in its statuses, and that metric (``{figure: (share, metric)}``; empty without
    metrics)."""
    out: dict[str, tuple[float, str]] = {}
    for figure, statuses in completion_figures().items():
        best: tuple[float, str] | None = None
        for metric, a in accounting.items():
            if not a.n_expected:
                continue
            n = sum(a.count(s) for s in statuses)
            share = n / a.n_expected
            if best is None or share > best[0]:
                best = (share, metric)
        if best is not None:
            out[figure] = best
    return out


def evaluate_gates(gates: Sequence[GateConfig], rows: Sequence[SummaryRow],
                   config_rows: Sequence[ConfigRow], *,
                   has: Mapping[str, frozenset[str]],
                   accounting: Mapping[tuple[str, str], Accounting],
                   notes: Mapping[tuple[str, str], str]) -> list[GateResult]:
    """Every gate on every config it reads (pruned configs are reported as pruned, not
    gated). ``has``: config metric -> ids of the configs whose rows hold it;
    ``accounting``: (config_id, metric) -> where its expected queries went; ``notes``:
    (config_id, metric) -> what a config value rests on (cost: what was not priced)."""
    config_metrics = config_gate_metrics()
    labels = {c.config_id: c.label for c in config_rows}
    ok_ids = {c.config_id for c in config_rows if c.status == "ok"}
    out: list[GateResult] = []
    for gate in gates:
        metric, scope, g_min, g_max = gate.metric, gate.scope, gate.min, gate.max
        use_ci = gate.use_ci_bound
        if metric not in config_metrics:
            for r in rows:
                if r.metric != metric or r.scope != scope or r.config_id not in ok_ids:
                    continue
                what = f"{r.config_id} {metric}[{scope}]"
                ci = (f"the CI bound of mean {_num(r.mean)}, CI [{_ci(r)}]"
                      if use_ci and r.mean is not None else "")
                note = "; ".join(x for x in (ci, accounting_note(
                    accounting.get((r.config_id, metric)))) if x)
                res = _judge(what, g_min, g_max, r.mean,
                             r.ci_low if use_ci else r.mean, r.ci_high if use_ci else r.mean,
                             note)
                out.append(GateResult(r.config_id, labels.get(r.config_id, ""), metric, scope,
                                      r.mean, *res))
            continue
        for c in config_rows:
            if c.status != "ok" or c.config_id not in has.get(metric, frozenset()):
                continue
            v = _column(c, metric)
            what = f"{c.config_id} {metric}[{scope}]"
            note = notes.get((c.config_id, metric), "")
            if metric == "cost_per_query" and "not priced" in note:
                out.append(GateResult(c.config_id, c.label, metric, scope, v, False,
                                      f"{what}: covers only the priced parts ({note}), so the "
                                      f"gate cannot pass; price them or gate a component"))
                continue
            res = _judge(what, g_min, g_max, v, v, v, note, unmeasured="not measured by this "
                         "run, so the gate cannot pass")
            out.append(GateResult(c.config_id, c.label, metric, scope, v, *res))
    return out


def _ci(r: SummaryRow) -> str:
    lo = "-" if r.ci_low is None else f"{r.ci_low:.4f}"
    hi = "-" if r.ci_high is None else f"{r.ci_high:.4f}"
    return f"{lo}, {hi}"


def _judge(what: str, g_min: float | None, g_max: float | None, value: float | None,
           lo: float | None, hi: float | None, note: str,
           unmeasured: str = "no scored queries") -> tuple[bool, str]:
    if value is None or lo is None or hi is None:
        tail = f" ({note})" if note else ""
        return False, f"{what}: {unmeasured}{tail}"
    failures = bound_failures(what, g_min, g_max, float(lo), float(hi), note)
    if failures:
        return False, "; ".join(failures)
    return True, _passed_line(what, g_min, g_max, float(value), note)


def _column(row: ConfigRow, metric: str) -> float | None:
    """The configs.parquet value a config gate reads (``metric`` is a declared column:
    config_gate_metrics lists only those; tests/pipeline/test_gates.py checks it)."""
    v = row.value(metric)
    return None if v is None else float(v)
