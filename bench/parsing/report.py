"""The parsing stage's results: parsing.parquet (one row per file) and its report section.

Per file: the parser that read it (the swept one, or its type's default), status and reason,
pages, characters, parse seconds, the worker's peak RSS, whether it came from the cache, how
many evaluated queries have it as a gold document, and the ingestion metrics against its
truth (``bench.parsing.measure``). The section: status counts, throughput (pages/s and
documents/s over the parse seconds of the files parsed in this run — cached ones carry their
first parse's time), peak RSS, the metrics per document type and layout (mean with a
bootstrap 95 % CI), the files that did not parse and the queries that lost gold documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from bench.parsing import measure
from bench.parsing.base import ParseStatus
from bench.parsing.dataset import ParsedDataset, ParseOutcome
from bench.report.base import StageReport
from bench.results.write import write_table

if TYPE_CHECKING:
    from bench.data.base import Query
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.view import RunView
    from bench.results.records import Comparison

TABLE = "parsing.parquet"
SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("file", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("layout", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("run_parser", pa.string(), nullable=False),
    pa.field("parser", pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("reason", pa.string(), nullable=False),
    pa.field("pages", pa.int32(), nullable=False),
    pa.field("chars", pa.int64(), nullable=False),
    pa.field("blocks", pa.int32(), nullable=False),
    pa.field("tables", pa.int32(), nullable=False),
    pa.field("seconds", pa.float64(), nullable=False),
    pa.field("peak_rss_bytes", pa.int64(), nullable=False),
    pa.field("cached", pa.bool_(), nullable=False),
    pa.field("gold_queries", pa.int32(), nullable=False),
    *(pa.field(c, pa.float64(), nullable=True) for c in measure.METRIC_COLUMNS),
])
#: the metrics the section's table shows (column header, parquet column)
SHOWN = (("CER", "cer"), ("WER", "wer"), ("len ratio", "length_ratio"),
         ("order dist", "order_distance"), ("TEDS", "teds"),
         ("boilerplate P", "boilerplate_precision"), ("boilerplate R", "boilerplate_recall"))


def rows(outcome: ParseOutcome, queries: Sequence[Query]) -> list[dict[str, Any]]:
    gold: dict[str, int] = {}
    for q in queries:
        for d, g in q.qrels:
            if g >= 1:
                gold[d] = gold.get(d, 0) + 1
    out = []
    for f, r in zip(outcome.files, outcome.records, strict=True):
        truth = measure.read_truth(f.truth)
        metrics = measure.document_metrics(r, truth) if truth is not None else {}
        out.append({"doc_id": f.doc_id, "file": r.file, "type": f.type, "layout": f.layout,
                    "source": f.source, "run_parser": outcome.parser, "parser": r.parser,
                    "status": str(r.status), "reason": r.reason, "pages": r.pages,
                    "chars": len(r.text), "blocks": len(r.blocks), "tables": len(r.tables),
                    "seconds": r.seconds, "peak_rss_bytes": r.peak_rss_bytes,
                    "cached": r.cached, "gold_queries": gold.get(f.doc_id, 0),
                    **{c: metrics.get(c) for c in measure.METRIC_COLUMNS}})
    return out


def throughput(table: Sequence[dict[str, Any]], parser: str | None = None) -> dict[str, float]:
    """pages/s and docs/s over the parse seconds of the files ``parser`` read (all when
    None); the peak RSS of its workers."""
    sel = [r for r in table if parser is None or r["parser"] == parser]
    secs = sum(r["seconds"] for r in sel)
    pages = sum(r["pages"] for r in sel)
    return {"files": float(len(sel)), "pages": float(pages), "seconds": secs,
            "pages_per_s": pages / secs if secs > 0 else float("nan"),
            "docs_per_s": len(sel) / secs if secs > 0 else float("nan"),
            "peak_rss_bytes": float(max((r["peak_rss_bytes"] for r in sel), default=0))}


def lost_queries(table: Sequence[dict[str, Any]], queries: Sequence[Query]
                 ) -> list[tuple[str, list[str]]]:
    """(query_id, its gold doc_ids that did not parse) for every query that lost one."""
    lost = {r["doc_id"] for r in table if r["status"] != ParseStatus.OK}
    out = []
    for q in queries:
        gone = [d for d, g in q.qrels if g >= 1 and d in lost]
        if gone:
            out.append((q.query_id, gone))
    return out


def _mean_ci(values: list[float]) -> str:
    from bench.metrics.stats import bootstrap_ci

    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], np.float64)
    if v.size == 0:
        return "-"
    if v.size == 1:
        return f"{v[0]:.3f}"
    ci = bootstrap_ci(v, resamples=1000, seed=0)
    return f"{ci.mean:.3f} [{ci.ci_low:.3f}, {ci.ci_high:.3f}]"


def section(table: Sequence[dict[str, Any]], outcome: ParseOutcome,
            queries: Sequence[Query]) -> list[str]:
    counts = outcome.counts()
    t = throughput(table)
    lines = ["## Parsing", "",
             f"parser={outcome.parser}: {len(table)} files "
             f"({', '.join(f'{k} {v}' for k, v in counts.items() if v)}); parse wall "
             f"{outcome.wall_s:.2f} s with {outcome.workers} worker(s), timeout "
             f"{outcome.timeout_s:g} s per file. Per file: `{TABLE}`.", "",
             "| parser | files | pages | parse s | pages/s | docs/s | peak RSS MiB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for p in dict.fromkeys(r["parser"] for r in table):
        tp = throughput(table, p)
        lines.append(f"| {p} | {tp['files']:.0f} | {tp['pages']:.0f} | {tp['seconds']:.2f} | "
                     f"{tp['pages_per_s']:.2f} | {tp['docs_per_s']:.2f} | "
                     f"{tp['peak_rss_bytes'] / 2**20:.0f} |")
    n_cached = sum(1 for r in table if r["cached"])
    lines += ["", f"Throughput is over each file's parse seconds in its worker (process start "
              f"excluded); {n_cached} of {len(table)} files came from the parse cache and "
              f"carry their first parse's time. All files: {t['pages_per_s']:.2f} pages/s.", ""]
    if not measure.available():
        lines += ["Ingestion metrics: not computed — the package `bench.ingest.metrics` is "
                  "not installed in this checkout.", ""]
    else:
        lines += ["Ingestion metrics per document type and layout (mean [95 % bootstrap CI] "
                  "over documents with a truth; a document that did not parse is scored on "
                  "no text):", "",
                  "| type | layout | docs | ok | " + " | ".join(h for h, _ in SHOWN) + " |",
                  "|---|---|---:|---:|" + "---:|" * len(SHOWN)]
        for ty, lay in dict.fromkeys((r["type"], r["layout"]) for r in table):
            sel = [r for r in table if r["type"] == ty and r["layout"] == lay]
            ok = sum(1 for r in sel if r["status"] == "ok")
            lines.append(f"| {ty} | {lay or '-'} | {len(sel)} | {ok} | "
                         + " | ".join(_mean_ci([r[c] for r in sel]) for _, c in SHOWN) + " |")
        lines.append("")
    bad = [r for r in table if r["status"] != ParseStatus.OK]
    if bad:
        lines += ["Files that did not parse (no text in the corpus; first 20):", "",
                  "| doc_id | type | parser | status | reason | gold of queries |",
                  "|---|---|---|---|---|---:|"]
        lines += [f"| {r['doc_id']} | {r['type']} | {r['parser']} | {r['status']} | "
                  f"{r['reason'].replace('|', '/')} | {r['gold_queries']} |" for r in bad[:20]]
        lines.append("")
    lost = lost_queries(table, queries)
    all_lost = sum(1 for q in queries for qid, gone in lost if qid == q.query_id
                   and len(gone) == sum(1 for _, g in q.qrels if g >= 1))
    lines += [f"Queries with a gold document that did not parse: {len(lost)} of "
              f"{len(queries)} ({all_lost} lost every gold document); they are evaluated "
              "like the others.", ""]
    return lines


def write(done: RunView, run_dir: Path, comparisons: Sequence[Comparison],
          latency: LatencyRun) -> StageReport | None:
    ds = done.dataset
    if not isinstance(ds, ParsedDataset) or ds.parse is None:
        return None
    table = rows(ds.parse, ds.queries)
    write_table(table, SCHEMA, run_dir / TABLE)
    tables_out: tuple[str, ...] = (TABLE,)
    extra: list[str] = []
    if measure.available():
        from bench.parsing import quality

        truths = [measure.read_truth(f.truth) for f in ds.parse.files]
        chunk_rows, answer_rows = quality.tables(done, ds.parse, truths)
        write_table(chunk_rows, quality.CHUNK_SCHEMA, run_dir / quality.CHUNK_TABLE)
        write_table(answer_rows, quality.ANSWER_SCHEMA, run_dir / quality.ANSWER_TABLE)
        tables_out += (quality.CHUNK_TABLE, quality.ANSWER_TABLE)
        extra = quality_section(chunk_rows, answer_rows)
    per_parser = {p: throughput(table, p) for p in dict.fromkeys(r["parser"] for r in table)}
    manifest = {"parser": ds.parse.parser, "files": len(table), "status": ds.parse.counts(),
                "wall_s": ds.parse.wall_s, "workers": ds.parse.workers,
                "timeout_s": ds.parse.timeout_s, "throughput": per_parser,
                "metrics": measure.available(),
                "queries_losing_gold": len(lost_queries(table, ds.queries))}
    return StageReport("parsing", tables_out,
                       tuple(section(table, ds.parse, ds.queries) + extra), manifest)


#: the chunk-quality columns the section shows (header, parsing_chunks.parquet column)
CHUNK_SHOWN = (("sentence cut rate", "sentence_cut_rate"), ("tables cut", "tables_cut"),
               ("tables lost", "tables_lost"), ("heading match", "heading_match"),
               ("title match", "title_match"), ("date match", "date_match"))


def quality_section(chunk_rows: Sequence[dict[str, Any]],
                    answer_rows: Sequence[dict[str, Any]]) -> list[str]:
    """Chunk quality per config and document type (mean [95 % bootstrap CI] over documents
    with a truth), and the extractive answer bound per config (``bench.parsing.quality``)."""
    from bench.parsing.quality import ANSWER_TABLE, CHUNK_TABLE, TOP_K

    lines = ["Chunk quality per config and document type (mean [95 % bootstrap CI] over the "
             "documents with a truth; heading match: share of a document's chunks whose "
             "carried heading is the truth heading they sit under). Per document: "
             f"`{CHUNK_TABLE}`.", "",
             "| config | type | docs | " + " | ".join(h for h, _ in CHUNK_SHOWN) + " |",
             "|---|---|---:|" + "---:|" * len(CHUNK_SHOWN)]
    for label, ty in dict.fromkeys((r["config"], r["type"]) for r in chunk_rows):
        sel = [r for r in chunk_rows if r["config"] == label and r["type"] == ty]
        lines.append(f"| {label} | {ty} | {len(sel)} | "
                     + " | ".join(_mean_ci([r[c] for r in sel]) for _, c in CHUNK_SHOWN) + " |")
    lines += ["", f"Extractive answer bound: a reference answer (SQuAD-normalised) in the top "
              f"{TOP_K} passages of the pool, per query with reference answers. Per query: "
              f"`{ANSWER_TABLE}`.", "",
              "| config | queries | answer in top passages | gold doc in top passages |",
              "|---|---:|---:|---:|"]
    for label in dict.fromkeys(r["config"] for r in answer_rows):
        sel = [r for r in answer_rows if r["config"] == label]
        lines.append(f"| {label} | {len(sel)} | "
                     f"{_mean_ci([r['answer_in_top_k'] for r in sel])} | "
                     f"{_mean_ci([r['gold_in_top_k'] for r in sel])} |")
    return [*lines, ""]
