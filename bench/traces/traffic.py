"""``+experiment=traffic``: the production-traffic loop end to end against real servers
(docs/traces.md, "The loop, end to end").

Once the run has evaluated its config (the artifacts it cached are what the servers load),
``TrafficCallback`` (a Hydra callback, ``on_run_end``) runs ``run_loop`` into the run dir:

1. **serve**: ``python -m bench.serve`` of the run's config with ``serve.traces`` (the
   OpenTelemetry SDK writes the spans) receives three windows of the dataset's golden
   questions, each sent on a Poisson schedule of the capacity module
   (``bench.capacity.schedule.poisson_arrivals``): a *reference* and a *clean* window without
   the ``absent_category``, and an *injected* window where ``injected_share`` of the questions
   are of that category and the regenerate rate jumps. The requests carry tenant, route,
   user and feedback attributes; a few reference questions carry an e-mail address (PII).
2. **import** the spans against the corpus (``bench.traces.importer``).
3. **evaluations**: each answerable request's hit@k from the golden judgements, written as
   ``gen_ai.evaluation.result`` events and read back.
4. **sample** every window's records (uniform + oversampled strata, ``bench.traces.sample``).
5. **drift**: reference vs clean and reference vs injected (MMD and C2ST on query embeddings);
   a window alarms when either test's p-value is below alpha / 2 (Bonferroni over the two).
6. **guardrails** (``bench.monitor.rules``) on the clean and the injected window, a deploy
   marker at the start of the injected window; the hit@k events feed the score-floor rule.
7. **shadow replay** of the sample (PII-scrubbed records left out: they ask another question
   than production answered) through the production server itself (a control: agreement 1)
   and through each candidate config served by its own ``bench.serve``.

With ``answers`` > 0 production serves the generated config of ``answer_with`` and, after the
windows, answers that many more questions (``/v1/answer``; not part of the windows, the events
or the sample); the candidates, served with the same generator config, answer them under
replay and a **judge** step scores both sides' answers (``bench.traces.judged``: faithfulness,
answer relevancy, context relevance, paired candidate vs production; a plumbing check with the
packaged 135M judge). A **quality** step (after drift) re-weights the golden set's per-category
``quality_metric`` (the run's per_query.parquet) to each window's route mix, and a **review**
step sends the sample through the review queue (the golden judgements as the reviewer), merges
it and pairs the labelled metrics of production and each candidate (``bench.traces.quality``).

Everything is written into the run dir: ``spans.jsonl``, ``import.json``, ``records.jsonl``
and per window ``<window>/records.jsonl``, ``evals.otlp.jsonl``, ``sample.jsonl``,
``drift.json``, ``<window>/rules.yaml`` + ``monitor.json``, ``replay.jsonl``, the servers'
logs, ``traffic.json`` and the one-page ``traffic.md``. A failed step is said in the report
(which then reads FAILED, with the steps it kept from running) and exits 1; a loop that ran
but missed one of its expectations (the injected window not detected, the clean window
alarmed, the control replay disagreeing, ...) exits 3, like a release gate.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from hydra.experimental.callback import Callback

from bench.data.base import Dataset, Query
from bench.errors import BenchError, ConfigError
from bench.traces.traffic_report import LoopResult, Step, write_report

log = logging.getLogger("bench")

WINDOWS = ("reference", "clean", "injected")
#: the questions production answers after the windows (the judged replay's sample)
ANSWERED = "answered"
KEY = "hydra.callbacks.traffic"
PII_TAIL = " (reply to jane.doe@example.com)"


@dataclass(frozen=True)
class TrafficSettings:
    """The loop's knobs (``hydra.callbacks.traffic.*`` in conf/experiment/traffic.yaml)."""

    per_window: int = 100
    rate_rps: float = 10.0
    injected_share: float = 0.5
    absent_category: str = "unanswerable"
    k: int = 10
    seed: int = 0
    regenerated_rate: float = 0.04
    injected_regenerated_rate: float = 0.25
    thumbs_down_rate: float = 0.06
    pii_requests: int = 3
    sample_rate: float = 0.2
    sample_by: str = "tenant"
    alpha: float = 0.05
    permutations: int = 500
    embedder: str = "minilm"
    slo_ms: float = 250.0
    hit_floor: float = 0.5
    #: name -> the overrides that make the candidate out of the served config
    candidates: Mapping[str, Sequence[str]] = field(default_factory=dict)
    ready_timeout_s: float = 900.0
    concurrency: int = 4
    #: production answers this many more questions (``/v1/answer``, one at a time, after the
    #: windows): the judged replay's sample; 0 = no answers, no judge metrics
    answers: int = 4
    #: the overrides that make the served config a generated one (generator, its context and
    #: sampling, and ``config=generated``: the served config picked by its kind)
    answer_with: Sequence[str] = ()
    #: the candidates generate too (with ``answer_with``) for the judged replay
    replay_generate: bool = True
    judge_generator: str = "transformers_cpu"
    judges: Sequence[str] = ("faithfulness", "answer_relevancy", "context_relevance")
    judge_max_tokens: int = 96
    judge_max_retries: int = 1
    context_k: int = 3
    passage_chars: int = 600
    #: the golden set's per-query metric re-weighted to each window's slice (route) mix
    quality_metric: str = "ndcg@10"

    def check(self) -> TrafficSettings:
        def bad(key: str, msg: str) -> ConfigError:
            return ConfigError(f"{KEY}.{key}", msg)

        if self.per_window < 20:
            raise bad("per_window", f"must be >= 20 (the drift tests' minimum window), got "
                                    f"{self.per_window}")
        if not self.rate_rps > 0:
            raise bad("rate_rps", f"must be > 0, got {self.rate_rps}")
        if not 0.0 < self.injected_share <= 1.0:
            raise bad("injected_share", f"must be in (0, 1], got {self.injected_share}")
        for name in ("regenerated_rate", "injected_regenerated_rate", "thumbs_down_rate",
                     "sample_rate", "alpha"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise bad(name, f"must be a probability in [0, 1], got {v}")
        if self.sample_by not in ("tenant", "route"):
            raise bad("sample_by", f"must be tenant or route, got {self.sample_by!r}")
        if not self.candidates:
            raise bad("candidates", "name at least one candidate config (name: [overrides])")
        for name, over in self.candidates.items():
            if not isinstance(over, Sequence) or isinstance(over, str) or not all(
                    isinstance(o, str) and "=" in o for o in over):
                raise bad(f"candidates.{name}", "must be a list of key=value overrides")
        if not 0 <= self.pii_requests <= self.per_window:
            raise bad("pii_requests", f"must be in [0, per_window], got {self.pii_requests}")
        if self.k < 1 or self.concurrency < 1:
            raise bad("k" if self.k < 1 else "concurrency", "must be >= 1")
        if self.answers < 0:
            raise bad("answers", f"must be >= 0, got {self.answers}")
        if self.answers and (not self.answer_with or not all(
                isinstance(o, str) and "=" in o for o in self.answer_with)):
            raise bad("answer_with", "production answers (answers > 0) with these key=value "
                                     "overrides: name the generator and the generated config")
        from bench.traces.judged import JUDGES

        bad_judges = [j for j in self.judges if j not in JUDGES]
        if bad_judges:
            raise bad("judges", f"{bad_judges[0]!r}: the judged replay runs {', '.join(JUDGES)}")
        if self.context_k < 1 or self.passage_chars < 1:
            raise bad("context_k" if self.context_k < 1 else "passage_chars", "must be >= 1")
        return self


# -- windows ---------------------------------------------------------------------------------
def build_windows(dataset: Dataset, s: TrafficSettings) -> dict[str, list[Query]]:
    """Three disjoint windows of distinct question texts (see the module docstring)."""
    seen: set[str] = set()
    normal: list[Query] = []
    absent: list[Query] = []
    for q in dataset.queries:
        if q.text in seen:  # one question per text: records map back to their query
            continue
        seen.add(q.text)
        (absent if q.category == s.absent_category else normal).append(q)
    n = s.per_window
    n_inj = round(n * s.injected_share)
    if len(absent) < n_inj:
        raise ConfigError(f"{KEY}.injected_share",
                          f"the injected window needs {n_inj} questions of category "
                          f"{s.absent_category!r}; {dataset.name} has {len(absent)}")
    if len(normal) < 3 * n - n_inj + s.answers:
        raise ConfigError(f"{KEY}.per_window",
                          f"three windows of {n} and {s.answers} answered questions need "
                          f"{3 * n - n_inj + s.answers} questions outside "
                          f"{s.absent_category!r}; {dataset.name} has {len(normal)}")
    rng = np.random.default_rng(s.seed)
    order = rng.permutation(len(normal))
    inj = [normal[i] for i in order[2 * n: 3 * n - n_inj]] + [
        absent[i] for i in rng.choice(len(absent), n_inj, replace=False)]
    out = {"reference": [normal[i] for i in order[:n]],
           "clean": [normal[i] for i in order[n: 2 * n]],
           "injected": [inj[i] for i in rng.permutation(len(inj))]}
    if s.answers:  # after the windows' draws: the windows do not depend on it
        out[ANSWERED] = [normal[i] for i in order[3 * n - n_inj: 3 * n - n_inj + s.answers]]
    return out


# -- sending ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sent:
    """One request of the traffic: which window and question, its intended send time (s from
    the window's start), how late it left and its latency from the intended send."""

    window: str
    query_id: str
    text: str
    intended_s: float
    late_ms: float
    latency_ms: float
    status: str  # ok | status_NNN | http_error: ...


def send_window(url: str, window: str, queries: Sequence[Query], s: TrafficSettings,
                seed: int) -> list[Sent]:
    """The window's questions on a Poisson schedule (open loop: ``concurrency`` senders, so
    a slow answer does not delay the next send), each with its trace attributes."""
    import httpx

    from bench.capacity.schedule import poisson_arrivals

    sched = poisson_arrivals(rate_rps=s.rate_rps, n=len(queries), n_queries=len(queries),
                             seed=seed)
    rng = np.random.default_rng(seed)
    regen_p = s.injected_regenerated_rate if window == "injected" else s.regenerated_rate
    bodies = []
    for i, qi in enumerate(sched.query):
        q = queries[int(qi)]
        text = q.text + (PII_TAIL if window == "reference" and i < s.pii_requests else "")
        bodies.append((q, text, {
            "query": text, "k": s.k,
            "trace_attributes": {
                "user.id": f"user{int(rng.integers(0, 40))}",
                "bench.tenant": "acme" if i % 3 else "globex",
                "bench.route": q.category,
                "bench.feedback.thumbs": -1 if rng.random() < s.thumbs_down_rate else 1,
                "bench.feedback.regenerated": bool(rng.random() < regen_p)}}))

    def one(i: int, t0: float, client: httpx.Client) -> Sent:
        q, text, body = bodies[i]
        late = (time.perf_counter() - t0 - sched.send_s[i]) * 1e3
        try:
            r = client.post("/v1/retrieve", json=body)
            status = "ok" if r.status_code == 200 else f"status_{r.status_code}"
        except httpx.HTTPError as exc:
            status = f"http_error: {type(exc).__name__}"
        lat = (time.perf_counter() - t0 - sched.send_s[i]) * 1e3
        return Sent(window, q.query_id, text, float(sched.send_s[i]), late, lat, status)

    with httpx.Client(base_url=url, timeout=120) as client, \
            ThreadPoolExecutor(s.concurrency) as pool:
        t0 = time.perf_counter()
        futures = []
        for i in range(len(bodies)):
            wait = sched.send_s[i] - (time.perf_counter() - t0)
            if wait > 0:
                time.sleep(wait)
            futures.append(pool.submit(one, i, t0, client))
        return [f.result() for f in futures]


def send_answered(url: str, queries: Sequence[Query], s: TrafficSettings) -> list[Sent]:
    """Production answers these questions (``/v1/answer``, not streamed), one at a time: a
    135M model on two cores answers in seconds, so they are not part of the timed windows."""
    import httpx

    out = []
    with httpx.Client(base_url=url, timeout=600) as client:
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            body = {"query": q.text, "k": s.k, "stream": False, "trace_attributes": {
                "user.id": f"user{i % 40}", "bench.tenant": "acme" if i % 3 else "globex",
                "bench.route": q.category, "bench.feedback.thumbs": 1,
                "bench.feedback.regenerated": False}}
            try:
                r = client.post("/v1/answer", json=body)
                status = "ok" if r.status_code == 200 else f"status_{r.status_code}"
                if status == "ok" and r.json()["generation"]["status"] != "ok":
                    status = f"generation_{r.json()['generation']['status']}"
            except httpx.HTTPError as exc:
                status = f"http_error: {type(exc).__name__}"
            out.append(Sent(ANSWERED, q.query_id, q.text, 0.0, 0.0,
                            (time.perf_counter() - t0) * 1e3, status))
    return out


# -- the loop --------------------------------------------------------------------------------
class _Steps:
    """Runs the loop's steps in order; after a failure the rest are recorded as not run."""

    def __init__(self, result: LoopResult, out: Path) -> None:
        self.result = result
        self.out = out

    def __call__(self, name: str, fn: Callable[[], str]) -> bool:
        step = Step(name)
        self.result.steps.append(step)
        if self.result.failed is not None:
            step.detail = f"after the failed step {self.result.failed.name}"
            return False
        log.info("traffic: %s", name)
        t = time.perf_counter()
        try:
            step.detail = fn()
            step.status = "ok"
        except BenchError as exc:
            step.status, step.detail = "failed", exc.one_line()
        except Exception as exc:  # the report says it; the traceback goes to the log file
            step.status, step.detail = "failed", f"{type(exc).__name__}: {exc}"
            with (self.out / "traffic.log").open("a") as fh:
                fh.write(f"step {name}:\n{traceback.format_exc()}\n")
        step.seconds = time.perf_counter() - t
        log.info("traffic: %s %s (%.1f s)%s", name, step.status, step.seconds,
                 f": {step.detail}" if step.status == "failed" else "")
        return step.status == "ok"


def _iso(t_ns: int) -> str:
    return datetime.fromtimestamp(t_ns / 1e9, tz=UTC).isoformat().replace("+00:00", "Z")


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def run_loop(s: TrafficSettings, *, dataset: Dataset, serve_overrides: Sequence[str],
             out: Path, cache_dir: str | Path | None = None,
             golden: tuple[Sequence[float], Sequence[str]] | None = None) -> LoopResult:
    """The loop (module docstring) into ``out``; never raises for a failed step.
    ``cache_dir``: where the judge model's weights are cached; ``golden``: the run's per-query
    ``quality_metric`` and category of every golden query (the slice re-weighting's input)."""
    from bench.serve.launch import ServedProcess

    s.check()
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    res = LoopResult(settings={**asdict(s), "candidates": {k: list(v) for k, v in
                                                            s.candidates.items()}})
    step = _Steps(res, out)
    windows = build_windows(dataset, s)
    res.sizes = {**{w: len(q) for w, q in windows.items()},
                 "injected_absent": sum(q.category == s.absent_category
                                        for q in windows["injected"]),
                 "corpus_documents": len(dataset.documents)}
    spans = out / "spans.jsonl"
    spans.unlink(missing_ok=True)
    answer_with = list(s.answer_with) if s.answers else []
    sent: list[Sent] = []
    st: dict[str, Any] = {}  # values the later steps read

    with ExitStack() as stack:
        def serve() -> str:
            import httpx

            prod = stack.enter_context(ServedProcess(
                [*serve_overrides, *answer_with, f"serve.traces={spans}"],
                ready_timeout_s=s.ready_timeout_s,
                log_path=out / "serve-production.log"))
            st["prod"] = prod
            res.served["production"] = {"start_s": prod.start_s,
                                        **httpx.get(f"{prod.base_url}/v1/config").json()}
            for j, name in enumerate(WINDOWS):
                sent.extend(send_window(prod.base_url, name, windows[name], s, s.seed + j))
            failed = Counter(x.status for x in sent if x.status != "ok")
            ok = [x for x in sent if x.status == "ok"]
            lat = np.array([x.latency_ms for x in ok])
            res.traffic = {
                "requests": len(sent), "failed": dict(failed), "rate_rps": s.rate_rps,
                "p50_ms": float(np.percentile(lat, 50)) if ok else None,
                "p95_ms": float(np.percentile(lat, 95)) if ok else None,
                "max_late_ms": float(max(x.late_ms for x in sent))}
            if s.answers:
                answered = send_answered(prod.base_url, windows[ANSWERED], s)
                sent.extend(answered)
                a_fail = Counter(x.status for x in answered if x.status != "ok")
                failed.update(a_fail)
                res.traffic["answered"] = {
                    "requests": len(answered), "failed": dict(a_fail),
                    "p50_ms": float(np.percentile([x.latency_ms for x in answered], 50))}
            _write_jsonl(out / "sent.jsonl", [asdict(x) for x in sent])
            if failed:
                raise RuntimeError(f"{sum(failed.values())} of {len(sent)} requests failed: "
                                   f"{dict(failed)}")
            return f"{len(sent)} requests"

        def imported() -> str:
            recs, rep = _await_spans(spans, dataset, len(sent))
            by_key = {_key(x.text): x for x in sent}
            st["records"] = recs
            st["query_of"] = {r.trace_id: by_key[_key(r.query)].query_id for r in recs
                              if _key(r.query) in by_key}
            st["window_of"] = {r.trace_id: by_key[_key(r.query)].window for r in recs
                               if _key(r.query) in by_key}
            res.imported = rep.to_json()
            res.imported["unmatched_records"] = len(recs) - len(st["window_of"])
            (out / "import.json").write_text(json.dumps(res.imported, indent=2))
            from bench.traces.importer import dumps

            (out / "records.jsonl").write_text("".join(dumps(r) + "\n" for r in recs))
            for w in (*WINDOWS, *((ANSWERED,) if s.answers else ())):
                (out / w).mkdir(exist_ok=True)
                (out / w / "records.jsonl").write_text("".join(
                    dumps(r) + "\n" for r in _window(st, w)))
            if rep.records != len(sent):
                raise RuntimeError(f"{rep.records} records for {len(sent)} requests")
            return f"{rep.records} records"

        def evaluations() -> str:
            from bench.traces.evaluations import Evaluation, read_events, write_events

            qrels = {q.query_id: {d for d, g in q.qrels if g > 0} for q in dataset.queries}
            evals = []
            for r in st["records"]:
                if st["window_of"].get(r.trace_id) == ANSWERED:
                    continue  # the windows' traffic only (the answered ones are judged)
                rel = qrels.get(st["query_of"].get(r.trace_id, ""), set())
                if not rel:
                    continue  # no relevant document (unanswerable): nothing to hit
                hit = float(any(d.doc_id in rel for d in r.documents[: s.k]))
                evals.append(Evaluation(r.trace_id, r.span_id, f"hit@{s.k}", hit,
                                        "hit" if hit else "miss",
                                        f"{st['query_of'][r.trace_id]}: relevant "
                                        f"{', '.join(sorted(rel)[:3])}"))
            path = out / "evals.otlp.jsonl"
            path.unlink(missing_ok=True)
            write_events(evals, path)
            back = read_events(path)
            spans_of = {(r.trace_id, r.span_id) for r in st["records"]}
            written = {(e.trace_id, e.span_id, e.value) for e in evals}
            win = st["window_of"]
            res.evaluations = {
                "written": len(evals), "read_back": len(back),
                "identical": sum((e.trace_id, e.span_id, e.value) in written for e in back),
                "on_imported_spans": sum((e.trace_id, e.span_id) in spans_of for e in back),
                "mean_by_window": {w: _mean([e.value for e in back if win.get(e.trace_id) == w])
                                   for w in WINDOWS}}
            return f"{len(evals)} written, {len(back)} read back"

        def sample() -> str:
            from bench.traces.sample import SamplingPlan, draw, sampled_to_json

            plan = SamplingPlan(seed=s.seed, uniform_rate=s.sample_rate, by=s.sample_by)
            traffic = [r for r in st["records"] if st["window_of"].get(r.trace_id) != ANSWERED]
            drawn = draw(traffic, plan)
            st["sample"] = drawn
            _write_jsonl(out / "sample.jsonl", [sampled_to_json(x) for x in drawn])
            designs = Counter(d for x in drawn for d in x.designs)
            res.sample = {"records": len(traffic), "sampled": len(drawn),
                          "uniform": sum(x.in_uniform for x in drawn),
                          "by_design": dict(sorted(designs.items())),
                          "by_window": dict(Counter(st["window_of"].get(x.record.trace_id, "?")
                                                    for x in drawn))}
            return f"{len(drawn)} of {len(traffic)}"

        def drift() -> str:
            from bench.traces.drift import classifier_test, embed, mmd_test

            texts = {w: [r.query for r in _window(st, w)] for w in WINDOWS}
            emb = embed([t for w in WINDOWS for t in texts[w]], s.embedder)
            parts = np.split(emb, np.cumsum([len(texts[w]) for w in WINDOWS])[:-1])
            e = dict(zip(WINDOWS, parts, strict=True))
            for w in ("clean", "injected"):
                tests = [mmd_test(e["reference"], e[w], n_perm=s.permutations, seed=s.seed),
                         classifier_test(e["reference"], e[w], seed=s.seed)]
                res.drift[w] = {"alarm": any(t.drifted(s.alpha / 2) for t in tests),
                                "tests": [asdict(t) for t in tests]}
            (out / "drift.json").write_text(json.dumps(res.drift, indent=2))
            return ", ".join(f"{w} {'ALARM' if d['alarm'] else 'no alarm'}"
                             for w, d in res.drift.items())

        def quality() -> str:
            from bench.traces.quality import reweight

            if golden is None:
                raise RuntimeError("no golden per-query values of the run (per_query.parquet)")
            values, cats = golden
            for w in WINDOWS:
                r = reweight(values, cats, [x.route for x in _window(st, w)], window=w,
                             metric=s.quality_metric, seed=s.seed)
                res.quality.append(asdict(r))
            (out / "quality.json").write_text(json.dumps(res.quality, indent=2))
            return ", ".join(f"{q['window']} {q['delta']:+.3f}" for q in res.quality)

        def guardrails() -> str:
            from bench.monitor.rules import check, read_rules

            # the injected change went live with the injected window's first request (the
            # server's clock); 1 ms later, so the marker's microsecond ISO time is inside it
            deploy_ns = min(r.timestamp_ns for r in _window(st, "injected")) + 1_000_000
            for w in ("clean", "injected"):
                rules = out / w / "rules.yaml"
                rules.write_text(
                    "deploys:\n"
                    f"  - {{at: \"{_iso(deploy_ns)}\", version: injected-change}}\n"
                    "rules:\n"
                    f"  faithfulness: {{floor: {s.hit_floor}, sample: 50, "
                    f"events: ../evals.otlp.jsonl, metric: \"hit@{s.k}\"}}\n"
                    f"  p95_latency_ms: {{slo: {s.slo_ms}}}\n"
                    f"  regeneration_rate: {{baseline: {s.regenerated_rate}, z: 3}}\n"
                    "  cost_per_query_usd: {budget: 0.001, price_per_1k_input_tokens: 0.0005,"
                    " price_per_1k_output_tokens: 0.0015}\n")
                outcomes = check(read_rules(rules), _window(st, w))
                res.guardrails[w] = [o.to_json() for o in outcomes]
                (out / w / "monitor.json").write_text(json.dumps(res.guardrails[w], indent=2))
            return ", ".join(f"{w} {sum(o['status'] == 'alert' for o in g)} alerts"
                             for w, g in res.guardrails.items())

        def replay() -> str:
            from bench.traces.replay import replay as send
            from bench.traces.replay import summarize

            recs = [x.record for x in st["sample"] if not x.record.pii_scrubbed]
            if not recs:
                raise RuntimeError("the sample has no record to replay")
            rows = send(recs, "production (control)", st["prod"].base_url)
            generate = bool(s.answers and s.replay_generate)
            asked = _window(st, ANSWERED) if generate else []
            answer_rows = []
            for name, over in s.candidates.items():
                with ServedProcess([*serve_overrides, *(answer_with if generate else ()), *over],
                                   ready_timeout_s=s.ready_timeout_s,
                                   log_path=out / f"serve-{name}.log") as cand:
                    import httpx

                    res.served[name] = {"start_s": cand.start_s, "overrides": list(over),
                                        **httpx.get(f"{cand.base_url}/v1/config").json()}
                    rows += send(recs, name, cand.base_url)
                    answer_rows += send(asked, name, cand.base_url, generate=True)
            _write_jsonl(out / "replay.jsonl", [asdict(r) for r in rows])
            _write_jsonl(out / "replay-answers.jsonl", [asdict(r) for r in answer_rows])
            st["answer_rows"] = answer_rows
            for sm in summarize(rows, seed=s.seed):
                res.replay.append({"candidate": sm.candidate, "n": sm.n, "failed": sm.failed,
                                   **{k: None if v is None else asdict(v) for k, v in (
                                       ("overlap", sm.overlap), ("rbo", sm.rbo),
                                       ("p50_ms", sm.p50_ms), ("p95_ms", sm.p95_ms))}})
            st["replay_rows"] = rows
            return (f"{len(recs)} records x {1 + len(s.candidates)} servers"
                    + (f"; {len(asked)} answered x {len(s.candidates)} candidates"
                       if generate else ""))

        def judge() -> str:
            from bench.judge.base import JudgeItem
            from bench.traces.judged import (
                PRODUCTION,
                build_judges,
                corpus_texts,
                judge_generator,
                judge_sides,
                paired,
                side_context,
            )

            texts = corpus_texts(dataset.documents)
            prod = _window(st, ANSWERED)
            query = {r.trace_id: r.query for r in prod}

            def item(tid: str, answer: str | None, ids: Sequence[str]) -> JudgeItem:
                return JudgeItem(tid, query[tid], answer, side_context(
                    tid, query[tid], ids, texts, k=s.context_k, passage_chars=s.passage_chars))

            items: dict[str, list[JudgeItem]] = {PRODUCTION: [
                item(r.trace_id, r.answer, [d.doc_id for d in r.documents]) for r in prod]}
            for row in st["answer_rows"]:
                items.setdefault(row.candidate, []).append(
                    item(row.trace_id, row.answer if row.status == "ok" else None, row.doc_ids))
            gen = judge_generator(s.judge_generator, cache_dir=cache_dir or out / "cache")
            try:
                judges = build_judges(gen, s.judges, max_retries=s.judge_max_retries,
                                      max_tokens=s.judge_max_tokens, seed=s.seed)
                jrows = judge_sides(items, judges)
            finally:
                gen.close()
            _write_jsonl(out / "judged.jsonl", [asdict(r) for r in jrows])
            pairs = paired(jrows, seed=s.seed)
            res.judged = {"judge_model": getattr(gen, "model_path", s.judge_generator),
                          "answers": {k: sum(i.answer is not None for i in v)
                                      for k, v in items.items()},
                          "pairs": [asdict(p) for p in pairs],
                          # verdicts repeated from an identical item judged before (one call)
                          "reused": {k: sum(1 for r in jrows if r.side == k and r.shared_with)
                                     for k in items}}
            return f"{sum(len(v) for v in items.values())} answers x {len(judges)} judges"

        def review() -> str:
            from bench.data.golden import query_to_json
            from bench.traces.quality import labelled
            from bench.traces.review import merge_rows, queue_rows
            from bench.traces.sample import sampled_to_json

            qmap = {q.query_id: q for q in dataset.queries}
            rows = queue_rows([sampled_to_json(x) for x in st["sample"]])
            today = datetime.now(UTC).date().isoformat()
            for row in rows:  # the reviewer is simulated: the golden judgements of the question
                q = qmap[st["query_of"][row["trace_id"]]]
                rel = [] if q.must_abstain else [d for d, g in q.qrels if g > 0]
                row.update(relevant_document_ids=rel, required_claims=list(q.required_claims),
                           must_abstain=q.must_abstain or not rel, category=q.category,
                           reviewer="golden-judgements", reviewed_at=today, status="done")
            _write_jsonl(out / "review-queue.jsonl", rows)
            merged = merge_rows(out / "review-queue.jsonl", documents=dataset.documents,
                                existing=())
            _write_jsonl(out / "reviewed.jsonl", [query_to_json(q) for q in merged.merged])
            lists: dict[str, dict[str, list[str]]] = {"production": {
                x.record.trace_id: [d.doc_id for d in x.record.documents] for x in st["sample"]}}
            for r in st["replay_rows"]:
                if r.status == "ok":
                    lists.setdefault(r.candidate, {})[r.trace_id] = list(r.doc_ids)
            pairs = labelled(merged.merged, lists, seed=s.seed)
            res.review = {"queued": len(rows), "merged": merged.added,
                          "left_out_near_duplicates": len(merged.dropped_near_duplicates),
                          "must_abstain": sum(q.must_abstain for q in merged.merged)}
            res.labelled = [{"candidate": p.candidate, "metric": p.metric, "n": p.n,
                             "comparison": None if p.comparison is None
                             else asdict(p.comparison)} for p in pairs]
            return f"{merged.added} reviewed rows merged, {len(pairs)} paired metrics"

        for name, fn in (("serve", serve), ("import", imported), ("evaluations", evaluations),
                         ("sample", sample), ("drift", drift), ("quality", quality),
                         ("guardrails", guardrails), ("replay", replay),
                         *((("judge", judge),) if s.answers and s.replay_generate else ()),
                         ("review", review)):
            step(name, fn)
    res.checks = _checks(res, st, s)
    res.loop_s = time.perf_counter() - t_start
    return res


def _key(text: str) -> str:
    """What a question reads as after the import (PII replaced)."""
    from bench.traces.pii import scrub

    return scrub(text)[0]


def _window(st: Mapping[str, Any], w: str) -> list[Any]:
    return [r for r in st["records"] if st["window_of"].get(r.trace_id) == w]


def _mean(values: Sequence[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def _await_spans(spans: Path, dataset: Dataset, n: int) -> tuple[list[Any], Any]:
    """The records of ``n`` requests: the server's batch processor exports every 200 ms, so
    the last spans may land a moment after the last answer."""
    from bench.errors import InputError
    from bench.traces.importer import import_traces

    deadline = time.monotonic() + 30
    recs: list[Any] = []
    rep = None
    while True:
        if spans.exists():
            try:
                recs, rep = import_traces(spans, corpus=dataset.documents)
            except InputError:
                if time.monotonic() > deadline:
                    raise
                recs, rep = [], None
            if rep is not None and (rep.records >= n or time.monotonic() > deadline):
                return recs, rep
        elif time.monotonic() > deadline:
            raise RuntimeError(f"the server wrote no spans to {spans}")
        time.sleep(0.2)


def _checks(res: LoopResult, st: Mapping[str, Any], s: TrafficSettings
            ) -> list[dict[str, Any]]:
    """What the loop must show when every part works; only for the steps that ran."""
    out: list[dict[str, Any]] = []

    def c(what: str, ok: bool, got: str) -> None:
        out.append({"check": what, "ok": bool(ok), "got": got})

    done = {x.name for x in res.steps if x.status == "ok"}
    if "import" in done:
        i = res.imported
        sent = res.traffic["requests"] + res.traffic.get("answered", {}).get("requests", 0)
        c("every request imported, every document resolved, one corpus",
          i["records"] == sent and i["docs_unknown"] == 0
          and i["fingerprint_mismatch"] == 0 and i["unmatched_records"] == 0,
          f"{i['records']} records of {sent} requests, "
          f"{i['docs_unknown']} unknown documents, {i['fingerprint_mismatch']} fingerprint "
          f"mismatches, {i['unmatched_records']} unmatched")
        c("the PII requests scrubbed", i["records_with_pii"] == s.pii_requests,
          f"{i['records_with_pii']} records scrubbed of {s.pii_requests} sent with PII")
    if "evaluations" in done:
        e = res.evaluations
        c("evaluation events read back as written, on imported spans",
          e["written"] == e["read_back"] == e["identical"] == e["on_imported_spans"] > 0,
          f"{e['written']} written, {e['read_back']} read back, {e['identical']} identical, "
          f"{e['on_imported_spans']} on imported spans")
    if "drift" in done:
        c("drift: the injected window alarms", res.drift["injected"]["alarm"],
          _drift_line(res.drift["injected"]))
        c("drift: the clean window does not", not res.drift["clean"]["alarm"],
          _drift_line(res.drift["clean"]))
    if "guardrails" in done:
        g = {w: {o["rule"]: o for o in res.guardrails[w]} for w in res.guardrails}
        c("guardrails: no alert on the clean window",
          not any(o["status"] == "alert" for o in g["clean"].values()),
          ", ".join(f"{k} {o['status']}" for k, o in g["clean"].items()))
        regen = g["injected"]["regeneration_rate"]
        c("guardrails: the injected window's regeneration alert, the deploy in the window",
          regen["status"] == "alert" and bool(regen["deploys"]),
          f"regeneration_rate {regen['status']} ({regen['value'] or 0:.3f}), deploys "
          f"{regen['deploys'] or 'none'}")
    if "replay" in done:
        ctl = next(r for r in res.replay if r["candidate"] == "production (control)")
        ok_rows = [r for r in st["replay_rows"] if r.candidate == "production (control)"]
        c("replay: the production server agrees with its own traces",
          not ctl["failed"] and all(r.overlap == 1.0 and abs(r.rbo - 1.0) < 1e-9
                                    for r in ok_rows),
          f"overlap {ctl['overlap']['mean']:.3f}, RBO {ctl['rbo']['mean']:.3f} over "
          f"{ctl['n']} records, {sum(ctl['failed'].values())} failed")
        for r in res.replay:
            if r["candidate"] != "production (control)":
                c(f"replay: candidate {r['candidate']} answered every record",
                  not r["failed"] and r["n"] > 0, f"{r['n']} ok, failed {r['failed'] or 0}")
    if "judge" in done:
        a = res.judged["answers"]
        c("judged replay: production and every candidate answered every answered question",
          all(v == s.answers for v in a.values()) and len(a) == 1 + len(s.candidates),
          ", ".join(f"{k} {v} of {s.answers}" for k, v in a.items()))
    if "review" in done:
        rv = res.review
        c("review: every sampled record reviewed and merged", rv["merged"] == rv["queued"] > 0,
          f"{rv['merged']} merged of {rv['queued']} queued")
        same = [x for x in res.labelled if x["candidate"] == "production (control)"]
        c("labelled: the control replay scores as production on every reviewed row",
          bool(same) and all(x["comparison"] is not None and x["comparison"]["delta"] == 0.0
                             for x in same),
          ", ".join(f"{x['metric']} delta {x['comparison']['delta']:+.3f} over {x['n']}"
                    if x["comparison"] else f"{x['metric']} no pairs" for x in same))
    return out


def _golden_values(run_dir: Path, metric: str) -> tuple[list[float], list[str]] | None:
    """The run's per-query ``metric`` and category of its (first) config, from its
    per_query.parquet (None: the run wrote none, or not that metric)."""
    import pyarrow.parquet as pq

    path = run_dir / "per_query.parquet"
    if not path.is_file():
        return None
    t = pq.read_table(path, columns=["config_id", "category", "metric", "value"]).to_pylist()
    rows = [r for r in t if r["metric"] == metric]
    if not rows:
        return None
    first = rows[0]["config_id"]
    mine = [r for r in rows if r["config_id"] == first]
    return ([float("nan") if r["value"] is None else float(r["value"]) for r in mine],
            [str(r["category"]) for r in mine])


def _drift_line(d: Mapping[str, Any]) -> str:
    return ", ".join(f"{t['test']} p = {t['p_value']:.4f}" for t in d["tests"])


# -- Hydra -----------------------------------------------------------------------------------
def serve_overrides(task_overrides: Sequence[str], cache_dir: str) -> list[str]:
    """The run's config for ``python -m bench.serve``: its overrides without the experiment
    (which would start this loop again inside the server) and with the resolved cache."""
    keep = [o for o in task_overrides
            if not o.lstrip("+~").startswith(("experiment=", "hydra.", "cache_dir="))]
    return [*keep, f"cache_dir={cache_dir}"]


class TrafficCallback(Callback):
    """Checks the settings and the windows before the run (a bad value: one line, exit 2),
    runs the loop once the run's job has finished (``on_run_end``), writes ``traffic.md``
    and exits 1 (a step failed) or 3 (an expectation missed)."""

    def __init__(self, **settings: Any) -> None:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        plain: dict[str, Any] = {
            k: OmegaConf.to_container(v) if isinstance(v, DictConfig | ListConfig) else v
            for k, v in settings.items()}
        unknown = sorted(set(plain) - set(TrafficSettings.__dataclass_fields__))
        self._error = (f"config key {KEY}.{unknown[0]}: unknown; the loop's keys are "
                       f"{', '.join(TrafficSettings.__dataclass_fields__)}" if unknown else None)
        self.settings = TrafficSettings(**{k: v for k, v in plain.items()
                                           if k not in unknown})
        self._t0 = time.perf_counter()
        self._dataset: Dataset | None = None

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.utils import instantiate

        self._t0 = time.perf_counter()
        if config.get("plan_only"):
            return
        if self._error:
            print(f"bench: error: {self._error}", file=sys.stderr)
            sys.exit(2)
        # the job sets Hydra's config later; the dataset path reads ${hydra:runtime.cwd}
        HydraConfig.instance().set_config(config)
        try:
            self._dataset = instantiate(config.dataset).load()
            build_windows(self._dataset, self.settings.check())
        except BenchError as exc:
            print(f"bench: error: {exc.one_line()}", file=sys.stderr)
            sys.exit(exc.exit_code)
        # Hydra turns a callback's exception into a warning and goes on: say it, and stop
        except Exception as exc:
            log.exception("traffic: checking the settings failed")
            print(f"bench: error: traffic: {type(exc).__name__}: {exc}", file=sys.stderr)
            sys.exit(1)

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        print("bench: error: config key hydra.mode: +experiment=traffic is one run (the loop "
              "serves one config); drop -m", file=sys.stderr)
        sys.exit(2)

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus

        job = kwargs.get("job_return")
        if config.get("plan_only") or job is None or job.status != JobStatus.COMPLETED:
            return  # a failed job raises its own error after this
        # the job's own Hydra config: the run's config here has no output_dir
        out = Path(job.hydra_cfg.hydra.runtime.output_dir)
        try:
            if self._dataset is None:
                raise RuntimeError("the dataset was not loaded before the run")
            over = serve_overrides(list(job.overrides or ()), str(config.cache_dir))
            res = run_loop(self.settings, dataset=self._dataset, serve_overrides=over,
                           out=out, cache_dir=str(config.cache_dir),
                           golden=_golden_values(out, self.settings.quality_metric))
        except Exception as exc:  # Hydra would only warn: a report that says so, and exit 1
            log.exception("traffic: the loop could not run")
            res = LoopResult(settings=asdict(self.settings),
                             steps=[Step("setup", "failed", 0.0, f"{type(exc).__name__}: {exc}")])
        res.run_s = time.perf_counter() - self._t0
        path = write_report(res, out)
        log.info("traffic: report %s", path)
        if res.failed:
            print(f"bench: error: traffic: step {res.failed.name} failed: {res.failed.detail} "
                  f"(report: {path})", file=sys.stderr)
        for c in res.missed:
            print(f"bench: traffic: expectation missed: {c['check']}: {c['got']}",
                  file=sys.stderr)
        if res.exit_code:
            sys.exit(res.exit_code)
