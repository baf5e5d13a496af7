"""Scale on one box: chunk -> embed -> index -> search -> metrics at 10k / 100k / 1M chunks.

Each size runs in a FRESH ``python`` child (peak RSS is per process) over a synthetic corpus
written by ``bench.data.scale.write_scale_corpus`` (short documents: N documents ~ N chunks,
queries with one gold document each). The child streams the corpus shard by shard through
bench's own stage code, never holding the corpus in one table:

- ``chunk``: each shard's documents through the configured chunker (``conf/chunker``, with the
  embedder's tokenizer), written as one chunk Parquet per shard;
- ``embed``: each chunk shard's texts through the embedder (``conf/embedder``) into ONE
  ``.npy`` memmap (``EmbedOp``'s file layout); ``embed_queries`` the queries;
- ``index``: the ANN index (``conf/index``, e.g. ``ivf_flat``) built on the memmap; the exact
  lane needs no build (faiss brute force reads the memmap: ``bench.index.exact.exact_topk``);
- ``search``: exact top-depth over the memmap + ``fold_chunks`` into documents;
  ``search_ann``: ``DenseRetriever.search`` (batch mode) on the ANN index + fold + tie-tolerant
  ANN recall@10 against the exact lane;
- ``metrics``: ``bench.metrics.engine.evaluate`` (nDCG@10, Recall@10/100, MRR@10) per lane.

Per stage: wall seconds and peak VmRSS / RssAnon from a sampler thread reading
``/proc/self/status`` every 20 ms (RssFile = pages of memmaps and mapped files, reclaimable by
the kernel; RssAnon = heap, the part that must fit in RAM). The parent fits the scaling
exponent of each stage (slope of log seconds vs log chunks, least squares over all sizes and
between neighbours) and names the stage that dominates at the largest size. Output: scale.json
and scale.md under ``--out``; scale.md ends with the scale planner's check (``bench.scaling``:
each size predicted from the sizes 10x smaller, against what was measured), and the folder is
the planner's profile (``python -m bench.scaling plan DIR --chunks N``, ``scale_plan.profile``).

Not a test: ``HF_HUB_OFFLINE=1 python scripts/bench_scale.py --out runs/scale
[--sizes 10000 100000 1000000] [--embedder onnx_paraphrase_l3] [--ann ivf_flat|none]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"

#: the stages of the measured path, in order (``generate`` is set-up, not part of the path)
PATH_STAGES = ("chunk", "embed", "embed_queries", "index", "search", "search_ann", "metrics")
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
MB = 1024 * 1024


# ---------------------------------------------------------------- memory sampling (child)

def read_status() -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile of this process in bytes (Linux /proc)."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0]) * 1024
    return out


class RssSampler:
    """A daemon thread keeping the peak VmRSS and RssAnon seen since the last ``reset``."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._peak_rss = 0
        self._peak_anon = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        s = read_status()
        with self._lock:
            self._peak_rss = max(self._peak_rss, s.get("VmRSS", 0))
            self._peak_anon = max(self._peak_anon, s.get("RssAnon", 0))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def reset(self) -> None:
        with self._lock:
            self._peak_rss = self._peak_anon = 0
        self._sample()

    def peaks(self) -> tuple[int, int]:
        self._sample()
        with self._lock:
            return self._peak_rss, self._peak_anon


@dataclass
class StageRecord:
    stage: str
    seconds: float
    n_items: int
    peak_rss_bytes: int
    peak_anon_bytes: int


