"""``+experiment=parse_sweep``'s own report: every parser paired per query against the
oracle parser (the truth text) with the same chunker, and each lost query traced to the
parse errors of its gold documents.

Runs as a Hydra callback when the multirun ends (after the sweep report), and by hand with
``python -m bench.parsing.sweep SWEEP_DIR``. Per job it reads ``parsing.parquet`` (per file:
status, metrics, parse seconds, peak RSS) and the per-query values; for each
(parser, chunker) config it pairs the values against the oracle job's config of the same
chunker and label (``bench.metrics.pairing.paired`` + ``paired_compare``: the run's own
pairing and bootstrap CI) and writes:

- ``parse_sweep.parquet`` / the table: ingestion metrics (means over documents with a truth),
  pages/s and docs/s over the parse seconds, peak RSS, nDCG@10 and Recall@100 (and answer
  metrics where the jobs generated answers) delta vs the oracle with the 95 % CI, and the
  queries lost (nDCG@10 below the oracle's);
- ``parse_attribution.parquet`` / the worst parser's table: each lost query, its gold
  documents and the parse error each had (status and reason; else the metric that shows the
  damage: CER, reading order, tables, boilerplate kept), or none found;
- the Pareto front of nDCG@10 against pages/s.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from bench.errors import BenchError, InputError
from bench.parsing.quality import ANSWER_TABLE, CHUNK_TABLE
from bench.report.fmt import num
from bench.report.load import RunData, is_run_dir, load_run
from bench.results.scores import ConfigScores
from bench.results.write import atomic_write_bytes, write_table

log = logging.getLogger("bench")

ORACLE = "oracle"
#: the paired metrics, when the jobs have them (retrieval always; answers with a generator)
PAIRED = ("ndcg@10", "recall@100", "exact_match", "token_f1")
LOSS_METRIC = "ndcg@10"
#: answer-level metrics: "answers lost" counts the queries each fell on against the oracle
ANSWER_METRICS = ("exact_match", "token_f1", "answer_in_top5")
#: the extractive bound of ``bench.parsing.quality`` (per query, from parsing_answers.parquet)
EXTRACTIVE = "answer_in_top5"
#: chunk-quality means shown per parser (parsing_chunks.parquet columns)
CHUNK_METRICS = ("sentence_cut_rate", "tables_cut", "tables_lost", "heading_match",
                 "heading_placed", "title_match", "date_match")

SWEEP_SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("job", pa.string(), nullable=False),
    pa.field("parser", pa.string(), nullable=False),
    pa.field("chunker", pa.string(), nullable=False),
    pa.field("config", pa.string(), nullable=False),
    pa.field("files", pa.int32(), nullable=False),
    pa.field("not_ok", pa.int32(), nullable=False),
    pa.field("cer", pa.float64(), nullable=True),
    pa.field("wer", pa.float64(), nullable=True),
    pa.field("teds", pa.float64(), nullable=True),
    pa.field("order_distance", pa.float64(), nullable=True),
    pa.field("boilerplate_precision", pa.float64(), nullable=True),
    pa.field("boilerplate_recall", pa.float64(), nullable=True),
    pa.field("pages_per_s", pa.float64(), nullable=True),
    pa.field("docs_per_s", pa.float64(), nullable=True),
    pa.field("peak_rss_bytes", pa.int64(), nullable=False),
    pa.field("metric", pa.string(), nullable=False),
    pa.field("mean", pa.float64(), nullable=True),
    pa.field("delta", pa.float64(), nullable=True),
    pa.field("ci_low", pa.float64(), nullable=True),
    pa.field("ci_high", pa.float64(), nullable=True),
    pa.field("n", pa.int32(), nullable=False),
    pa.field("queries_lost", pa.int32(), nullable=False),
    pa.field("answers_lost", pa.int32(), nullable=True),
])
#: chunk quality per parser x chunker x config: one row per metric, mean over the documents
#: the parser read itself with the bootstrap 95 % CI (``bench.parsing.quality``)
CHUNK_SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("parser", pa.string(), nullable=False),
    pa.field("chunker", pa.string(), nullable=False),
    pa.field("config", pa.string(), nullable=False),
    pa.field("metric", pa.string(), nullable=False),
    pa.field("mean", pa.float64(), nullable=True),
    pa.field("ci_low", pa.float64(), nullable=True),
    pa.field("ci_high", pa.float64(), nullable=True),
    pa.field("n", pa.int32(), nullable=False),
])
ATTRIBUTION_SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("parser", pa.string(), nullable=False),
    pa.field("chunker", pa.string(), nullable=False),
    pa.field("query_id", pa.string(), nullable=False),
    pa.field("delta", pa.float64(), nullable=False),
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("layout", pa.string(), nullable=False),
    pa.field("doc_parser", pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("cause", pa.string(), nullable=False),
])

#: what counts as visible damage in a parsed document (the attribution's thresholds)
CER_DAMAGE = 0.10
ORDER_DAMAGE = 0.20
TEDS_DAMAGE = 0.80
BOILERPLATE_KEPT = 0.50


@dataclass(frozen=True)
class Job:
    name: str
    parser: str
    chunker: str
    run: RunData
    files: tuple[dict[str, Any], ...]
    qrels: dict[str, tuple[str, ...]]
    #: parsing_chunks.parquet / parsing_answers.parquet rows (empty for an older job)
    chunks: tuple[dict[str, Any], ...] = ()
    answers: tuple[dict[str, Any], ...] = ()


def _override(job_dir: Path, key: str, default: str) -> str:
    path = job_dir / ".hydra" / "overrides.yaml"
    if path.is_file():
        for ln in path.read_text().splitlines():
            item = ln.strip().removeprefix("- ").strip()
            if item.startswith(f"{key}="):
                return item.split("=", 1)[1]
    return default


def _qrels(manifest: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """query_id -> gold doc_ids, from the dataset folder the job read."""
    from bench.data.golden import read_queries

    path = manifest.get("config", {}).get("dataset", {}).get("path")
    if not path:
        return {}
    queries = read_queries(Path(path) / "queries.jsonl", _all_ids(Path(path)))
    return {q.query_id: tuple(d for d, g in q.qrels if g >= 1) for q in queries}


def _all_ids(folder: Path) -> set[str]:
    from bench.data.jsonl import iter_jsonl

    return {str(obj["doc_id"]) for _, obj in iter_jsonl(folder / "manifest.jsonl")}


def collect(sweep_dir: Path) -> list[Job]:
    jobs = []
    for d in sorted((p for p in sweep_dir.iterdir() if p.is_dir() and is_run_dir(p)),
                    key=lambda p: (len(p.name), p.name)):
        if not (d / "parsing.parquet").is_file():
            continue
        run = load_run(d, name=d.name)
        files = tuple(pq.read_table(d / "parsing.parquet").to_pylist())
        parser = str(run.manifest.get("stages", {}).get("parsing", {}).get("parser")
                     or _override(d, "parser", "?"))
        jobs.append(Job(d.name, parser, _override(d, "chunker", "default"), run, files,
                        _qrels(run.manifest), _rows(d / CHUNK_TABLE), _rows(d / ANSWER_TABLE)))
    return jobs


def _rows(path: Path) -> tuple[dict[str, Any], ...]:
    return tuple(pq.read_table(path).to_pylist()) if path.is_file() else ()


def _mean(files: Sequence[dict[str, Any]], col: str) -> float | None:
    v = [r[col] for r in files if r.get(col) is not None and math.isfinite(r[col])]
    return float(np.mean(v)) if v else None


def cause(doc: dict[str, Any]) -> str:
    """The parse error a gold document shows, most severe first."""
    if doc["status"] != "ok":
        return f"{doc['status']}: {doc['reason']}"
    out = []
    if doc.get("cer") is not None and doc["cer"] > CER_DAMAGE:
        out.append(f"text errors (CER {doc['cer']:.2f})")
    if doc.get("order_distance") is not None and doc["order_distance"] > ORDER_DAMAGE:
        out.append(f"reading order (distance {doc['order_distance']:.2f})")
    if doc.get("teds") is not None and doc["teds"] < TEDS_DAMAGE:
        out.append(f"table lost (TEDS {doc['teds']:.2f})")
    if (doc.get("boilerplate_recall") is not None
            and doc["boilerplate_recall"] < BOILERPLATE_KEPT):
        out.append(f"boilerplate kept (removed {doc['boilerplate_recall']:.0%})")
    return "; ".join(out) or "no parse error found (chunking / ranking)"


def _per_query(a: ConfigScores, b: ConfigScores, metric: str) -> dict[str, float]:
    """query -> b - a on the queries both valued."""
    if metric not in a.values or metric not in b.values:
        return {}
    ok_b = b.valued(metric)
    pos = {q: j for j, q in enumerate(b.query_ids) if ok_b[j]}
    ok_a = a.valued(metric)
    return {q: float(b.values[metric][pos[q]] - a.values[metric][i])
            for i, q in enumerate(a.query_ids) if ok_a[i] and q in pos}


def _extractive(job: Job, label: str) -> dict[str, float]:
    return {r["query_id"]: float(r["answer_in_top_k"]) for r in job.answers
            if r["config"] == label}


def _lost_on(ref: dict[str, float], got: dict[str, float]) -> int:
    """Queries both valued whose value fell below the reference's."""
    return sum(1 for q, v in got.items() if q in ref and v < ref[q])


