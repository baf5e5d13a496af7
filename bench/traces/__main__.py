"""``python -m bench.traces COMMAND ...`` (docs/traces.md).

- ``import FILE... --out DIR [--corpus CORPUS.jsonl]``: trace exports -> ``DIR/records.jsonl``
  (one record per request) and ``DIR/import.json`` (counts per file and reason);
- ``sample RECORDS --out SAMPLE.jsonl [--rate 0.02 --seed 0 --by route|tenant ...]``;
- ``review queue SAMPLE --out QUEUE.jsonl`` / ``review merge QUEUE --corpus C --golden G
  --out NEW.jsonl``: the review queue and the merge of reviewed rows into a golden set;
- ``drift REFERENCE CURRENT``: MMD and classifier two-sample tests on query embeddings;
- ``stability PROBES --corpus C --from A --to B``: nearest-neighbour stability of a probe set
  across embedder versions (overlap@k, RBO, with CIs);
- ``writeback SCORES --out EVENTS.jsonl [--endpoint URL]`` / ``evaluations EVENTS``: scores
  as ``gen_ai.evaluation.result`` OTLP events (also sent to an OTLP/HTTP endpoint), and
  reading them back; ``send FILE --endpoint URL``: a file's events and spans to an endpoint;
- ``replay RECORDS --candidate NAME=URL...``: shadow replay through candidate configs served
  by ``bench.serve``: agreement with production (overlap@k, RBO) and latency, with CIs;
  ``--generate`` asks the candidates for answers too (``/v1/answer``).

Bad input (a file in no supported format, a span without a query, a window too small for
the drift test) is one line naming file:line and exit 2, before anything is written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from bench.docs import TRACES
from bench.metrics.cli import OneLineParser, run_cli


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench.traces",
                      description="Production traces: import, sample, review, drift, "
                                  "evaluation write-back.", epilog=TRACES.help_line())
    sub = p.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="trace exports -> records.jsonl")
    imp.add_argument("files", nargs="+", type=Path)
    imp.add_argument("--out", type=Path, required=True, help="output folder")
    imp.add_argument("--corpus", type=Path, default=None,
                     help="corpus JSONL the retrieved ids are resolved against")
    smp = sub.add_parser("sample", help="uniform sample + oversampled strata, with weights")
    smp.add_argument("records", type=Path)
    smp.add_argument("--out", type=Path, required=True)
    smp.add_argument("--seed", type=int, default=0)
    smp.add_argument("--rate", type=float, default=0.02, help="uniform sampling rate")
    smp.add_argument("--thumbs-down-rate", type=float, default=1.0)
    smp.add_argument("--regenerated-rate", type=float, default=0.5)
    smp.add_argument("--low-confidence-rate", type=float, default=0.5)
    smp.add_argument("--low-confidence-below", type=float, default=0.3)
    smp.add_argument("--by", choices=("route", "tenant"), default=None)
    smp.add_argument("--per-group", type=int, default=5)
    rev = sub.add_parser("review", help="review queue and merge into a golden set")
    rsub = rev.add_subparsers(dest="review_command", required=True)
    q = rsub.add_parser("queue", help="sample -> review queue JSONL")
    q.add_argument("sample", type=Path)
    q.add_argument("--out", type=Path, required=True)
    m = rsub.add_parser("merge", help="reviewed queue rows -> golden rows (monitoring split)")
    m.add_argument("queue", type=Path)
    m.add_argument("--corpus", type=Path, required=True)
    m.add_argument("--golden", type=Path, required=True, help="the existing golden queries")
    m.add_argument("--out", type=Path, required=True, help="merged golden queries JSONL")
    d = sub.add_parser("drift", help="two-sample tests on query embeddings")
    d.add_argument("reference", type=Path, help="records.jsonl or golden queries JSONL")
    d.add_argument("current", type=Path, help="records.jsonl or golden queries JSONL")
    d.add_argument("--alpha", type=float, default=0.05)
    d.add_argument("--permutations", type=int, default=500)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--min-window", type=int, default=20)
    d.add_argument("--out", type=Path, default=None, help="drift.json")
    st = sub.add_parser("stability", help="nearest-neighbour stability of probe queries "
                                          "across embedder versions")
    st.add_argument("probes", type=Path, help="records.jsonl or golden queries JSONL")
    st.add_argument("--corpus", type=Path, required=True, help="corpus JSONL")
    st.add_argument("--from", dest="reference", required=True,
                    help="the current embedder (conf/embedder/NAME.yaml)")
    st.add_argument("--to", dest="candidate", action="append", required=True,
                    help="the new embedder version (repeatable)")
    st.add_argument("--k", type=int, default=10)
    st.add_argument("--limit", type=int, default=0, help="first N probes only (0: all)")
    st.add_argument("--seed", type=int, default=0)
    st.add_argument("--out", type=Path, default=None, help="stability.json")
    w = sub.add_parser("writeback", help="scores -> gen_ai.evaluation.result OTLP JSON")
    w.add_argument("scores", type=Path, help="JSONL {trace_id, span_id, name, value|label, "
                                             "explanation?}")
    w.add_argument("--out", type=Path, required=True)
    _endpoint_flags(w, required=False)
    snd = sub.add_parser("send", help="an OTLP JSON file's evaluation events and spans to an "
                                      "OTLP/HTTP endpoint")
    snd.add_argument("file", type=Path, help="OTLP JSON lines (writeback's, bench.serve's)")
    _endpoint_flags(snd, required=True)
    e = sub.add_parser("evaluations", help="read gen_ai.evaluation.result events back")
    e.add_argument("events", type=Path)
    r = sub.add_parser("replay", help="shadow replay through candidate bench.serve configs")
    r.add_argument("records", type=Path, help="records.jsonl (or a sample's records)")
    r.add_argument("--candidate", action="append", required=True, metavar="NAME=URL",
                   help="a bench.serve base URL serving a candidate config (repeatable)")
    r.add_argument("--generate", action="store_true",
                   help="ask /v1/answer (a candidate served with a generator): the rows keep "
                        "its answers and prompt documents; latency is then the answer's")
    r.add_argument("--out", type=Path, default=None, help="replay.json")
    return p


def _endpoint_flags(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--endpoint", required=required, default=None,
                   help="OTLP/HTTP base URL (http://host:4318); /v1/logs, /v1/traces appended")
    p.add_argument("--header", action="append", metavar="NAME=ENV_VAR",
                   help="a header whose value is read from ENV_VAR (repeatable)")
    p.add_argument("--timeout-s", type=float, default=10.0, help="per request")
    p.add_argument("--batch", type=int, default=100, help="events per request")
    p.add_argument("--delivery", type=Path, default=None,
                   help="JSONL of every event's delivery status")


def _import(a: argparse.Namespace) -> int:
    from bench.data.golden import read_corpus
    from bench.data.jsonl import write_jsonl
    from bench.errors import InputError
    from bench.results.write import atomic_write_bytes
    from bench.traces.importer import import_traces
    from bench.traces.record import record_to_json

    corpus = read_corpus(a.corpus) if a.corpus is not None else None
    results = [import_traces(f, corpus=corpus) for f in a.files]  # every file checked first
    records = [r for recs, _ in results for r in recs]
    first: dict[str, str] = {}
    for r in records:
        if r.trace_id in first:
            path, _, line = r.source.rpartition(":")
            raise InputError(path, int(line) if line.isdigit() else 0,
                             f"trace {r.trace_id} is also in {first[r.trace_id]}: import each "
                             "trace once")
        first[r.trace_id] = r.source
    records.sort(key=lambda r: (r.timestamp_ns, r.trace_id))
    write_jsonl(a.out / "records.jsonl", (record_to_json(r) for r in records))
    atomic_write_bytes(a.out / "import.json", json.dumps(
        {"files": [rep.to_json() for _, rep in results], "records": len(records)},
        indent=2).encode())
    for _, rep in results:
        print("\n".join(rep.lines()))
    print(f"{a.out / 'records.jsonl'}: {len(records)} records")
    return 0


def _sample(a: argparse.Namespace) -> int:
    from bench.data.jsonl import write_jsonl
    from bench.traces.importer import read_records
    from bench.traces.sample import SamplingPlan, draw, sampled_to_json

    plan = SamplingPlan(seed=a.seed, uniform_rate=a.rate, thumbs_down_rate=a.thumbs_down_rate,
                        regenerated_rate=a.regenerated_rate,
                        low_confidence_rate=a.low_confidence_rate,
                        low_confidence_below=a.low_confidence_below, by=a.by,
                        per_group=a.per_group).check()
    records = read_records(a.records)
    rows = draw(records, plan)
    write_jsonl(a.out, (sampled_to_json(s) for s in rows))
    n_uni = sum(1 for s in rows if s.in_uniform)
    print(f"{a.out}: {len(rows)} of {len(records)} records ({n_uni} uniform at rate "
          f"{plan.uniform_rate}, {len(rows) - n_uni} from strata only)")
    return 0


def _replay(a: argparse.Namespace) -> int:
    from dataclasses import asdict

    from bench.errors import ConfigError
    from bench.traces.importer import read_records
    from bench.traces.replay import replay, summarize, table

    cands = []
    for c in a.candidate:
        name, sep, url = c.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise ConfigError("--candidate", f"{c!r}: give NAME=http://host:port")
        cands.append((name, url))
    records = read_records(a.records)
    rows = [row for name, url in cands
            for row in replay(records, name, url, generate=a.generate)]
    summaries = summarize(rows)
    print(table(summaries))
    if a.out is not None:
        from bench.results.write import atomic_write_bytes

        atomic_write_bytes(a.out, json.dumps({"rows": [asdict(r) for r in rows],
                                              "summary": [asdict(s) for s in summaries]},
                                             indent=2, default=str).encode())
    return 0


def _body(argv: Sequence[str] | None) -> int:
    a = _parser().parse_args(argv)
    if a.command == "import":
        return _import(a)
    if a.command == "sample":
        return _sample(a)
    if a.command == "review":
        from bench.traces import review

        return review.cli(a)
    if a.command == "replay":
        return _replay(a)
    if a.command == "drift":
        from bench.traces import drift

        return drift.cli(a)
    if a.command == "stability":
        from bench.traces import stability

        return stability.cli(a)
    from bench.traces import evaluations

    return evaluations.cli(a)


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(_body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
