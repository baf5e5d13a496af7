"""Plan operation of the pairwise judge, and the biases its verdicts are measured for.

With ``judge=pairwise`` the generated configs are not judged one by one: each generated
config after the first (the candidate) is compared with the first (the baseline) on every
query both answered, by ``PairwiseJudge.compare`` — asked in both presentation orders unless
``judge.orders=ab`` — and, when ``judge.cross_generator`` is set, by the same judge asking a
second model. The candidate's per-query ``pairwise_preference`` is 1 win / 0.5 tie / 0 loss
(or the mean of the two orders with ``judge.aggregate=mean``). The judge sees both configs'
passages (the baseline's, then the candidate's that the baseline lacks), since each answer was
generated from its own context.

Measured on the verdicts (:func:`pairwise_summary`, docs/metrics.md "Pairwise judge"):

- position consistency: verdicts that agree in both orders / ok verdicts asked in both;
- verbosity bias: the least-squares slope of the candidate's preference on the answers'
  length difference (candidate words - baseline words, per 10 words) and their Pearson r, each
  with a seeded bootstrap percentile CI over the pairs, and how often the longer answer won a
  decided pair (a judge free of the bias has a slope whose CI holds 0);
- self-preference: when the two configs' generators are of different families, the
  preference for the config of the judge's family by a same-family judge minus that of a
  cross-family judge, paired per query with a CI (it needs ``cross_generator``); with one
  generator family on both sides there is no own answer to prefer and it is not measurable
  (the two judges' agreement is reported instead).

A model's family is declared (a sweep member's ``family``, ``judge.family``,
``judge.cross_family``) or, where not, its short name up to the first ``-``
(``smollm2-135m-instruct`` -> ``smollm2``; :func:`family`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.context.base import Context, strip_citations
from bench.data.base import Dataset
from bench.generation.base import Generation
from bench.judge.base import OK, JudgeCall, PairItem, PairVerdict, PairwiseJudge, Rate
from bench.judge.base import position_consistency as consistency_rate
from bench.pipeline.node import OpTraits, Phase
from bench.telemetry.base import TimingLog

if TYPE_CHECKING:
    from bench.generation.stage import Contexts

#: the names the pairwise node gives the two sides (labels are not part of its key)
CANDIDATE, BASELINE = "candidate", "baseline"
PAIRS_FILE = "pairs.parquet"

_CALL = pa.struct([
    pa.field("step", pa.string()), pa.field("status", pa.string()),
    pa.field("attempts", pa.int64()), pa.field("first_valid", pa.bool_()),
    pa.field("raw", pa.list_(pa.string())), pa.field("errors", pa.list_(pa.string())),
])
_PAIR_SCHEMA = pa.schema([
    pa.field("role", pa.string()),  # primary | cross
    pa.field("query_id", pa.string()), pa.field("config_a", pa.string()),
    pa.field("config_b", pa.string()), pa.field("status", pa.string()),
    pa.field("winner", pa.string()), pa.field("consistent", pa.bool_()),
    pa.field("calls", pa.list_(_CALL)), pa.field("prefs", pa.list_(pa.float64())),
    pa.field("preference", pa.float64()), pa.field("judge", pa.string()),
    pa.field("words_a", pa.int64()), pa.field("words_b", pa.int64()),
])


def family(model: str) -> str:
    """A model's family: its short name up to the first ``-``."""
    return model.lower().split("-", 1)[0]


@dataclass(frozen=True)
class PairRun:
    """The verdicts of one candidate against the baseline: the judge's (``primary``) and
    the cross-family judge's (``cross``, empty without one), and per query the two answers'
    lengths in words (candidate, baseline)."""

    primary: tuple[PairVerdict, ...]
    cross: tuple[PairVerdict, ...]
    words: Mapping[str, tuple[int, int]]


def _words(text: str) -> int:
    return len(strip_citations(text).split())


def _union(a: Context, b: Context) -> Context:
    seen = {(p.doc_id, p.chunk_idx) for p in a.passages}
    extra = tuple(p for p in b.passages if (p.doc_id, p.chunk_idx) not in seen)
    return replace(a, passages=(*a.passages, *extra))