def chunk_summary(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """Per job and config, each chunk metric's mean with its bootstrap CI over the documents
    the job's parser read itself (not its types' defaults)."""
    from bench.metrics.stats import bootstrap_ci

    out = []
    for j in jobs:
        for label in dict.fromkeys(r["config"] for r in j.chunks):
            own = [r for r in j.chunks if r["config"] == label and r["parser"] == j.parser]
            for metric in CHUNK_METRICS:
                v = np.asarray([r[metric] for r in own if r.get(metric) is not None
                                and math.isfinite(r[metric])], np.float64)
                mean = lo = hi = None
                if v.size:
                    ci = bootstrap_ci(v, resamples=1000, seed=0)
                    mean, lo, hi = ci.mean, ci.ci_low, ci.ci_high
                out.append({"parser": j.parser, "chunker": j.chunker, "config": label,
                            "metric": metric, "mean": mean, "ci_low": lo, "ci_high": hi,
                            "n": int(v.size)})
    return out


def build(jobs: Sequence[Job]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from bench.metrics.pairing import paired
    from bench.metrics.stats import paired_compare

    oracle = {j.chunker: j for j in jobs if j.parser == ORACLE}
    rows: list[dict[str, Any]] = []
    attribution: list[dict[str, Any]] = []
    for j in jobs:
        from bench.parsing.report import throughput

        own = [r for r in j.files if r["parser"] == j.parser]  # not its types' defaults
        tp = throughput(own)
        base = {"job": j.name, "parser": j.parser, "chunker": j.chunker,
                "files": len(own), "not_ok": sum(1 for r in own if r["status"] != "ok"),
                **{c: _mean(own, c) for c in ("cer", "wer", "teds", "order_distance",
                                                  "boilerplate_precision",
                                                  "boilerplate_recall")},
                "pages_per_s": tp["pages_per_s"], "docs_per_s": tp["docs_per_s"],
                "peak_rss_bytes": int(tp["peak_rss_bytes"])}
        ref = oracle.get(j.chunker)
        by_doc = {r["doc_id"]: r for r in j.files}
        traced: set[str] = set()  # a generated config repeats its pool's losses: once
        for view in j.run.configs:
            if view.scores is None:
                continue
            ref_view = None if ref is None else next(
                (v for v in ref.run.configs if v.label == view.label and v.scores is not None),
                None)
            lost: dict[str, float] = {}
            if ref_view is not None and ref_view.scores is not None and j is not ref:
                lost = {q: d for q, d in _per_query(ref_view.scores, view.scores,
                                                    LOSS_METRIC).items() if d < 0}
            for metric in PAIRED:
                if metric not in view.scores.values:
                    continue
                ok = view.scores.valued(metric)
                mean = float(np.mean(view.scores.values[metric][ok])) if ok.any() else None
                delta = lo = hi = None
                n = int(ok.sum())
                if ref_view is not None and ref_view.scores is not None and j is not ref:
                    va, vb, _ = paired(ref_view.scores, view.scores, metric)
                    if va.size:
                        pc = paired_compare(va, vb, resamples=1000, seed=0)
                        delta, lo, hi, n = pc.delta, pc.ci_low, pc.ci_high, pc.n
                answers_lost = None
                if (metric in ANSWER_METRICS and ref_view is not None
                        and ref_view.scores is not None and j is not ref):
                    answers_lost = len([d for d in _per_query(ref_view.scores, view.scores,
                                                              metric).values() if d < 0])
                rows.append({**base, "config": view.label, "metric": metric, "mean": mean,
                             "delta": delta, "ci_low": lo, "ci_high": hi, "n": n,
                             "queries_lost": len(lost), "answers_lost": answers_lost})
            got = _extractive(j, view.label)
            if got:
                ref_x = {} if ref is None or j is ref else _extractive(ref, view.label)
                common = [q for q in got if q in ref_x]
                delta = lo = hi = None
                n = len(got)
                if common:
                    pc = paired_compare(np.asarray([ref_x[q] for q in common]),
                                        np.asarray([got[q] for q in common]),
                                        resamples=1000, seed=0)
                    delta, lo, hi, n = pc.delta, pc.ci_low, pc.ci_high, pc.n
                rows.append({**base, "config": view.label, "metric": EXTRACTIVE,
                             "mean": float(np.mean(list(got.values()))), "delta": delta,
                             "ci_low": lo, "ci_high": hi, "n": n, "queries_lost": len(lost),
                             "answers_lost": _lost_on(ref_x, got) if ref_x else None})
            for q, d in sorted(lost.items(), key=lambda x: x[1]):
                if q in traced:
                    continue
                traced.add(q)
                for doc_id in j.qrels.get(q, ()):
                    doc = by_doc.get(doc_id)
                    if doc is None:
                        continue
                    attribution.append({
                        "parser": j.parser, "chunker": j.chunker, "query_id": q, "delta": d,
                        "doc_id": doc_id, "type": doc["type"], "layout": doc["layout"],
                        "doc_parser": doc["parser"], "status": doc["status"],
                        "cause": cause(doc)})
    return rows, attribution


def _delta(r: dict[str, Any]) -> str:
    if r["delta"] is None:
        return "ref" if r["parser"] == ORACLE else "-"
    return f"{r['delta']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"


def front(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Labels on the Pareto front of (quality, pages/s), both higher is better."""
    out = []
    for name, q, s in points:
        if not any((q2 >= q and s2 >= s) and (q2 > q or s2 > s) for _, q2, s2 in points):
            out.append(name)
    return out


def _ci(r: dict[str, Any] | None) -> str:
    if r is None or r["mean"] is None:
        return "-"
    return f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"


def render_chunks(chunk_rows: Sequence[dict[str, Any]]) -> list[str]:
    """The chunk-quality table: per parser x chunker, each metric's mean [CI]."""
    if not chunk_rows:
        return []
    lines = ["", "Chunk quality over the documents each parser read itself (mean [bootstrap "
             "95 % CI] per document): sentence cut rate (chunk boundaries inside a "
             "sentence / boundaries), truth tables cut across chunks and lost, heading "
             "match (share of the chunks placed in the truth text that carry the truth "
             "heading they sit under; heading placed: share of chunks placed), title and "
             "date match (the parse's first heading / first ISO date against the truth).", "",
             "| parser | chunker | config | docs | " + " | ".join(CHUNK_METRICS) + " |",
             "|---|---|---|---:|" + "---|" * len(CHUNK_METRICS)]
    keyed: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for r in chunk_rows:
        keyed.setdefault((r["parser"], r["chunker"], r["config"]), {})[r["metric"]] = r
    for (p, c, label), by_m in keyed.items():
        docs = max((r["n"] for r in by_m.values()), default=0)
        lines.append(f"| {p} | {c} | {label} | {docs} | "
                     + " | ".join(_ci(by_m.get(m)) for m in CHUNK_METRICS) + " |")
    return lines


def render(rows: Sequence[dict[str, Any]], attribution: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["# Parse sweep: every parser against the oracle (truth text)", "",
             "Per parser x chunker: over the files the parser read itself (its file types; "
             "the others went through their type's default parser), the ingestion metrics "
             "(means over documents with a truth; a file that did not parse scores on no "
             "text), throughput over the parse seconds in the workers and the peak RSS of a "
             "parse worker; over every query, nDCG@10 / Recall@100 delta vs "
             "parser=oracle with the same chunker, paired per query (bootstrap 95 % CI), and "
             "the queries whose nDCG@10 fell below the oracle's.", "",
             "| parser | chunker | config | files not ok | CER | WER | TEDS | order dist | "
             "boilerplate P | boilerplate R | pages/s | docs/s | peak RSS MiB | nDCG@10 | "
             "ΔnDCG@10 vs oracle [CI] | ΔRecall@100 [CI] | queries lost |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    keyed: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        keyed.setdefault((r["job"], r["parser"], r["config"]), {})[r["metric"]] = r
    for (_, _, _), by_m in keyed.items():
        r = by_m.get("ndcg@10") or next(iter(by_m.values()))
        rec = by_m.get("recall@100")
        lines.append(
            f"| {r['parser']} | {r['chunker']} | {r['config']} | {r['not_ok']}/{r['files']} | "
            f"{num(r['cer'], 3, finite=True)} | {num(r['wer'], 3, finite=True)} | "
            f"{num(r['teds'], 3, finite=True)} | {num(r['order_distance'], 3, finite=True)} | "
            f"{num(r['boilerplate_precision'], 3, finite=True)} | "
            f"{num(r['boilerplate_recall'], 3, finite=True)} | "
            f"{num(r['pages_per_s'], 1, finite=True)} | {num(r['docs_per_s'], 1, finite=True)} | "
            f"{r['peak_rss_bytes'] / 2**20:.0f} | {num(r['mean'], 3, finite=True)} | {_delta(r)} | "
            f"{_delta(rec) if rec else '-'} | {r['queries_lost']} |")
    answers = [r for r in rows if r["metric"] in ANSWER_METRICS]
    if answers:
        lines += ["", "Answers, paired per query against the oracle's with the same chunker "
                  "(bootstrap 95 % CI): exact_match / token_f1 of the generated answers "
                  "(SQuAD normalisation, `bench.metrics.answer`), and the extractive bound "
                  f"{EXTRACTIVE} (a reference answer in the top 5 passages of the pool, "
                  "`bench.parsing.quality`); answers lost: queries whose value fell below "
                  "the oracle's.", "",
                  "| parser | chunker | config | metric | queries | mean | delta [CI] | "
                  "answers lost |",
                  "|---|---|---|---|---:|---:|---|---:|"]
        lines += [f"| {r['parser']} | {r['chunker']} | {r['config']} | {r['metric']} | "
                  f"{r['n']} | {num(r['mean'], 3, finite=True)} | {_delta(r)} | "
                  f"{'-' if r['answers_lost'] is None else r['answers_lost']} |"
                  for r in answers]
    nd = [r for r in rows if r["metric"] == "ndcg@10" and r["pages_per_s"] is not None
          and math.isfinite(r["pages_per_s"]) and r["mean"] is not None]
    if nd:
        # a generated config repeats its pool's nDCG@10: one point per parser x chunker
        names = list(dict.fromkeys(front([(f"{r['parser']}/{r['chunker']}", r["mean"],
                                           r["pages_per_s"]) for r in nd])))
        lines += ["", "Pareto front of nDCG@10 against pages/s (both higher is better): "
                  + ", ".join(names) + ".", ""]
    worst = min((r for r in rows if r["metric"] == "ndcg@10" and r["delta"] is not None),
                key=lambda r: r["delta"], default=None)
    if worst is not None:
        sel = [a for a in attribution if a["parser"] == worst["parser"]
               and a["chunker"] == worst["chunker"]]
        lines += [f"## Attribution: parser={worst['parser']} (chunker={worst['chunker']}), "
                  f"the largest nDCG@10 loss ({worst['delta']:+.3f})", "",
                  "Each query whose nDCG@10 fell below the oracle's, with its gold documents "
                  "and the parse error each shows (status and reason; else CER > "
                  f"{CER_DAMAGE}, reading-order distance > {ORDER_DAMAGE}, TEDS < "
                  f"{TEDS_DAMAGE}, boilerplate removed < {BOILERPLATE_KEPT:.0%}). "
                  "All parsers: `parse_attribution.parquet`.", "",
                  "| query | ΔnDCG@10 | gold doc | type | layout | read by | status | cause |",
                  "|---|---:|---|---|---|---|---|---|"]
        lines += [f"| {a['query_id']} | {a['delta']:+.3f} | {a['doc_id']} | {a['type']} | "
                  f"{a['layout']} | {a['doc_parser']} | {a['status']} | "
                  f"{a['cause'].replace('|', '/')} |" for a in sel[:40]]
        if len(sel) > 40:
            lines.append(f"| ... {len(sel) - 40} more rows in parse_attribution.parquet |")
        by_cause: dict[str, int] = {}
        for a in sel:
            key = a["cause"].split(":")[0].split(" (")[0]
            by_cause[key] = by_cause.get(key, 0) + 1
        lines += ["", "Causes (gold documents of lost queries): " + ", ".join(
            f"{k} {v}" for k, v in sorted(by_cause.items(), key=lambda x: -x[1])) + "."]
    return lines


def write_parse_sweep(sweep_dir: Path) -> Path | None:
    if not sweep_dir.is_dir():
        raise InputError(sweep_dir, 0, "no such sweep folder")
    jobs = collect(sweep_dir)
    if not jobs:
        return None
    if not any(j.parser == ORACLE for j in jobs):
        log.warning("parse sweep: no parser=oracle job finished; no deltas")
    rows, attribution = build(jobs)
    chunk_rows = chunk_summary(jobs)
    write_table(rows, SWEEP_SCHEMA, sweep_dir / "parse_sweep.parquet")
    write_table(attribution, ATTRIBUTION_SCHEMA, sweep_dir / "parse_attribution.parquet")
    write_table(chunk_rows, CHUNK_SCHEMA, sweep_dir / "parse_chunks.parquet")
    out = sweep_dir / "parse_sweep.md"
    atomic_write_bytes(out, "\n".join(render(rows, attribution)
                                      + render_chunks(chunk_rows)).encode())
    log.info("parse sweep report: %s", out)
    return out


class ParseSweepCallback(Callback):
    """Hydra callback of ``+experiment=parse_sweep``: the report above when the multirun
    ends. A problem is one line; the sweep's own exit code is the sweep report's."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("plan_only"):
            return
        try:
            write_parse_sweep(Path(config.hydra.sweep.dir))
        except BenchError as exc:
            print(f"bench: parse sweep report: {exc.one_line()}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from bench.docs import INGESTION

    ap = argparse.ArgumentParser(prog="python -m bench.parsing.sweep",
                                 description="the parse sweep's report of a finished multirun",
                                 epilog=INGESTION.help_line())
    ap.add_argument("sweep_dir", type=Path)
    args = ap.parse_args(argv)
    try:
        out = write_parse_sweep(args.sweep_dir)
    except BenchError as exc:
        print(f"bench: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    if out is None:
        print(f"bench: error: {args.sweep_dir}: no finished job with parsing.parquet",
              file=sys.stderr)
        return 2
    print(json.dumps({"report": str(out)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
