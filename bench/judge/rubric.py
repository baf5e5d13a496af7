"""An LLM judge's rubric as data: ``conf/judge/rubrics/<judge>.yaml``.

A rubric holds the judge's prompt templates (verbatim: the judge sends exactly these strings,
filled per answer), what each of its metric values means (``scores.<metric>``: ``kind``,
``definition``, ``levels``, ``approve_at``) and good / bad examples for labellers. Its
:attr:`Rubric.digest` (SHA-256 of the parsed file, comments excluded) enters the judge's
cache key and every calibration record (``bench.calibrate``), so editing a rubric re-runs the
judge and invalidates the calibration that was measured with the old one.

Score kinds: ``ratio`` (a share in [0, 1]), ``graded`` (integer levels, e.g. a 1-5 rating
recorded as (r - 1) / 4), ``binary`` (0 / 1), ``preference`` (0 / 0.5 / 1). ``approve_at``
is where a verdict counts as an approval when a binary human label is compared with it: a
score >= it for a higher-is-better metric, <= it for a lower-is-better one, on the rubric's
own scale (a graded rubric's levels, not the recorded 0..1 value).

A rubric that lacks a prompt its judge asks, or a score definition for a metric its judge
emits, is an ``InputError`` naming the file and the key (exit 2, before any work).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from bench.errors import InputError

#: where the rubrics live
RUBRIC_DIR = Path(__file__).resolve().parents[2] / "conf" / "judge" / "rubrics"
SCORE_KINDS = ("ratio", "graded", "binary", "preference")


@dataclass(frozen=True)
class ScoreDef:
    """What one metric's values mean. ``levels``: value (on the rubric's scale) -> meaning;
    ``approve_at``: the approval threshold on that scale (module docstring)."""

    metric: str
    kind: str
    definition: str
    levels: tuple[tuple[float, str], ...]
    approve_at: float

    def to_scale(self, recorded: float) -> float:
        """A recorded score (0..1) on the rubric's scale: a graded rating r from (r - 1) /
        (top - bottom); the other kinds record their own scale."""
        if self.kind != "graded":
            return recorded
        lo, hi = min(v for v, _ in self.levels), max(v for v, _ in self.levels)
        return lo + recorded * (hi - lo)


@dataclass(frozen=True)
class Rubric:
    judge: str
    path: Path
    prompts: tuple[tuple[str, str], ...]
    scores: tuple[ScoreDef, ...]
    examples: tuple[Mapping[str, Any], ...]
    digest: str

    def prompt(self, key: str) -> str:
        found = dict(self.prompts).get(key)
        if found is None:
            raise InputError(self.path, 0, f"prompts.{key}: missing (the {self.judge} judge "
                                           f"asks it)")
        return found

    def score(self, metric: str) -> ScoreDef:
        found = next((s for s in self.scores if s.metric == metric), None)
        if found is None:
            raise InputError(self.path, 0, f"scores.{metric}: missing score definition")
        return found

    def check(self, metrics: Sequence[str], prompt_keys: Sequence[str]) -> None:
        """Every prompt the judge asks and every metric it emits is defined here."""
        for key in prompt_keys:
            self.prompt(key)
        for m in metrics:
            self.score(m)


def _fail(path: Path, key: str, what: str) -> InputError:
    return InputError(path, 0, f"{key}: {what}")


def _score_def(path: Path, metric: str, obj: object) -> ScoreDef:
    key = f"scores.{metric}"
    if not isinstance(obj, Mapping):
        raise _fail(path, key, "must be a mapping with kind, definition, levels, approve_at")
    kind = obj.get("kind")
    if kind not in SCORE_KINDS:
        raise _fail(path, f"{key}.kind", f"must be one of {', '.join(SCORE_KINDS)}, got {kind!r}")
    definition = obj.get("definition")
    if not isinstance(definition, str) or not definition.strip():
        raise _fail(path, f"{key}.definition", "missing score definition")
    levels = obj.get("levels")
    if not isinstance(levels, Mapping) or not levels:
        raise _fail(path, f"{key}.levels", "missing: each score value with its meaning")
    for v, meaning in levels.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _fail(path, f"{key}.levels", f"level {v!r} is not a number")
        if not isinstance(meaning, str) or not meaning.strip():
            raise _fail(path, f"{key}.levels.{v}", "missing score definition")
    if kind == "graded":
        lo, hi = int(min(levels)), int(max(levels))
        gaps = [v for v in range(lo, hi + 1) if v not in levels]
        if gaps:
            raise _fail(path, f"{key}.levels.{gaps[0]}", "missing score definition")
    if kind == "binary" and set(levels) != {0, 1}:
        raise _fail(path, f"{key}.levels", "a binary score defines levels 0 and 1")
    approve = obj.get("approve_at")
    if isinstance(approve, bool) or not isinstance(approve, int | float):
        raise _fail(path, f"{key}.approve_at", "must be a number on the score's scale")
    return ScoreDef(metric, kind, definition.strip(),
                    tuple(sorted((float(v), str(m)) for v, m in levels.items())), float(approve))


def _parsed(path: Path) -> dict[str, Any]:
    try:
        obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", -1) + 1
        raise InputError(path, line, f"not valid YAML: {exc}") from None
    if not isinstance(obj, dict):
        raise InputError(path, 0, "expected a mapping (judge, prompts, scores, examples)")
    return obj


def load_rubric(path: str | Path) -> Rubric:
    """The rubric in ``path``; InputError naming the file and key when it is incomplete."""
    path = Path(path)
    obj = _parsed(path)
    judge = obj.get("judge")
    if not isinstance(judge, str) or not judge:
        raise _fail(path, "judge", "missing (the judge's option name)")
    source = obj.get("prompts_from")
    if source is not None:
        prompts_obj = _parsed(path.with_name(f"{source}.yaml")).get("prompts")
    else:
        prompts_obj = obj.get("prompts")
    if not isinstance(prompts_obj, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in prompts_obj.items()):
        raise _fail(path, "prompts", "must map prompt names to template strings")
    scores_obj = obj.get("scores")
    if not isinstance(scores_obj, Mapping) or not scores_obj:
        raise _fail(path, "scores", "missing score definitions")
    scores = tuple(_score_def(path, str(m), s) for m, s in scores_obj.items())
    examples = obj.get("examples") or []
    if not isinstance(examples, list) or not all(isinstance(e, Mapping) for e in examples):
        raise _fail(path, "examples", "must be a list of mappings")
    canonical = {"judge": judge, "prompts": dict(prompts_obj),
                 "scores": {s.metric: [s.kind, s.definition, [list(x) for x in s.levels],
                                       s.approve_at] for s in scores},
                 "examples": examples}
    digest = hashlib.sha256(json.dumps(canonical, sort_keys=True, ensure_ascii=False,
                                       default=str).encode()).hexdigest()
    return Rubric(judge, path, tuple(prompts_obj.items()), scores,
                  tuple(examples), digest)


@cache
def rubric(judge: str) -> Rubric:
    """The shipped rubric of ``judge`` (``conf/judge/rubrics/<judge>.yaml``), read once."""
    return load_rubric(RUBRIC_DIR / f"{judge}.yaml")


def prompts(judge: str, *keys: str) -> tuple[str, ...]:
    """The named prompt templates of ``judge``'s rubric, in order (module constants of the
    judge modules are read this way, so the prompt text lives only in the YAML)."""
    r = rubric(judge)
    return tuple(r.prompt(k) for k in keys)