def pair_items(baseline: Sequence[Generation], base_ctx: Sequence[Context],
               candidate: Sequence[Generation], cand_ctx: Sequence[Context],
               dataset: Dataset) -> list[PairItem]:
    """One item per query both configs answered (``ok``), in dataset order."""
    ok_b = {g.request_id: g.text for g in baseline if g.status == "ok"}
    ok_c = {g.request_id: g.text for g in candidate if g.status == "ok"}
    ctx_b = {c.query_id: c for c in base_ctx}
    ctx_c = {c.query_id: c for c in cand_ctx}
    items = []
    for q in dataset.queries:
        qid = q.query_id
        if qid not in ok_b or qid not in ok_c:
            continue
        ctx = (_union(ctx_b[qid], ctx_c[qid]) if qid in ctx_b and qid in ctx_c
               else ctx_b.get(qid) or ctx_c.get(qid))
        items.append(PairItem(qid, q.text, CANDIDATE, ok_c[qid], BASELINE, ok_b[qid], ctx))
    return items


def _rows(role: str, verdicts: Sequence[PairVerdict], words: Mapping[str, tuple[int, int]]
          ) -> list[dict[str, Any]]:
    return [{
        "role": role, "query_id": v.query_id, "config_a": v.config_a, "config_b": v.config_b,
        "status": v.status, "winner": v.winner, "consistent": v.consistent,
        "calls": [{"step": c.step, "status": c.status, "attempts": c.attempts,
                   "first_valid": c.first_valid, "raw": list(c.raw),
                   "errors": list(c.errors)} for c in v.calls],
        "prefs": list(v.prefs), "preference": v.preference, "judge": v.judge,
        "words_a": words[v.query_id][0], "words_b": words[v.query_id][1],
    } for v in verdicts]


def load_pairs(path: Path) -> PairRun:
    primary: list[PairVerdict] = []
    cross: list[PairVerdict] = []
    words: dict[str, tuple[int, int]] = {}
    for r in pq.read_table(path).to_pylist():
        calls = tuple(JudgeCall(c["step"], c["status"], c["attempts"], c["first_valid"],
                                tuple(c["raw"]), tuple(c["errors"])) for c in r["calls"])
        v = PairVerdict(r["query_id"], r["config_a"], r["config_b"], r["status"], r["winner"],
                        r["consistent"], calls, tuple(r["prefs"]), r["preference"], r["judge"])
        (primary if r["role"] == "primary" else cross).append(v)
        words[r["query_id"]] = (r["words_a"], r["words_b"])
    return PairRun(tuple(primary), tuple(cross), words)


@dataclass(frozen=True)
class PairwiseInputs:
    baseline: list[Generation]
    baseline_contexts: Contexts
    candidate: list[Generation]
    candidate_contexts: Contexts
    data: Dataset


@dataclass(frozen=True)
class PairwiseOp(OpTraits):
    """One candidate config's answers against the baseline's (cached like a judge node: a
    change of the judge re-asks the judge only, the answers are loaded)."""

    judge: PairwiseJudge
    stage: str = "pairwise"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = PairwiseInputs

    def params(self) -> Mapping[str, Any]:
        return {"judge": json.loads(json.dumps(self.judge.cache_params(), default=str))}

    def write(self, inputs: PairwiseInputs, directory: Path, timing: TimingLog) -> None:
        from bench.judge.pairwise import PairwisePreferenceJudge

        items = pair_items(inputs.baseline, inputs.baseline_contexts.contexts,
                           inputs.candidate, inputs.candidate_contexts.contexts, inputs.data)
        words = {it.query_id: (_words(it.answer_a), _words(it.answer_b)) for it in items}
        with timing.measure("total", len(items)):
            primary = self.judge.compare(items) if items else []
            second = (self.judge.cross() if isinstance(self.judge, PairwisePreferenceJudge)
                      else None)
            cross = second.compare(items) if second is not None and items else []
        rows = _rows("primary", primary, words) + _rows("cross", cross, words)
        pq.write_table(pa.Table.from_pylist(rows, schema=_PAIR_SCHEMA), directory / PAIRS_FILE)

    def load(self, directory: Path, inputs: PairwiseInputs) -> PairRun:
        return load_pairs(directory / PAIRS_FILE)


