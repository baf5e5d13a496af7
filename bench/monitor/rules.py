"""The guardrail rules file (YAML) and its evaluation over a window of records.

::

    deploys:                       # deploy markers (or deploys_file: JSONL {at, version})
      - {at: "2026-12-01T10:00:00Z", version: "v42"}
    rules:
      faithfulness:                # mean score of the last `sample` scored requests
        floor: 0.7
        sample: 50
        events: evals.jsonl        # gen_ai.evaluation.result events (bench.traces writeback)
        metric: faithfulness       # gen_ai.evaluation.name to read (default: faithfulness)
      p95_latency_ms:
        slo: 1500
      regeneration_rate:           # control band p0 +- z * sqrt(p0 (1 - p0) / n)
        baseline: 0.05
        z: 3.0
      cost_per_query_usd:          # bench.cost_usd of the trace, else tokens x price
        budget: 0.002
        price_per_1k_input_tokens: 0.0005
        price_per_1k_output_tokens: 0.0015
      filter_false_exclusion:      # share of labelled-relevant docs the filter ruled out
        bound: 0.05
        labels: golden.jsonl       # golden rows with provenance.trace_id (review merge)
        corpus: corpus.jsonl       # the documents' tags and tenants
        min_labelled: 20           # fewer labelled filtered requests: no_data
        confidence: 0.95

The false-exclusion rate (the seed's, ``bench.filters.base``, over the corpus, not the
retrieved pool): over the window's requests that carry a metadata filter
(``bench.filter.tags``) and a labelled golden row, the relevant documents (grade >= 1) the
caller may see (no tenant, or the request's) are the denominator, those carrying none of the
filter's tags the numerator (sum over requests / sum over requests). Its CI is a bootstrap
over requests (a request's documents move together); the rule alerts only when the CI's
lower end is above the bound, so a small labelled sample needs a larger excess to alert,
like the regeneration band.

Every rule is optional; paths are relative to the rules file. A rule whose window has no
data for it (no scored request, no latency, no cost) is ``no_data``: said, not passed or
failed. A rule whose value is out of bounds is an ``alert``; every alert records whether a
deploy marker falls inside the window (first to last request): the seed's triage rule says
an alert right after a release points at a regression, one without a change at drift.
A malformed rules file is an InputError naming ``RULES:line`` and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import InputError
from bench.traces.record import TraceRecord

RULES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "faithfulness": {"floor": (int, float), "sample": int, "events": str, "metric": str},
    "p95_latency_ms": {"slo": (int, float)},
    "regeneration_rate": {"baseline": (int, float), "z": (int, float)},
    "cost_per_query_usd": {"budget": (int, float), "price_per_1k_input_tokens": (int, float),
                           "price_per_1k_output_tokens": (int, float)},
    "filter_false_exclusion": {"bound": (int, float), "labels": str, "corpus": str,
                               "min_labelled": int, "confidence": (int, float),
                               "resamples": int, "seed": int},
}
REQUIRED = {"faithfulness": ("floor", "events"), "p95_latency_ms": ("slo",),
            "regeneration_rate": ("baseline",), "cost_per_query_usd": ("budget",),
            "filter_false_exclusion": ("bound", "labels", "corpus")}


@dataclass(frozen=True)
class Deploy:
    at_ns: int
    version: str


@dataclass(frozen=True)
class Rules:
    path: Path
    rules: Mapping[str, Mapping[str, Any]]
    deploys: tuple[Deploy, ...] = ()


@dataclass(frozen=True)
class Outcome:
    rule: str
    status: str  # pass | alert | no_data
    value: float | None
    bound: str
    n: int
    deploy_in_window: bool = False
    deploys: tuple[str, ...] = field(default=())
    triage: str = ""
    #: the value's confidence interval, for rules that have one
    ci: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "status": self.status, "value": self.value,
                "bound": self.bound, "n": self.n, "deploy_in_window": self.deploy_in_window,
                "deploys": list(self.deploys), "triage": self.triage,
                "ci": None if self.ci is None else list(self.ci)}


# -- reading -------------------------------------------------------------------------------
def _lines(node: Any, prefix: str, out: dict[str, int]) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = f"{prefix}{k.value}"
            out[key] = k.start_mark.line + 1
            _lines(v, key + ".", out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[f"{prefix}{i}"] = v.start_mark.line + 1
            _lines(v, f"{prefix}{i}.", out)


def _ns(value: Any, err: Any) -> int:
    from bench.traces.openinference import iso_ns

    if isinstance(value, datetime):
        return iso_ns(value)
    try:
        return iso_ns(datetime.fromisoformat(str(value).replace("Z", "+00:00")))
    except ValueError:
        raise err(f"{value!r} is not an ISO timestamp") from None


def read_rules(path: str | Path) -> Rules:
    import yaml

    from bench.data.jsonl import iter_jsonl, read_text

    p = Path(path)
    text = read_text(p)
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(p, mark.line + 1 if mark else 0, f"malformed YAML: "
                         f"{getattr(exc, 'problem', exc)}") from None
    lines: dict[str, int] = {}
    _lines(node, "", lines)

    def error(key: str, message: str) -> InputError:
        return InputError(p, lines.get(key, 0), f"{key}: {message}")

    if not isinstance(data, dict):
        raise InputError(p, 1, "the rules file must be a mapping with 'rules' (and 'deploys')")
    extra = sorted(set(data) - {"rules", "deploys", "deploys_file"})
    if extra:
        raise error(extra[0], "unknown key; allowed: rules, deploys, deploys_file")
    rules = data.get("rules")
    if not isinstance(rules, dict) or not rules:
        raise InputError(p, lines.get("rules", 1), "rules: a mapping of at least one rule "
                         f"({', '.join(RULES)})")
    for name, body in rules.items():
        key = f"rules.{name}"
        if name not in RULES:
            raise error(key, f"unknown rule; use {', '.join(RULES)}")
        if not isinstance(body, dict):
            raise error(key, "must be a mapping of its settings")
        for k, v in body.items():
            if k not in RULES[name]:
                raise error(f"{key}.{k}", f"unknown setting; {name} takes "
                                          f"{', '.join(RULES[name])}")
            want = RULES[name][k]
            if isinstance(v, bool) or not isinstance(v, want):
                raise error(f"{key}.{k}", f"must be a {'number' if want is not str else 'string'}"
                                          f", got {v!r}")
            if isinstance(v, int | float) and not (math.isfinite(v) and v >= 0):
                raise error(f"{key}.{k}", f"must be a finite number >= 0, got {v!r}")
        for k in REQUIRED[name]:
            if k not in body:
                raise error(key, f"missing setting '{k}'")
        if name == "regeneration_rate" and not 0 < body["baseline"] < 1:
            raise error(f"{key}.baseline", "must be a rate strictly between 0 and 1")
        if name == "faithfulness":
            ev = p.parent / body["events"]
            if not ev.is_file():
                raise error(f"{key}.events", f"file not found: {ev}")
        if name == "filter_false_exclusion":
            for k in ("labels", "corpus"):
                if not (p.parent / body[k]).is_file():
                    raise error(f"{key}.{k}", f"file not found: {p.parent / body[k]}")
            if not 0 < body.get("confidence", 0.95) < 1:
                raise error(f"{key}.confidence", "must be strictly between 0 and 1")
            if body.get("min_labelled", 20) < 1 or body.get("resamples", 2000) < 100:
                raise error(key, "min_labelled must be >= 1 and resamples >= 100")
    deploys: list[Deploy] = []
    for i, d in enumerate(data.get("deploys") or []):
        key = f"deploys.{i}"
        if not isinstance(d, dict) or "at" not in d:
            raise error(key, "a deploy marker is {at: ISO time, version: ...}")
        deploys.append(Deploy(_ns(d["at"], lambda m, k=key: error(k, m)),
                              str(d.get("version", ""))))
    if data.get("deploys_file"):
        for where, obj in iter_jsonl(p.parent / str(data["deploys_file"])):
            if "at" not in obj:
                raise where.error("a deploy marker is {at: ISO time, version: ...}")
            deploys.append(Deploy(_ns(obj["at"], where.error), str(obj.get("version", ""))))
    return Rules(p, rules, tuple(sorted(deploys, key=lambda d: d.at_ns)))


# -- evaluating ----------------------------------------------------------------------------
def _faithfulness(records: Sequence[TraceRecord], cfg: Mapping[str, Any], base: Path
                  ) -> tuple[float | None, str, int, bool]:
    from bench.traces.evaluations import read_events

    metric = cfg.get("metric", "faithfulness")
    scores: dict[str, float] = {}
    for e in read_events(base / cfg["events"]):
        if e.name == metric and e.value is not None:
            scores[e.trace_id] = e.value  # the last event of a trace wins
    scored = [scores[r.trace_id] for r in sorted(records, key=lambda r: r.timestamp_ns)
              if r.trace_id in scores]
    sample = int(cfg.get("sample", 50))
    if not scored:
        return None, f">= {cfg['floor']}", 0, False
    last = scored[-sample:]
    value = float(np.mean(last))
    return value, f">= {cfg['floor']} (mean of the last {len(last)} scored)", len(last), \
        value < cfg["floor"]


def _p95(records: Sequence[TraceRecord], cfg: Mapping[str, Any]
         ) -> tuple[float | None, str, int, bool]:
    lat = [r.total_ms for r in records if r.total_ms is not None]
    if not lat:
        return None, f"<= {cfg['slo']} ms", 0, False
    v = float(np.percentile(lat, 95))
    return v, f"<= {cfg['slo']} ms", len(lat), v > cfg["slo"]


def control_band(p0: float, n: int, z: float) -> tuple[float, float]:
    """p0 +- z * sqrt(p0 (1 - p0) / n), clipped to [0, 1]: wider for small windows."""
    half = z * math.sqrt(p0 * (1 - p0) / n)
    return max(0.0, p0 - half), min(1.0, p0 + half)


def _regen(records: Sequence[TraceRecord], cfg: Mapping[str, Any]
           ) -> tuple[float | None, str, int, bool]:
    n = len(records)
    if not n:
        return None, "", 0, False
    lo, hi = control_band(float(cfg["baseline"]), n, float(cfg.get("z", 3.0)))
    v = sum(r.regenerated for r in records) / n
    return v, f"in [{lo:.4f}, {hi:.4f}] (baseline {cfg['baseline']}, n {n})", n, \
        not lo <= v <= hi


def _cost(records: Sequence[TraceRecord], cfg: Mapping[str, Any]
          ) -> tuple[float | None, str, int, bool]:
    pin = cfg.get("price_per_1k_input_tokens")
    pout = cfg.get("price_per_1k_output_tokens")
    costs = []
    for r in records:
        if r.cost_usd is not None:
            costs.append(r.cost_usd)
        elif pin is not None and pout is not None and r.input_tokens is not None \
                and r.output_tokens is not None:
            costs.append(r.input_tokens / 1e3 * pin + r.output_tokens / 1e3 * pout)
    if not costs:
        return None, f"<= {cfg['budget']} USD", 0, False
    v = float(np.mean(costs))
    return v, f"<= {cfg['budget']} USD", len(costs), v > cfg["budget"]


@dataclass(frozen=True)
class Exclusions:
    """Per labelled filtered request: eligible relevant docs and those the filter ruled out."""

    trace_ids: tuple[str, ...]
    eligible: np.ndarray  # int64
    excluded: np.ndarray  # int64


def false_exclusions(records: Sequence[TraceRecord], labels: Mapping[str, Sequence[str]],
                     docs: Mapping[str, Any]) -> Exclusions:
    """The requests of ``records`` with a filter and a label (``labels``: trace id ->
    relevant doc ids; ``docs``: doc id -> ``Document``); a request without an eligible
    relevant document is left out (nothing it could wrongly exclude)."""
    ids, el, ex = [], [], []
    for r in records:
        if not r.filter_tags or r.trace_id not in labels:
            continue
        want = set(r.filter_tags)
        eligible = [docs[d] for d in labels[r.trace_id]
                    if d in docs and (not docs[d].tenant or docs[d].tenant == r.tenant)]
        if not eligible:
            continue
        ids.append(r.trace_id)
        el.append(len(eligible))
        ex.append(sum(1 for d in eligible if not want & set(d.tags)))
    return Exclusions(tuple(ids), np.asarray(el, dtype=np.int64),
                      np.asarray(ex, dtype=np.int64))


def ratio_ci(num: np.ndarray, den: np.ndarray, *, confidence: float = 0.95,
             resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """sum(num) / sum(den) and its bootstrap percentile CI, resampling the pairs (requests),
    not the documents: a request's documents share its filter. Needs len >= 1, den > 0."""
    n = len(num)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    boot = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    a = (1 - confidence) / 2
    return (float(num.sum() / den.sum()), float(np.quantile(boot, a)),
            float(np.quantile(boot, 1 - a)))


