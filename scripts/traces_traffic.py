"""The production-traffic loop end to end against real servers (docs/traces.md, "The loop").

1. ``python -m bench.serve`` of the default config (FOLDOC, MiniLM, exact index) with
   ``serve.traces``: three windows of requests sent on the capacity module's Poisson
   arrivals: a reference window and a clean window of FOLDOC golden questions without the
   ``unanswerable`` category, and an injected window where half the questions are
   ``unanswerable`` and the regenerate rate jumps; the requests carry tenant, route and
   feedback attributes. The OpenTelemetry SDK writes the spans.
2. ``bench.traces import`` of the spans against the FOLDOC corpus; ``sample``.
3. ``drift`` reference vs clean and reference vs injected (MMD + C2ST on MiniLM embeddings).
4. ``bench.monitor`` on the clean and the injected window (a deploy marker before the
   injected window).
5. per-request hit@10 from FOLDOC's judgements written back as gen_ai.evaluation.result
   events, read back (and used by the score-floor rule).
6. shadow replay of the sampled queries through the served config and through a candidate
   (``index=hnsw``) served by a second ``bench.serve``.

    PYTHONPATH=. python scripts/traces_traffic.py --out /tmp/traffic --per-window 150
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.capacity.schedule import poisson_arrivals
from bench.data.golden import read_corpus
from bench.data.jsonl import iter_jsonl
from bench.serve.launch import ServedProcess
from bench.traces.evaluations import Evaluation, read_events, write_events
from bench.traces.importer import import_traces
from bench.traces.pii import scrub

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": f"{ROOT}:{ROOT / 'kernels'}",
                            "PATH": "/usr/bin:/bin"})
    return p.returncode, (p.stdout + p.stderr).strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=ROOT / ".data" / "foldoc")
    ap.add_argument("--per-window", type=int, default=150)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t_start = time.perf_counter()
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"
    golden = [obj for _, obj in iter_jsonl(a.data / "queries.jsonl")]
    rng = np.random.default_rng(a.seed)
    normal = [g for g in golden if g["category"] != "unanswerable"]
    absent = [g for g in golden if g["category"] == "unanswerable"]
    order = rng.permutation(len(normal))
    n = a.per_window
    windows: dict[str, list[dict[str, Any]]] = {
        "reference": [normal[i] for i in order[:n]],
        "clean": [normal[i] for i in order[n:2 * n]],
        "injected": ([normal[i] for i in order[2 * n:2 * n + n // 2]]
                     + [absent[i] for i in rng.choice(len(absent), n - n // 2,
                                                      replace=False)])}
    spans = out / "spans.jsonl"
    spans.unlink(missing_ok=True)
    qrels = {g["query_id"]: {(r["id"] if isinstance(r, dict) else r)
                             for r in g.get("relevant_document_ids", [])} for g in golden}
    query_of: dict[str, str] = {}
    window_of: dict[str, str] = {}
    t_serve = time.perf_counter()
    with ServedProcess([f"cache_dir={cache}", f"serve.traces={spans}"],
                       ready_timeout_s=1800, log_path=out / "serve.log") as srv, \
            httpx.Client(base_url=srv.base_url, timeout=120) as c:
        ready_s = time.perf_counter() - t_serve
        deploy_at = None
        for name, qs in windows.items():
            qs = [qs[i] for i in rng.permutation(len(qs))]
            sched = poisson_arrivals(rate_rps=a.rate, n=len(qs), n_queries=len(qs),
                                     seed=a.seed)
            if name == "injected":
                deploy_at = time.time()
            t0 = time.perf_counter()
            for i, g in enumerate(qs):
                wait = sched.send_s[i] - (time.perf_counter() - t0)
                if wait > 0:
                    time.sleep(wait)
                regen_p = 0.25 if name == "injected" else 0.04
                rid = f"{name}-{i}"
                r = c.post("/v1/retrieve", headers={"X-Request-Id": rid}, json={
                    "query": g["query"], "k": 10,
                    "trace_attributes": {
                        "user.id": f"user{int(rng.integers(0, 40))}",
                        "bench.tenant": "acme" if i % 3 else "globex",
                        "bench.route": g["category"],
                        "bench.feedback.thumbs": int(rng.choice([-1, 1], p=[0.06, 0.94])),
                        "bench.feedback.regenerated": bool(rng.random() < regen_p),
                        "bench.window": name}})
                r.raise_for_status()
                query_of[scrub(g["query"])[0]] = g["query_id"]
                window_of[scrub(g["query"])[0]] = name
        serve_s = time.perf_counter() - t_serve
        time.sleep(1.0)  # the batch processor flushes every 200 ms
        corpus = read_corpus(a.data / "corpus.jsonl")
        t_imp = time.perf_counter()
        records, rep = import_traces(spans, corpus=corpus)
        import_s = time.perf_counter() - t_imp
        by_window: dict[str, list[Any]] = {k: [] for k in windows}
        for r in records:  # the windows ask disjoint questions
            by_window[window_of[r.query]].append(r)
        report: dict[str, Any] = {"ready_s": ready_s, "serve_s": serve_s,
                                  "import": rep.to_json(), "import_s": import_s}
        from bench.traces.record import record_to_json

        for w, recs in by_window.items():
            (out / w).mkdir(exist_ok=True)
            (out / w / "records.jsonl").write_text(
                "".join(json.dumps(record_to_json(r)) + "\n" for r in recs))
        # 5. scores back as evaluation events (hit@10 from FOLDOC's judgements)
        evals = []
        for r in records:
            qid = query_of.get(r.query)
            rel = qrels.get(qid or "", set())
            if not rel:
                continue  # unanswerable: nothing to hit
            hit = float(any(d.doc_id in rel for d in r.documents[:10]))
            evals.append(Evaluation(r.trace_id, r.span_id, "hit@10", hit,
                                    "hit" if hit else "miss",
                                    f"{qid}: relevant {sorted(rel)[:3]}"))
        write_events(evals, out / "evals.jsonl")
        back = read_events(out / "evals.jsonl")
        report["evaluations"] = {"written": len(evals), "read_back": len(back),
                                 "on_imported_spans": sum(
                                     1 for e in back if (e.trace_id, e.span_id)
                                     in {(r.trace_id, r.span_id) for r in records}),
                                 "mean_hit@10": float(np.mean([e.value for e in back]))}
        # 2. sample the clean window
        code, text = _cli("-m", "bench.traces", "sample", str(out / "clean" / "records.jsonl"),
                          "--out", str(out / "clean" / "sample.jsonl"), "--rate", "0.1",
                          "--by", "tenant")
        report["sample"] = text
        # 3. drift
        for w in ("clean", "injected"):
            code, text = _cli("-m", "bench.traces", "drift",
                              str(out / "reference" / "records.jsonl"),
                              str(out / w / "records.jsonl"), "--out",
                              str(out / w / "drift.json"))
            report[f"drift_{w}"] = {"exit": code, "lines": text.splitlines()[-2:]}
        # 4. guardrails
        for w in ("clean", "injected"):
            (out / w / "rules.yaml").write_text(
                "deploys:\n"
                f"  - {{at: \"{_iso(deploy_at)}\", version: candidate-v2}}\n"
                "rules:\n"
                f"  faithfulness: {{floor: 0.5, sample: 50, events: ../evals.jsonl, "
                "metric: hit@10}\n"
                "  p95_latency_ms: {slo: 250}\n"
                "  regeneration_rate: {baseline: 0.04, z: 3}\n"
                "  cost_per_query_usd: {budget: 0.001, price_per_1k_input_tokens: 0.0005,"
                " price_per_1k_output_tokens: 0.0015}\n")
            code, text = _cli("-m", "bench.monitor", str(out / w / "rules.yaml"),
                              str(out / w / "records.jsonl"), "--out",
                              str(out / w / "monitor.json"))
            report[f"monitor_{w}"] = {"exit": code, "text": text}
        # 6. shadow replay of the sample: the served config and an HNSW candidate
        sample = [json.loads(x)["record"] for x in
                  (out / "clean" / "sample.jsonl").read_text().splitlines()]
        (out / "clean" / "sample_records.jsonl").write_text(
            "".join(json.dumps(s) + "\n" for s in sample))
        with ServedProcess([f"cache_dir={cache}", "index=hnsw"], ready_timeout_s=1800,
                           log_path=out / "serve-hnsw.log") as cand:
            code, text = _cli("-m", "bench.traces", "replay",
                              str(out / "clean" / "sample_records.jsonl"),
                              "--candidate", f"production-config={srv.base_url}",
                              "--candidate", f"hnsw={cand.base_url}",
                              "--out", str(out / "clean" / "replay.json"))
            report["replay"] = {"exit": code, "table": text}
    report["wall_s"] = time.perf_counter() - t_start
    (out / "traffic.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, indent=2, default=str))


def _iso(t: float | None) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t or 0, tz=UTC).isoformat()


if __name__ == "__main__":
    main()