# --------------------------------------------------------------------------- biases


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap percentile CI over ``n`` pairs (None: undefined, e.g.
    every answer pair of equal length)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass(frozen=True)
class PairwiseSummary:
    """One candidate against the baseline by the pairwise judge (run.json, the report).

    ``wins`` / ``ties`` / ``losses``: the candidate's ok verdicts; ``preference``: its mean
    preference; ``verbosity_slope``: preference per 10 words of length advantage;
    ``longer_wins``: (decided pairs the longer answer won, decided pairs of unequal length);
    ``self_preference``: None with ``self_preference_note`` saying why when not measurable;
    ``judge_agreement``: verdicts of the judge and the cross judge that agree / pairs both
    gave (None without a cross judge)."""

    candidate_id: str
    candidate: str
    baseline_id: str
    baseline: str
    judge: str
    orders: str
    aggregate: str
    n_pairs: int
    n_ok: int
    n_invalid: int
    n_error: int
    wins: int
    ties: int
    losses: int
    preference: Estimate
    position_consistency: Rate
    verbosity_slope: Estimate
    verbosity_r: Estimate
    longer_wins: tuple[int, int]
    cross_judge: str | None = None
    judge_agreement: Rate | None = None
    self_preference: Estimate | None = None
    self_preference_note: str = ""


def _bootstrap(stat: Any, arrays: Sequence[np.ndarray], resamples: int, seed: int,
               confidence: float) -> Estimate:
    n = len(arrays[0])
    value = stat(*arrays) if n else None
    if value is None or n < 2:
        return Estimate(value, None, None, n)
    rng = np.random.default_rng(seed)
    got = []
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        v = stat(*(a[idx] for a in arrays))
        if v is not None:
            got.append(v)
    if not got:
        return Estimate(value, None, None, n)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(np.asarray(got), [tail, 100 - tail])
    return Estimate(float(value), float(lo), float(hi), n)


def _slope(d: np.ndarray, p: np.ndarray) -> float | None:
    if np.ptp(d) == 0:
        return None
    dc = d - d.mean()
    return float((dc * (p - p.mean())).sum() / (dc * dc).sum() * 10.0)


def _pearson(d: np.ndarray, p: np.ndarray) -> float | None:
    if np.ptp(d) == 0 or np.ptp(p) == 0:
        return None
    return float(np.corrcoef(d, p)[0, 1])


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if len(x) else None


def verbosity(verdicts: Sequence[PairVerdict], words: Mapping[str, tuple[int, int]], *,
              resamples: int, seed: int, confidence: float
              ) -> tuple[Estimate, Estimate, tuple[int, int]]:
    """(slope per 10 words, Pearson r, (longer won, decided pairs of unequal length)) of the
    candidate's preference on its length advantage, over the ok verdicts."""
    ok = [v for v in verdicts if v.status == OK and v.preference_a is not None]
    d = np.asarray([words[v.query_id][0] - words[v.query_id][1] for v in ok], dtype=np.float64)
    p = np.asarray([v.preference_a for v in ok], dtype=np.float64)
    slope = _bootstrap(_slope, (d, p), resamples, seed, confidence)
    r = _bootstrap(_pearson, (d, p), resamples, seed, confidence)
    decided = [(di, pi) for di, pi in zip(d, p, strict=True) if di != 0 and pi != 0.5]
    longer = sum((di > 0) == (pi > 0.5) for di, pi in decided)
    return slope, r, (longer, len(decided))