def _labels(path: Path, doc_ids: set[str]) -> dict[str, tuple[str, ...]]:
    from bench.data.golden import read_queries
    from bench.filters.base import RELEVANT_GRADE

    out = {}
    for q in read_queries(path, doc_ids):
        trace = dict(q.provenance).get("trace_id") or q.query_id.removeprefix("trace-")
        out[str(trace)] = tuple(d for d, g in q.qrels if g >= RELEVANT_GRADE)
    return out


def _false_exclusion(records: Sequence[TraceRecord], cfg: Mapping[str, Any], base: Path
                     ) -> tuple[float | None, str, int, bool, tuple[float, float] | None]:
    from bench.data.golden import read_corpus

    corpus = {d.doc_id: d for d in read_corpus(base / cfg["corpus"])}
    ex = false_exclusions(records, _labels(base / cfg["labels"], set(corpus)), corpus)
    need = int(cfg.get("min_labelled", 20))
    conf = float(cfg.get("confidence", 0.95))
    if len(ex.trace_ids) < need:
        return None, f"<= {cfg['bound']} (needs >= {need} labelled filtered requests)", \
            len(ex.trace_ids), False, None
    v, lo, hi = ratio_ci(ex.excluded, ex.eligible, confidence=conf,
                         resamples=int(cfg.get("resamples", 2000)), seed=int(cfg.get("seed", 0)))
    return v, (f"<= {cfg['bound']} (alert when the {conf:.0%} CI [{lo:.4f}, {hi:.4f}] is above "
               f"it; {int(ex.excluded.sum())} of {int(ex.eligible.sum())} relevant docs)"), \
        len(ex.trace_ids), lo > cfg["bound"], (lo, hi)


