"""Pre-registered decisions: adopt config B over A, reject it, or say the data cannot tell.

A rule (``decisions:`` in the experiment, fixed before the results) names a baseline A, a
candidate B, a primary metric with a minimum gain and the scopes it must hold on, and
guardrail metrics with a budget. On the per-query values, paired per query (the pairing of
the run's comparisons), with the paired bootstrap CI of each delta at the run's confidence:

- a check of the primary metric at a scope PASSES when the CI's lower bound of the gain
  (B - A in the metric's better direction) is >= ``min_gain``, FAILS when its upper bound is
  < ``min_gain``, and is UNCLEAR otherwise;
- a guardrail PASSES when the gain's lower bound is >= its ``budget`` (the change allowed, in
  the better direction: -0.01 lets the metric lose at most 0.01), FAILS when the upper bound
  is < the budget, and is UNCLEAR otherwise; guardrails are checked at the rule's scopes;
- the verdict is ``reject`` when any check fails, ``adopt`` when every check passes, and
  ``inconclusive`` otherwise, with the queries that would resolve it: per unclear check, the n
  at which a true gain equal to the observed one is told apart from the threshold with the
  stated power (bench.metrics.power, its distance from the threshold as the effect); the
  record keeps the largest, scaled to the whole golden set at the run's category mix.

Adopt needs every check to pass: an intersection-union test, so each CI at the run's level
keeps the error of a wrong adoption at that level without a multiplicity correction.

The rule and the settings that decide it (confidence, power) are hashed (SHA-256 of canonical
JSON) into each record: a rule edited after the results gives another hash.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from bench.errors import ConfigError
from bench.metrics.pairing import PerQueryScores, paired, scope_mask
from bench.metrics.power import n_needed
from bench.metrics.registry import find_metric
from bench.metrics.stats import paired_compare

Verdict = Literal["adopt", "reject", "inconclusive"]
Outcome = Literal["pass", "fail", "unclear", "missing"]

#: float slack at the thresholds: a bound equal to the threshold passes (">=" in the rule)
_SLACK = 1e-12


@dataclass(frozen=True)
class Guardrail:
    metric: str
    #: the change allowed in the metric's better direction (<= 0: -0.01 = may lose 0.01)
    budget: float


@dataclass(frozen=True)
class DecisionRule:
    """Adopt ``candidate`` over ``baseline`` (config ids, or keys of the scores mapping)."""

    name: str
    baseline: str
    candidate: str
    metric: str
    min_gain: float
    scopes: tuple[str, ...] = ("all",)
    guardrails: tuple[Guardrail, ...] = ()

    def canonical(self) -> dict[str, Any]:
        return {"name": self.name, "baseline": self.baseline, "candidate": self.candidate,
                "metric": self.metric, "min_gain": self.min_gain, "scopes": list(self.scopes),
                "guardrails": sorted([g.metric, g.budget] for g in self.guardrails)}


def rule_hash(rule: DecisionRule, *, confidence: float, power: float) -> str:
    """SHA-256 of the canonical JSON of the rule and the settings that decide it."""
    payload = {"rule": rule.canonical(), "confidence": confidence, "power": power}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class DecisionCheck:
    """One (metric, scope) of a rule: the gain (B - A in the better direction), its CI."""

    role: Literal["primary", "guardrail"]
    metric: str
    scope: str
    #: min_gain (primary) or budget (guardrail), in gain units
    threshold: float
    n: int
    gain: float | None
    ci_low: float | None
    ci_high: float | None
    outcome: Outcome
    #: unclear checks: queries of the scope for the stated power at the observed gain, and
    #: the whole golden set at the run's category mix that holds them (None when the gain
    #: sits on the threshold: no n resolves it)
    n_needed: int | None = None
    n_needed_total: int | None = None


@dataclass(frozen=True)
class DecisionRecord:
    name: str
    baseline: str
    candidate: str
    verdict: Verdict
    #: the rule's canonical JSON and its SHA-256 (with confidence and power)
    rule_json: str
    rule_hash: str
    confidence: float
    power: float
    checks: tuple[DecisionCheck, ...]
    reasons: tuple[str, ...]
    #: inconclusive: the largest golden set any unclear check needs (None: none can tell)
    n_needed: int | None = None


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(key, f"expected a finite number, got {value!r}")
    return float(value)


def _text(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(key, f"expected a non-empty string, got {value!r}")
    return value


def rules_from_config(items: Sequence[Mapping[str, Any]], *, key: str = "decisions"
                      ) -> tuple[DecisionRule, ...]:
    """``decisions:`` entries (plain mappings: ``OmegaConf.to_container``) as rules; a bad
    entry is a ConfigError naming ``decisions[i].<field>``. Rule names must be unique."""
    known = {"name", "baseline", "candidate", "metric", "min_gain", "scopes", "guardrails"}
    rules: list[DecisionRule] = []
    for i, item in enumerate(items):
        where = f"{key}[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, f"must be a mapping, got {item!r}")
        unknown = sorted(set(item) - known)
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}",
                              f"unknown key; allowed: {', '.join(sorted(known))}")
        for field in ("name", "baseline", "candidate", "metric"):
            if item.get(field) is None:
                raise ConfigError(f"{where}.{field}", "missing")
        scopes = item.get("scopes") or ["all"]
        if isinstance(scopes, str) or not isinstance(scopes, Sequence):
            raise ConfigError(f"{where}.scopes", f"expected a list of scopes, got {scopes!r}")
        for j, s in enumerate(scopes):
            if not isinstance(s, str) or not (s == "all" or (s.startswith("category:")
                                                             and len(s) > 9)):
                raise ConfigError(f"{where}.scopes[{j}]",
                                  f"must be 'all' or 'category:<name>', got {s!r}")
        guards = item.get("guardrails") or {}
        if not isinstance(guards, Mapping):
            raise ConfigError(f"{where}.guardrails",
                              f"expected a mapping metric: budget, got {guards!r}")
        rails = []
        for metric, budget in guards.items():
            b = _number(f"{where}.guardrails.{metric}", budget)
            if b > 0:
                raise ConfigError(f"{where}.guardrails.{metric}",
                                  f"a budget is the loss allowed (<= 0, e.g. -0.01), got {b}; "
                                  "a required gain is a rule of its own")
            rails.append(Guardrail(_text(f"{where}.guardrails", metric), b))
        rule = DecisionRule(
            name=_text(f"{where}.name", item["name"]),
            baseline=_text(f"{where}.baseline", item["baseline"]),
            candidate=_text(f"{where}.candidate", item["candidate"]),
            metric=_text(f"{where}.metric", item["metric"]),
            min_gain=_number(f"{where}.min_gain", item.get("min_gain", 0.0)),
            scopes=tuple(dict.fromkeys(scopes)), guardrails=tuple(rails))
        if rule.baseline == rule.candidate:
            raise ConfigError(f"{where}.candidate", "is the baseline itself")
        if any(r.name == rule.name for r in rules):
            raise ConfigError(f"{where}.name", f"{rule.name!r} is used by another rule")
        rules.append(rule)
    return tuple(rules)


def _check(role: Literal["primary", "guardrail"], metric: str, scope: str, threshold: float,
           a: PerQueryScores, b: PerQueryScores, *, resamples: int, confidence: float,
           seed: int, power: float) -> DecisionCheck:
    va, vb, cats = paired(a, b, metric)
    mask = scope_mask(cats, scope)
    n = int(mask.sum())
    if n < 2:
        return DecisionCheck(role, metric, scope, threshold, n, None, None, None, "missing")
    spec = find_metric(metric)
    sign = -1.0 if spec is not None and not spec.higher_is_better else 1.0
    cmp = paired_compare(va[mask], vb[mask], resamples=resamples, seed=seed,
                         confidence=confidence)
    gain = sign * cmp.delta
    lo, hi = sorted((sign * cmp.ci_low, sign * cmp.ci_high))
    if lo >= threshold - _SLACK:
        return DecisionCheck(role, metric, scope, threshold, n, gain, lo, hi, "pass")
    if hi < threshold - _SLACK:
        return DecisionCheck(role, metric, scope, threshold, n, gain, lo, hi, "fail")
    sd = float(np.std(vb[mask] - va[mask], ddof=1))
    distance = abs(gain - threshold)
    need = total = None
    if distance > _SLACK and sd > 0:
        need = n_needed(sd, distance, alpha=1.0 - confidence, power=power)
        total = math.ceil(need * len(cats) / n)
    return DecisionCheck(role, metric, scope, threshold, n, gain, lo, hi, "unclear", need,
                         total)


def _reason(c: DecisionCheck, level: str) -> str:
    what = (f"{c.metric} gain at {c.scope}" if c.role == "primary"
            else f"guardrail {c.metric} at {c.scope}")
    bar = "min gain" if c.role == "primary" else "budget"
    if c.outcome == "missing":
        return f"{what}: {c.n} paired queries, cannot be judged"
    ci = f"{c.gain:+.4f} ({level} CI [{c.ci_low:+.4f}, {c.ci_high:+.4f}])"
    if c.outcome == "pass":
        return f"{what} {ci}: lower bound >= {bar} {c.threshold:+g}"
    if c.outcome == "fail":
        return f"{what} {ci}: upper bound < {bar} {c.threshold:+g}"
    n = ("no n resolves it (the gain sits on the threshold)" if c.n_needed is None else
         f"~{c.n_needed} queries at this scope (golden set ~{c.n_needed_total}) would resolve it")
    return f"{what} {ci} straddles {bar} {c.threshold:+g}: {n}"


def evaluate_decisions(rules: Sequence[DecisionRule],
                       scores_by_config: Mapping[str, PerQueryScores], *,
                       resamples: int = 1000, confidence: float = 0.95, seed: int = 0,
                       power: float = 0.8) -> list[DecisionRecord]:
    """One record per rule, in order (see the module docstring). ``scores_by_config`` maps
    the names rules use (config ids; callers may add labels) to per-query scores
    (``bench.pipeline.scoring.ConfigScores``). A rule naming a config that is not there is a
    ValueError; a config without values (pruned) makes its checks ``missing``."""
    level = f"{100 * confidence:g} %"
    out: list[DecisionRecord] = []
    for rule in rules:
        for side, name in (("baseline", rule.baseline), ("candidate", rule.candidate)):
            if name not in scores_by_config:
                raise ValueError(f"decision {rule.name!r}: {side} {name!r} is not a config of "
                                 f"the run ({', '.join(sorted(scores_by_config))})")
        a, b = scores_by_config[rule.baseline], scores_by_config[rule.candidate]
        targets: list[tuple[Literal["primary", "guardrail"], str, float]] = [
            ("primary", rule.metric, rule.min_gain),
            *(("guardrail", g.metric, g.budget) for g in rule.guardrails)]
        checks = [_check(role, metric, scope, threshold, a, b, resamples=resamples,
                         confidence=confidence, seed=seed, power=power)
                  for role, metric, threshold in targets for scope in rule.scopes]
        outcomes = {c.outcome for c in checks}
        verdict: Verdict = ("reject" if "fail" in outcomes
                            else "adopt" if outcomes == {"pass"} else "inconclusive")
        needs = [c.n_needed_total for c in checks if c.outcome == "unclear"]
        n_total = (max(x for x in needs if x is not None)
                   if verdict == "inconclusive" and any(x is not None for x in needs) else None)
        out.append(DecisionRecord(
            name=rule.name, baseline=a.config_id, candidate=b.config_id, verdict=verdict,
            rule_json=json.dumps(rule.canonical(), sort_keys=True, separators=(",", ":")),
            rule_hash=rule_hash(rule, confidence=confidence, power=power),
            confidence=confidence, power=power, checks=tuple(checks),
            reasons=tuple(_reason(c, level) for c in checks), n_needed=n_total))
    return out
