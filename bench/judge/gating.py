"""Release gates on LLM-judge metrics need a calibration record (``bench.judge.calibration``).

A gate (``gates`` or ``regression.gates``) on a metric of an LLM judge is refused before any
work unless ``<judge.calibration.records>/<judge>.json`` was measured with the run's rubric
hash and dataset, on the calibration split (which the run does not evaluate), and its
statistic clears ``judge.calibration.floor``; ``uncalibrated: allow`` lets it through and the
judge section of the report lists it first. Verifiers ask no model and need no record.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import ConfigError
from bench.judge.calibration import CALIBRATION_SPLIT, STATISTICS, read_record

if TYPE_CHECKING:
    from bench.judge.base import Judge

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CalibrationPolicy:
    """``judge.calibration``: where records live (relative to the repository root), the
    statistic and floor a judge metric's record must reach to be gated (``bound``: the
    point estimate or the CI's lower end), and what an uncalibrated gate does."""

    records: str = "conf/judge/calibration"
    statistic: str = "kappa"
    floor: float = 0.4
    bound: str = "value"
    split: str = CALIBRATION_SPLIT
    uncalibrated: str = "refuse"

    @classmethod
    def of(cls, block: Mapping[str, Any] | None) -> CalibrationPolicy:
        block = dict(block or {})
        unknown = sorted(set(block) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"judge.calibration.{unknown[0]}",
                              f"unknown key; keys: {', '.join(cls.__dataclass_fields__)}")
        p = cls(**block)
        if p.statistic not in STATISTICS:
            raise ConfigError("judge.calibration.statistic",
                              f"must be one of {', '.join(STATISTICS)}, got {p.statistic!r}")
        if p.bound not in ("value", "ci_low"):
            raise ConfigError("judge.calibration.bound", f"value | ci_low, got {p.bound!r}")
        if p.uncalibrated not in ("refuse", "allow"):
            raise ConfigError("judge.calibration.uncalibrated",
                              f"refuse | allow, got {p.uncalibrated!r}")
        return p

    def directory(self) -> Path:
        d = Path(self.records).expanduser()
        return d if d.is_absolute() else REPO / d


def _why_uncalibrated(policy: CalibrationPolicy, judge: str, digest: str, metric: str,
                      dataset: str, evaluated: Collection[str]) -> str | None:
    """Why ``judge``'s ``metric`` may not be gated (None: its record clears the floor)."""
    path = policy.directory() / f"{judge}.json"
    if not path.is_file():
        return f"no calibration record {path}"
    rec = read_record(path)
    if rec.judge != judge:
        return f"{path} is a record of judge {rec.judge!r}"
    if rec.rubric != digest:
        # an ensemble's hash covers its members' rubrics, models, sampling and aggregation
        # (bench.judge.ensemble): there is no conf/judge/rubrics/ensemble.yaml to name
        what = ("judge.ensemble (its members' rubrics, models and aggregation)"
                if judge == "ensemble" else f"conf/judge/rubrics/{judge}.yaml")
        return (f"{path} was measured with rubric {rec.rubric[:12]}, this run's "
                f"{what} is {digest[:12]}: recalibrate")
    if rec.dataset != dataset:
        return f"{path} was measured on dataset {rec.dataset!r}, this run's is {dataset!r}"
    if rec.split != policy.split:
        return f"{path} was measured on split {rec.split!r}, not {policy.split!r}"
    if rec.split in evaluated:
        return f"this run evaluates queries of the {rec.split!r} split the judge was calibrated on"
    entry = rec.metrics.get(metric)
    stat = None if entry is None else entry.get(policy.statistic)
    if stat is None:
        return f"{path} has no {policy.statistic} for {metric}"
    value = stat[0] if policy.bound == "value" else stat[1]
    if value is None or value < policy.floor:
        what = "" if policy.bound == "value" else " CI lower bound"
        return (f"{metric} {policy.statistic}{what} {value if value is None else f'{value:.3f}'}"
                f" < floor {policy.floor:g} ({path})")
    return None


@dataclass(frozen=True)
class UncalibratedGate:
    """A gate on an LLM-judge metric let through by ``uncalibrated: allow``, and why it
    would otherwise have been refused."""

    key: str  # the gate's config key (gates[0].metric)
    metric: str
    judge: str
    reason: str


def gated_metrics(settings: Any) -> list[tuple[str, str]]:
    """(config key, metric) of every release gate of a run's settings (``RunSettings``): the
    ``gates`` and the ``regression`` gates against a baseline."""
    out = [(f"gates[{i}].metric", g.metric) for i, g in enumerate(settings.gates)]
    reg = settings.regression
    if reg is not None:
        out += [(f"regression.gates[{i}].metric", r.metric) for i, r in enumerate(reg.rules)]
    return out


def check_calibrated_gates(gates: Sequence[tuple[str, str]], judge: Judge | None,
                           block: Mapping[str, Any] | None, *, dataset: str,
                           evaluated: Collection[str]) -> list[UncalibratedGate]:
    """Before any work: each gate (config key, metric; :func:`gated_metrics`) on an LLM
    judge's metric needs a calibration record that clears the floor (ConfigError naming the
    gate's key otherwise), unless the policy allows uncalibrated gates: then they are
    returned, for the report to print. ``evaluated``: the splits of the queries the run
    evaluates."""
    from bench.judge.stage import _members, asks_model

    if judge is None:
        return []
    emits = {m: j for j in _members(judge) if asks_model(j) for m in j.metrics}
    if not any(metric in emits for _, metric in gates):
        return []
    policy = CalibrationPolicy.of(block)
    out = []
    for key, metric in gates:
        j = emits.get(metric)
        if j is None:
            continue
        why = _why_uncalibrated(policy, j.name, j.rubric.digest, metric, dataset, evaluated)
        if why is None:
            continue
        if policy.uncalibrated != "allow":
            raise ConfigError(key,
                              f"{metric} is an LLM-judge metric without a calibration "
                              f"clearing the floor: {why}; calibrate it (python -m "
                              f"bench.calibrate LABELS judge_labelling.jsonl --records "
                              f"{policy.records}) or set judge.calibration.uncalibrated=allow")
        out.append(UncalibratedGate(key, metric, j.name, why))
    return out
