"""Benchmark bench's metric engine against pytrec_eval (and ranx if installed).

Builds a synthetic run of N queries x D docs (scores rounded to 3 decimals, so ties are common;
each ranking stored in rank order, as runs are) with graded qrels (0-3, some judged docs not
retrieved), then times, interleaved (bench, pytrec_eval, bench, ...; medians):

* in memory: pre-built structures (bench: ``Qrels``/``Run`` of numpy ``U`` ids, and of ``S``
  ids as "bench-bytes-ids"; pytrec_eval: dict of dicts with its ``RelevanceEvaluator`` built
  beforehand, so its timing leaves out its qrels preparation while bench's includes it)
  -> per-query values;
* end to end: TREC qrels + run files -> parse -> evaluate.

Peak memory is measured in fresh subprocesses (Linux ``VmHWM`` after resetting it), as RSS
above the process's state before the measured step. Metrics: ndcg@10, recall@100, map, mrr,
precision@10. Not a test: run ``python scripts/bench_metrics.py [--queries N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

METRICS = ["ndcg@10", "recall@100", "map", "mrr", "precision@10"]
PYTREC = {"ndcg_cut.10", "recall.100", "map", "recip_rank", "P.10"}


def make_data(n_queries: int, n_docs: int, seed: int, out: Path) -> None:
    """Write qrels.txt / run.txt (TREC) and data.npz (the same data as arrays)."""
    rng = np.random.default_rng(seed)
    corpus = max(1_000_000, 10 * n_docs)
    # unique docs per query: distinct strides through the corpus
    start = rng.integers(0, corpus, n_queries)[:, None]
    docs = (start + np.arange(n_docs)[None, :] * rng.integers(1, 97, n_queries)[:, None]) % corpus
    scores = np.sort(np.round(rng.random((n_queries, n_docs)), 3), axis=1)[:, ::-1]
    doc_ids = np.char.add("D", docs.astype("U7")).ravel()
    n_judged = 8
    judged_pos = np.sort(rng.integers(0, 2 * n_docs, (n_queries, n_judged)), axis=1)
    judged = np.where(judged_pos < n_docs,
                      docs[np.arange(n_queries)[:, None], np.minimum(judged_pos, n_docs - 1)],
                      (docs[:, :1] + corpus // 2 + judged_pos) % corpus)  # not retrieved
    judged_ids = np.char.add("D", judged.astype("U7"))
    grades = rng.integers(0, 4, (n_queries, n_judged))
    # repeated positions would judge a doc twice: keep the first of each
    keep = np.ones_like(judged_pos, dtype=bool)
    keep[:, 1:] = judged_ids[:, 1:] != judged_ids[:, :-1]
    qids = np.char.add("q", np.arange(n_queries).astype("U8"))
    q_counts = keep.sum(axis=1)
    np.savez(out / "data.npz", qids=qids, doc_ids=doc_ids, scores=scores.ravel(),
             judged=judged_ids[keep], grades=grades[keep], q_counts=q_counts)
    with (out / "run.txt").open("w") as fh:
        flat_q = np.repeat(qids, n_docs)
        ranks = np.tile(np.arange(1, n_docs + 1), n_queries)
        sc = scores.ravel()
        for lo in range(0, len(doc_ids), 1_000_000):
            hi = lo + 1_000_000
            fh.write("".join(f"{q} Q0 {d} {r} {s:.3f} bench\n" for q, d, r, s in
                             zip(flat_q[lo:hi], doc_ids[lo:hi], ranks[lo:hi], sc[lo:hi],
                                 strict=True)))
    with (out / "qrels.txt").open("w") as fh:
        fh.write("".join(f"{q} 0 {d} {g}\n" for q, d, g in
                         zip(np.repeat(qids, q_counts), judged_ids[keep], grades[keep],
                             strict=True)))


def load_bench(data: Path, kind: str = "U"):  # type: ignore[no-untyped-def]
    """bench's structures; ``kind`` "U" (numpy str ids) or "S" (UTF-8 bytes ids)."""
    from bench.metrics.engine import Qrels, Run

    z = np.load(data / "data.npz")
    qids = tuple(z["qids"].tolist())
    n_docs = len(z["doc_ids"]) // len(qids)
    run = Run(qids, np.arange(len(qids) + 1) * n_docs, z["doc_ids"].astype(kind), z["scores"])
    q_off = np.concatenate([[0], np.cumsum(z["q_counts"])])
    return Qrels(qids, q_off, z["judged"].astype(kind), z["grades"]), run


def load_dicts(data: Path) -> tuple[dict, dict]:
    z = np.load(data / "data.npz")
    qids = z["qids"].tolist()
    n_docs = len(z["doc_ids"]) // len(qids)
    docs, scores = z["doc_ids"].tolist(), z["scores"].tolist()
    run = {q: dict(zip(docs[i * n_docs:(i + 1) * n_docs], scores[i * n_docs:(i + 1) * n_docs],
                       strict=True)) for i, q in enumerate(qids)}
    judged, grades = z["judged"].tolist(), z["grades"].tolist()
    qrels: dict[str, dict[str, int]] = {}
    pos = 0
    for q, c in zip(qids, z["q_counts"].tolist(), strict=True):
        qrels[q] = dict(zip(judged[pos:pos + c], grades[pos:pos + c], strict=True))
        pos += c
    return qrels, run


# One prepared step per (engine, mode): setup() -> (state, step); step(state) -> result.
Step = tuple[Any, Callable[[Any], object]]
def _bench_memory(data: Path) -> Step:
    from bench.metrics.engine import evaluate

    return load_bench(data), lambda s: evaluate(s[0], s[1], METRICS)