def check(rules: Rules, records: Sequence[TraceRecord]) -> list[Outcome]:
    t0 = min((r.timestamp_ns for r in records), default=0)
    t1 = max((r.timestamp_ns + int((r.total_ms or 0) * 1e6) for r in records), default=0)
    inside = tuple(d.version or str(d.at_ns) for d in rules.deploys if t0 <= d.at_ns <= t1)
    out = []
    for name, cfg in rules.rules.items():
        ci = None
        if name == "faithfulness":
            v, bound, n, bad = _faithfulness(records, cfg, rules.path.parent)
        elif name == "p95_latency_ms":
            v, bound, n, bad = _p95(records, cfg)
        elif name == "regeneration_rate":
            v, bound, n, bad = _regen(records, cfg)
        elif name == "filter_false_exclusion":
            v, bound, n, bad, ci = _false_exclusion(records, cfg, rules.path.parent)
        else:
            v, bound, n, bad = _cost(records, cfg)
        status = "no_data" if v is None else ("alert" if bad else "pass")
        triage = ""
        if status == "alert":
            triage = (f"deploy {', '.join(inside)} in the window: look for a regression"
                      if inside else "no deploy in the window: look for drift")
        out.append(Outcome(name, status, v, bound, n, bool(inside), inside, triage, ci))
    return out