@dataclass
class Recorder:
    sampler: RssSampler
    stages: list[StageRecord] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str, n_items: int) -> Iterator[None]:
        self.sampler.reset()
        t0 = time.perf_counter()
        yield
        seconds = time.perf_counter() - t0
        rss, anon = self.sampler.peaks()
        self.stages.append(StageRecord(name, seconds, n_items, rss, anon))
        print(f"[scale] {name}: {seconds:.2f} s, {n_items} items, peak RSS {rss / MB:.0f} MB "
              f"(anon {anon / MB:.0f} MB)", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- one size (child)

def _conf(group: str, option: str, **runtime: Any) -> Any:
    from omegaconf import OmegaConf

    from bench.config.build import build

    path = CONF / group / f"{option}.yaml"
    if not path.is_file():
        from bench.errors import ConfigError

        raise ConfigError(group, f"no option {option!r} (conf/{group}/{option}.yaml)")
    return build(OmegaConf.load(path), group, **runtime)


def warm_kernels() -> None:
    """Call the numba kernels once on toy inputs: their first call compiles (or loads the
    on-disk cache), a one-off cost that is not the stage's and would bend the smallest size."""
    from bench.index.base import SearchResult
    from bench.index.exact import ann_recall_at_k
    from bench.metrics.base import Qrels, Run
    from bench.metrics.engine import evaluate

    qrels = Qrels.from_mapping({"q": {"d": 1}})
    run = Run(("q",), np.array([0, 2]), np.array(["d", "e"]), np.array([2.0, 1.0], np.float32))
    evaluate(qrels, run, list(METRICS))
    res = SearchResult(np.array([[0, 1]]), np.array([[1.0, 0.5]], np.float32))
    ann_recall_at_k(res, res, 2)


def run_size(args: argparse.Namespace) -> dict[str, Any]:
    """The whole path at one size, in this process; returns the size's record."""
    import pyarrow.parquet as pq

    from bench.chunking.base import ChunkTable
    from bench.data.scale import doc_ids, iter_shards, read_info, read_queries, write_scale_corpus
    from bench.index.base import SearchResult
    from bench.index.exact import ann_recall_at_k, exact_topk
    from bench.metrics.base import Qrels, Run
    from bench.metrics.engine import evaluate
    from bench.retrieval.base import Hits, fold_chunks
    from bench.retrieval.dense import DenseRetriever
    from bench.telemetry.base import TimingLog

    warm_kernels()
    sampler = RssSampler()
    sampler.start()
    rec = Recorder(sampler)
    work = Path(args.work)
    corpus = work / "corpus"
    with rec.stage("generate", args.size):
        write_scale_corpus(corpus, n_docs=args.size, n_queries=args.queries, seed=args.seed,
                           shard_size=args.shard_size)
    info = read_info(corpus)
    embedder = _conf("embedder", args.embedder, device="cpu")
    chunker = _conf("chunker", args.chunker)
    retriever = DenseRetriever(k=args.k, latency_mode="batch")

    # chunk: shard by shard; only the chunk -> document map stays in memory (int32 [N])
    chunk_dir = work / "chunks"
    chunk_dir.mkdir(exist_ok=True)
    chunk_doc_parts: list[np.ndarray] = []
    chunk_rows: list[int] = []
    n_chars = 0  # the corpus' characters: the planner sizes another corpus's chunks by them
    with rec.stage("chunk", info.n_docs):
        for shard, (start, docs) in enumerate(iter_shards(corpus)):
            n_chars += sum(len(d.text) for d in docs)
            table = chunker.chunk(docs, tokenizer=embedder.tokenizer)
            table = ChunkTable(table.doc_idx + np.int32(start), table.start_char,
                               table.end_char, table.n_tokens, table.section, table.text)
            table.save(chunk_dir / f"part-{shard:05d}.parquet")
            chunk_doc_parts.append(table.doc_idx)
            chunk_rows.append(len(table))
            del table, docs
    chunk_doc = np.concatenate(chunk_doc_parts)
    del chunk_doc_parts
    n_chunks = len(chunk_doc)

    # embed: every chunk shard into one memmap (EmbedOp's vectors.npy), then reopened read-only
    vec_path = work / "vectors.npy"
    with rec.stage("embed", n_chunks):
        out = np.lib.format.open_memmap(vec_path, mode="w+", dtype=np.float32,
                                        shape=(n_chunks, embedder.dim))
        off = 0
        n_tokens = 0
        for shard, n in enumerate(chunk_rows):
            texts = pq.read_table(chunk_dir / f"part-{shard:05d}.parquet",
                                  columns=["text"])["text"].to_pylist()
            stats = embedder.encode(texts, kind="document", out=out[off:off + n])
            n_tokens += stats.n_tokens
            off += n
            del texts
        out.flush()
        del out
    vectors = np.load(vec_path, mmap_mode="r")

    queries = read_queries(corpus)
    with rec.stage("embed_queries", len(queries)):
        qv = np.zeros((len(queries), embedder.dim), dtype=np.float32)
        embedder.encode([q.text for q in queries], kind="query", out=qv)

    built = None
    index_name = "none"
    if args.ann != "none":
        index = _conf("index", args.ann, device="cpu")
        index_name = args.ann
        with rec.stage("index", n_chunks):
            built, _ = index.build(vectors)

    depth = retriever.depth(n_chunks)
    # the corpus' ids are fixed-width row numbers: byte order = row order, so the trec_eval
    # tie-break key of row i is i (no table of 1M id strings)
    id_key = np.arange(info.n_docs, dtype=np.int64)
    with rec.stage("search", len(queries)):
        exact = exact_topk(vectors, qv, depth)
        hits = fold_chunks(exact, chunk_doc, id_key, k=retriever.k)
    lanes: dict[str, Hits] = {"exact": hits}
    ann_recall = None
    if built is not None:
        params = {"nprobe": args.nprobe} if "nprobe" in built.knobs else (
            {"ef_search": args.ef_search} if "ef_search" in built.knobs else {})
        with rec.stage("search_ann", len(queries)):
            res = retriever.search(built, qv, params, n_chunks=n_chunks,
                                   timing=TimingLog("retrieve"))
            lanes["ann"] = fold_chunks(res, chunk_doc, id_key, k=retriever.k)
            cut = min(10, depth)
            ann_recall = float(np.mean(ann_recall_at_k(
                SearchResult(res.ids[:, :cut], res.scores[:, :cut]), exact, cut)))

    scores: dict[str, dict[str, float]] = {}
    with rec.stage("metrics", len(queries)):
        qrels = Qrels.from_mapping({q.query_id: dict(q.qrels) for q in queries})
        for lane, h in lanes.items():
            run = Run(tuple(q.query_id for q in queries), h.offsets, doc_ids(h.doc_idx),
                      h.scores)
            scores[lane] = evaluate(qrels, run, list(METRICS)).aggregate()
    sampler.stop()
    status = read_status()
    # what each stage leaves on disk (the planner's disk figure): the chunk shards, the
    # vectors, and the index as the normal pipeline serialises it (its memory math's resident
    # bytes plus on-disk lists: within 1 % of the file, tests/index/test_index_memory.py)
    disk = {"chunks": sum(f.stat().st_size for f in chunk_dir.iterdir()),
            "vectors": int(vec_path.stat().st_size), "index": 0}
    if built is not None:
        mem = index.memory(n_chunks, embedder.dim)
        disk["index"] = mem.resident_bytes + mem.disk_lists
    return {
        "size": args.size, "n_docs": info.n_docs, "n_chunks": n_chunks,
        "n_queries": len(queries), "n_tokens": n_tokens, "embedder": args.embedder,
        "chunker": args.chunker, "ann": index_name,
        "ann_params": {"nprobe": args.nprobe} if index_name.startswith("ivf") else {},
        "k": retriever.k, "chunk_depth": depth, "shard_size": args.shard_size,
        "stages": [asdict(s) for s in rec.stages],
        "peak_rss_bytes": status["VmHWM"], "vectors_bytes": int(vec_path.stat().st_size),
        "disk_bytes": disk, "dim": embedder.dim, "n_chars": n_chars,
        "metrics": scores, "ann_recall@10": ann_recall,
        "loadavg": list(os.getloadavg()), "cpus": os.cpu_count(),
    }


# ---------------------------------------------------------------- aggregation (parent)

def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of log y on log x (y ~ x^slope); None with < 2 usable points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len({p[0] for p in pts}) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Exponents per stage (seconds and peak RSS vs chunks) and the dominating stage."""
    results = sorted(results, key=lambda r: r["n_chunks"])
    stages = [s for s in PATH_STAGES
              if any(s in {x["stage"] for x in r["stages"]} for r in results)]
    xs = [float(r["n_chunks"]) for r in results]

    def col(stage: str, key: str) -> list[float]:
        return [next((float(x[key]) for x in r["stages"] if x["stage"] == stage), 0.0)
                for r in results]

    exponents: dict[str, dict[str, Any]] = {}
    for s in stages:
        secs = col(s, "seconds")
        exponents[s] = {
            "seconds": fit_exponent(xs, secs),
            "seconds_pairwise": [fit_exponent(xs[i:i + 2], secs[i:i + 2])
                                 for i in range(len(xs) - 1)],
            "peak_rss": fit_exponent(xs, col(s, "peak_rss_bytes")),
            "peak_anon": fit_exponent(xs, col(s, "peak_anon_bytes")),
        }
    totals = [sum(x["seconds"] for x in r["stages"] if x["stage"] in PATH_STAGES)
              for r in results]
    exponents["total"] = {
        "seconds": fit_exponent(xs, totals),
        "seconds_pairwise": [fit_exponent(xs[i:i + 2], totals[i:i + 2])
                             for i in range(len(xs) - 1)],
        "peak_rss": fit_exponent(xs, [float(r["peak_rss_bytes"]) for r in results]),
        "peak_anon": None,
    }
    last = results[-1]
    path = [x for x in last["stages"] if x["stage"] in PATH_STAGES]
    dominant = max(path, key=lambda x: x["seconds"]) if path else None
    return {
        "sizes": [r["size"] for r in results], "stages": stages, "exponents": exponents,
        "dominant_stage": None if dominant is None else dominant["stage"],
        "dominant_share": None if dominant is None else dominant["seconds"] / totals[-1],
        "totals_s": totals, "results": results,
    }


def _fmt_exp(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def markdown(summary: dict[str, Any]) -> str:
    results, stages = summary["results"], summary["stages"]
    r0 = results[0]
    lines = [
        f"# Scale: chunk -> embed -> index -> search -> metrics ({r0['embedder']}, chunker "
        f"{r0['chunker']}, ANN {r0['ann']} {r0['ann_params']}, {r0['n_queries']} queries, "
        f"k={r0['k']})", "",
        "Seconds per stage (wall, one fresh process per size):", "",
        "| chunks | " + " | ".join(stages) + " | total s | chunks/s (path) | peak RSS MB "
        "| vectors MB |",
        "|---:|" + "---:|" * (len(stages) + 4),
    ]
    for r, total in zip(results, summary["totals_s"], strict=True):
        by = {x["stage"]: x for x in r["stages"]}
        cells = [f"{by[s]['seconds']:.2f}" if s in by else "—" for s in stages]
        lines.append(f"| {r['n_chunks']:,} | " + " | ".join(cells) +
                     f" | {total:.1f} | {r['n_chunks'] / total:,.0f} | "
                     f"{r['peak_rss_bytes'] / MB:,.0f} | {r['vectors_bytes'] / MB:,.0f} |")
    lines += ["", "Peak RSS per stage, MB (VmRSS incl. memmapped pages / RssAnon = heap):", "",
              "| chunks | " + " | ".join(stages) + " |", "|---:|" + "---:|" * len(stages)]
    for r in results:
        by = {x["stage"]: x for x in r["stages"]}
        cells = [f"{by[s]['peak_rss_bytes'] / MB:,.0f} / {by[s]['peak_anon_bytes'] / MB:,.0f}"
                 if s in by else "—" for s in stages]
        lines.append(f"| {r['n_chunks']:,} | " + " | ".join(cells) + " |")
    lines += ["", "Scaling exponents (log-log slope vs chunks; 1 = linear):", "",
              "| stage | seconds (fit) | seconds (between sizes) | peak RSS | peak anon RSS |",
              "|---|---:|---|---:|---:|"]
    for s, e in summary["exponents"].items():
        pair = ", ".join(_fmt_exp(v) for v in e["seconds_pairwise"])
        lines.append(f"| {s} | {_fmt_exp(e['seconds'])} | {pair} | {_fmt_exp(e['peak_rss'])} "
                     f"| {_fmt_exp(e['peak_anon'])} |")
    if summary["dominant_stage"]:
        lines += ["", f"Dominating stage at {results[-1]['n_chunks']:,} chunks: "
                      f"**{summary['dominant_stage']}** "
                      f"({summary['dominant_share']:.0%} of the path's time)."]
    lines += ["", "Quality (per lane; ANN recall@10 vs exact):", "",
              "| chunks | lane | " + " | ".join(METRICS) + " | ANN recall@10 |",
              "|---:|---|" + "---:|" * (len(METRICS) + 1)]
    for r in results:
        for lane, vals in r["metrics"].items():
            rec = r["ann_recall@10"] if lane == "ann" and r["ann_recall@10"] is not None else None
            lines.append(f"| {r['n_chunks']:,} | {lane} | " +
                         " | ".join(f"{vals[m]:.3f}" for m in METRICS) +
                         f" | {'—' if rec is None else f'{rec:.3f}'} |")
    lines += ["", f"Machine: {r0['cpus']} CPUs; load average at the end of each size: " +
              ", ".join(f"{r['n_chunks']:,}: {r['loadavg'][0]:.1f}" for r in results)]
    return "\n".join(lines) + "\n"


def planner_check(path: Path) -> str:
    """The scale planner's error on these sizes (``python -m bench.scaling validate``): each
    size predicted from the sizes 10x smaller, as a markdown section ("" with too few)."""
    from bench.scaling.planner import validate
    from bench.scaling.profile import read_profile
    from bench.scaling.report import validation_markdown

    profile = read_profile(path)
    checks = validate(profile, ratio=10.0)
    if not checks:
        return ""
    return "\n" + validation_markdown(profile, checks, ratio=10.0, method="work")


# ---------------------------------------------------------------- CLI

def _child_cmd(args: argparse.Namespace, size: int, work: Path, result: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", str(result),
            "--work", str(work), "--size", str(size), "--queries", str(args.queries),
            "--embedder", args.embedder, "--chunker", args.chunker, "--ann", args.ann,
            "--nprobe", str(args.nprobe), "--ef-search", str(args.ef_search), "--k", str(args.k),
            "--shard-size", str(args.shard_size), "--seed", str(args.seed)]


def previous(out: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Sizes measured earlier in ``out`` with the same settings (``--add``)."""
    same = {"embedder": args.embedder, "chunker": args.chunker, "n_queries": args.queries,
            "k": args.k, "shard_size": args.shard_size}
    found = []
    for p in sorted(out.glob("size-*.json")):
        r = json.loads(p.read_text())
        if all(r.get(key) == value for key, value in same.items()) and (
                r.get("ann") == (args.ann if args.ann != "none" else "none")):
            found.append(r)
    return found


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from bench.scaling.__main__ import positive_int

    p = argparse.ArgumentParser(prog="bench_scale.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/scale", help="folder for scale.json / scale.md")
    p.add_argument("--sizes", type=positive_int, nargs="+", default=[10_000, 100_000, 1_000_000],
                   help="documents per size (~ chunks: documents are ~1 chunk long)")
    p.add_argument("--queries", type=positive_int, default=1000)
    p.add_argument("--embedder", default="onnx_paraphrase_l3", help="conf/embedder option")
    p.add_argument("--chunker", default="fixed_tokens", help="conf/chunker option")
    p.add_argument("--ann", default="ivf_flat", help="conf/index option, or none")
    p.add_argument("--nprobe", type=positive_int, default=16)
    p.add_argument("--ef-search", type=positive_int, default=64)
    p.add_argument("--k", type=positive_int, default=100)
    p.add_argument("--shard-size", type=positive_int, default=50_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep each size's corpus and vectors")
    p.add_argument("--add", action="store_true",
                   help="add to the sizes already measured in --out with the same settings")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        from bench.config.build import OptionError
        from bench.errors import BenchError

        try:
            Path(args.child).write_text(json.dumps(run_size(args), indent=2))
        except (BenchError, OptionError) as exc:  # a bad stage option: one line, exit 2
            print(f"bench_scale: {exc}", file=sys.stderr)
            return 2
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = previous(out, args) if args.add else []
    for size in args.sizes:
        work = out / f"work-{size}"
        work.mkdir(exist_ok=True)
        result = out / f"size-{size}.json"
        print(f"[scale] size {size:,}: fresh process", file=sys.stderr, flush=True)
        rc = subprocess.call(_child_cmd(args, size, work, result))
        if rc != 0:
            print(f"[scale] size {size} failed (exit {rc})", file=sys.stderr)
            return rc
        results = [r for r in results if r["size"] != size] + [json.loads(result.read_text())]
        if not args.keep:
            import shutil

            shutil.rmtree(work)
        summary = summarize(results)  # rewritten after every size: partial curves survive
        (out / "scale.json").write_text(json.dumps(summary, indent=2))
        (out / "scale.md").write_text(markdown(summary) + planner_check(out / "scale.json"))
    print((out / "scale.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