def _bench_bytes_memory(data: Path) -> Step:
    from bench.metrics.engine import evaluate

    return load_bench(data, "S"), lambda s: evaluate(s[0], s[1], METRICS)


def _bench_files(data: Path) -> Step:
    from bench.metrics.engine import evaluate
    from bench.metrics.trec_io import read_qrels, read_run

    return data, lambda d: evaluate(read_qrels(d / "qrels.txt"), read_run(d / "run.txt"), METRICS)


def _pytrec_memory(data: Path) -> Step:
    import pytrec_eval

    qrels, run = load_dicts(data)
    ev = pytrec_eval.RelevanceEvaluator(qrels, PYTREC)
    return (ev, run), lambda s: s[0].evaluate(s[1])


def _pytrec_files(data: Path) -> Step:
    import pytrec_eval

    def step(d: Path) -> object:
        with (d / "qrels.txt").open() as fq:
            qrels = pytrec_eval.parse_qrel(fq)
        with (d / "run.txt").open() as fr:
            run = pytrec_eval.parse_run(fr)
        return pytrec_eval.RelevanceEvaluator(qrels, PYTREC).evaluate(run)

    return data, step


def _ranx_memory(data: Path) -> Step:
    from ranx import Qrels, Run, evaluate

    qrels, run = load_dicts(data)
    names = ["ndcg@10", "recall@100", "map", "mrr", "precision@10"]
    evaluate(Qrels({"q": {"d": 1}}), Run({"q": {"d": 1.0}}), names)  # JIT outside the timing
    return (Qrels(qrels), Run(run)), lambda s: evaluate(s[0], s[1], names, make_comparable=True)


def _ranx_files(data: Path) -> Step:
    from ranx import Qrels, Run, evaluate

    names = ["ndcg@10", "recall@100", "map", "mrr", "precision@10"]
    evaluate(Qrels({"q": {"d": 1}}), Run({"q": {"d": 1.0}}), names)
    return data, lambda d: evaluate(Qrels.from_file(str(d / "qrels.txt"), kind="trec"),
                                    Run.from_file(str(d / "run.txt"), kind="trec"), names,
                                    make_comparable=True)


STEPS = {
    ("bench", "memory"): _bench_memory, ("bench", "files"): _bench_files,
    ("bench-bytes-ids", "memory"): _bench_bytes_memory,
    ("pytrec_eval", "memory"): _pytrec_memory, ("pytrec_eval", "files"): _pytrec_files,
    ("ranx", "memory"): _ranx_memory, ("ranx", "files"): _ranx_files,
}


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(engine: str, mode: str, data: Path) -> None:
    """Measure one step's memory in this fresh process; print JSON."""
    if engine.startswith("bench"):
        import bench_kernels

        bench_kernels.warmup()  # loads the kernels the step uses (from the disk cache)
    before_setup = _rss_kib("VmRSS")
    state, step = STEPS[(engine, mode)](data)
    before = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to now
    step(state)
    print(json.dumps({"structure_mib": (before - before_setup) / 1024,
                      "peak_mib": (_rss_kib("VmHWM") - before) / 1024}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--docs", type=int, default=100)
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per engine (memory)")
    p.add_argument("--file-reps", type=int, default=3, help="repetitions end to end")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-memory", action="store_true", help="skip the subprocess memory runs")
    p.add_argument("--child", nargs=3, metavar=("ENGINE", "MODE", "DATA"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], args.child[1], Path(args.child[2]))
        return 0

    engines = ["bench", "bench-bytes-ids", "pytrec_eval"]
    try:
        import ranx  # noqa: F401

        engines.append("ranx")
    except ImportError:
        pass
    import bench_kernels

    bench_kernels.warmup()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        t0 = time.perf_counter()
        make_data(args.queries, args.docs, args.seed, data)
        print(f"data: {args.queries} queries x {args.docs} docs in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        times: dict[tuple[str, str], list[float]] = {}
        for mode, reps in (("memory", args.reps), ("files", args.file_reps)):
            prepared = {e: STEPS[(e, mode)](data) for e in engines if (e, mode) in STEPS}
            for _ in range(reps):
                for e in prepared:  # interleaved: drift in machine speed hits every engine
                    state, step = prepared[e]
                    t = time.perf_counter()
                    step(state)
                    times.setdefault((e, mode), []).append(time.perf_counter() - t)
            del prepared
        memory: dict[tuple[str, str], dict[str, float]] = {}
        if not args.no_memory:
            for key in STEPS:
                if key[0] in engines:
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", key[0], key[1], str(data)],
                        capture_output=True, text=True, check=True).stdout
                    memory[key] = json.loads(out.strip().splitlines()[-1])
    print(_table(args, engines, times, memory))
    return 0


def _table(args: argparse.Namespace, engines: list[str], times: dict, memory: dict) -> str:
    n = args.queries
    lines = [f"n = {n} queries x {args.docs} docs; metrics {', '.join(METRICS)}; "
             f"medians of {args.reps} (memory) / {args.file_reps} (files) interleaved reps",
             "",
             "| mode | engine | median s | queries/s | speed-up vs pytrec_eval | "
             "structure MiB | peak MiB during step |",
             "|---|---|---|---|---|---|---|"]
    for mode in ("memory", "files"):
        ref = statistics.median(times[("pytrec_eval", mode)])
        for e in engines:
            if (e, mode) not in times:
                continue
            med = statistics.median(times[(e, mode)])
            mem = memory.get((e, mode), {})
            struct = f"{mem['structure_mib']:.1f}" if mem and mode == "memory" else "-"
            peak = f"{mem['peak_mib']:.1f}" if mem else "-"
            lines.append(f"| {mode} | {e} | {med:.3f} | {n / med:,.0f} | {ref / med:.2f}x | "
                         f"{struct} | {peak} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