def self_preference(primary: Sequence[PairVerdict], cross: Sequence[PairVerdict], *,
                    judge: str, cross_judge: str | None, candidate_generator: str,
                    baseline_generator: str, resamples: int, seed: int, confidence: float,
                    families: Mapping[str, str | None] | None = None
                    ) -> tuple[Estimate | None, str]:
    """The same-family judge's preference for its family's config minus the cross-family
    judge's, paired per query (module docstring); None and why when not measurable.
    ``families``: declared families by role (candidate, baseline, judge, cross); a role
    missing or None falls back to :func:`family` of the name."""
    fam = _families(families, candidate=candidate_generator, baseline=baseline_generator,
                    judge=judge, cross=cross_judge)
    fam_c, fam_b = fam["candidate"], fam["baseline"]
    if cross_judge is None:
        return None, "needs a second judge model (judge.cross_generator)"
    if fam_c == fam_b:
        return None, (f"both configs are answered by the {fam_c} family: no own answer to "
                      "prefer")
    fams = {fam["judge"]: "primary", fam["cross"]: "cross"}
    own = next(((f, role) for f, role in fams.items() if f in (fam_c, fam_b)), None)
    if own is None or len(fams) < 2:
        return None, "neither judge shares a family with one config's generator"
    own_family, role = own
    same, other = (primary, cross) if role == "primary" else (cross, primary)
    sign = 1.0 if own_family == fam_c else -1.0  # preference for the judge-family config
    by_q = {v.query_id: v for v in other if v.status == OK}
    pairs = [(v.preference_a, by_q[v.query_id].preference_a) for v in same
             if v.status == OK and v.query_id in by_q]
    diff = np.asarray([sign * (a - b) for a, b in pairs if a is not None and b is not None],
                      dtype=np.float64)
    return _bootstrap(_mean, (diff,), resamples, seed, confidence), ""


def _families(declared: Mapping[str, str | None] | None, **names: str | None
              ) -> dict[str, str | None]:
    got = dict(declared or {})
    return {role: got.get(role) or (None if name is None else family(name))
            for role, name in names.items()}


def agreement(primary: Sequence[PairVerdict], cross: Sequence[PairVerdict]) -> Rate:
    """Pairs where the two judges gave the same winner / pairs both judged ok."""
    by_q = {v.query_id: v for v in cross if v.status == OK}
    both = [(v, by_q[v.query_id]) for v in primary if v.status == OK and v.query_id in by_q]
    same = sum(a.winner == b.winner for a, b in both)
    return Rate(same / len(both) if both else None, same, len(both))


def pairwise_summary(run: PairRun, *, candidate_id: str, candidate: str, baseline_id: str,
                     baseline: str, judge: str, cross_judge: str | None, orders: str,
                     aggregate: str, candidate_generator: str, baseline_generator: str,
                     resamples: int, seed: int, confidence: float,
                     families: Mapping[str, str | None] | None = None) -> PairwiseSummary:
    v = run.primary
    ok = [x for x in v if x.status == OK]
    prefs = np.asarray([x.preference_a for x in ok], dtype=np.float64)
    slope, r, longer = verbosity(v, run.words, resamples=resamples, seed=seed,
                                 confidence=confidence)
    sp, note = self_preference(v, run.cross, judge=judge, cross_judge=cross_judge,
                               candidate_generator=candidate_generator,
                               baseline_generator=baseline_generator, resamples=resamples,
                               seed=seed, confidence=confidence, families=families)
    return PairwiseSummary(
        candidate_id=candidate_id, candidate=candidate, baseline_id=baseline_id,
        baseline=baseline, judge=judge, orders=orders, aggregate=aggregate,
        n_pairs=len(v), n_ok=len(ok), n_invalid=sum(x.status == "invalid" for x in v),
        n_error=sum(x.status == "error" for x in v),
        wins=sum(x.winner == x.config_a for x in ok), ties=sum(x.winner == "tie" for x in ok),
        losses=sum(x.winner == x.config_b for x in ok),
        preference=_bootstrap(_mean, (prefs,), resamples, seed, confidence),
        position_consistency=consistency_rate(v), verbosity_slope=slope, verbosity_r=r,
        longer_wins=longer, cross_judge=cross_judge,
        judge_agreement=agreement(v, run.cross) if cross_judge is not None else None,
        self_preference=sp, self_preference_note=note)
