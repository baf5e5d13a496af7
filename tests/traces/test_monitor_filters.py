"""The filter false-exclusion guardrail: the rate over labelled filtered requests, its
request-level bootstrap CI, an alert only when the CI clears the bound (so a small labelled
sample does not alert on the same rate a large one does), and the filter read from traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_monitor import T0, _write
from trace_fixtures import otlp_file, write_corpus

from bench.data.base import Document
from bench.monitor.__main__ import main
from bench.monitor.rules import false_exclusions, ratio_ci
from bench.traces.importer import import_traces
from bench.traces.record import RetrievedDoc, TraceRecord

#: n0..n4 tagged net, b0..b4 tagged db, x0 tagged db but another tenant's
DOCS = (*(Document(f"n{i}", "t", tags=("net",)) for i in range(5)),
        *(Document(f"b{i}", "t", tags=("db",)) for i in range(5)),
        Document("x0", "t", tags=("db",), tenant="other"))


def _rec(i: int, tags: tuple[str, ...] = ("net",), tenant: str = "acme") -> TraceRecord:
    return TraceRecord(trace_id=f"{i:032x}", span_id=f"{i:016x}", source_format="otlp",
                       source=f"f:{i}", timestamp_ns=T0 + i * 10**9, query=f"q{i}",
                       documents=(RetrievedDoc("n0", 1, 0.5),), total_ms=10.0,
                       tenant=tenant, filter_tags=tags)


def _golden(path: Path, labels: dict[int, list[str]]) -> None:
    path.write_text("".join(json.dumps({
        "query_id": f"trace-{i:032x}", "query": f"q{i}", "category": "c",
        "relevant_document_ids": rel, "split": "monitoring", "tenant": "acme",
        "provenance": {"source": "production-trace", "trace_id": f"{i:032x}"}}) + "\n"
        for i, rel in labels.items()))


def _run(tmp: Path, n: int, excluded_every: int, *, bound: float, min_labelled: int = 3
         ) -> dict[str, object]:
    """n filtered (tag net) requests, each labelled with n0 + n1; every `excluded_every`-th
    has b0 + b1 instead (both ruled out by the filter)."""
    write_corpus(tmp / "corpus.jsonl", DOCS)
    _golden(tmp / "golden.jsonl", {i: (["b0", "b1"] if i % excluded_every == 0 else
                                       ["n0", "n1"]) for i in range(n)})
    rules, window = _write(tmp, [_rec(i) for i in range(n)], (
        f"rules:\n  filter_false_exclusion: {{bound: {bound}, labels: golden.jsonl, corpus: "
        f"corpus.jsonl, min_labelled: {min_labelled}}}\n"))
    rc = main([str(rules), str(window), "--out", str(tmp / "m.json")])
    out = json.loads((tmp / "m.json").read_text())["outcomes"][0]
    out["rc"] = rc
    return dict(out)


def test_rate_is_relevant_docs_the_filter_ruled_out(tmp_path: Path) -> None:
    recs = [_rec(0), _rec(1), _rec(2, tags=()), _rec(3), _rec(4, tags=("db", "net"))]
    labels = {f"{0:032x}": ("n0", "b0"),   # b0 lacks net: 1 of 2 excluded
              f"{1:032x}": ("b1", "x0"),   # x0 is another tenant's: not eligible; 1 of 1
              f"{2:032x}": ("b2",),        # no filter: not counted
              # 3: no label, not counted
              f"{4:032x}": ("b3", "n3")}   # db or net: nothing excluded
    ex = false_exclusions(recs, labels, {d.doc_id: d for d in DOCS})
    assert ex.trace_ids == (f"{0:032x}", f"{1:032x}", f"{4:032x}")
    assert ex.eligible.tolist() == [2, 1, 2] and ex.excluded.tolist() == [1, 1, 0]
    v, lo, hi = ratio_ci(ex.excluded, ex.eligible)
    assert v == pytest.approx((1 + 1 + 0) / (2 + 1 + 2))
    assert 0.0 <= lo <= v <= hi <= 1.0


def test_alert_needs_the_ci_above_the_bound(tmp_path: Path) -> None:
    # 1 request in 4 fully excluded: rate 2 / 8 = 0.25 either way
    small = _run(tmp_path, 4, 4, bound=0.1)
    assert small["value"] == pytest.approx(0.25) and small["n"] == 4
    assert small["status"] == "pass" and small["rc"] == 0  # CI of 4 requests reaches 0
    assert small["ci"][0] <= 0.1 < small["ci"][1]  # type: ignore[index]
    big = _run(tmp_path, 200, 4, bound=0.1)
    assert big["value"] == pytest.approx(0.25) and big["n"] == 200
    assert big["status"] == "alert" and big["rc"] == 3
    lo, hi = big["ci"]  # type: ignore[misc]
    assert 0.1 < lo < 0.25 < hi
    # below the bound: pass
    ok = _run(tmp_path, 200, 20, bound=0.1)
    assert ok["value"] == pytest.approx(0.05) and ok["status"] == "pass"


def test_too_few_labelled_requests_is_no_data(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    got = _run(tmp_path, 5, 2, bound=0.1, min_labelled=20)
    assert got["status"] == "no_data" and got["n"] == 5 and got["rc"] == 0
    assert "filter_false_exclusion: no data" in capsys.readouterr().out


def test_missing_labels_file_is_one_line(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    write_corpus(tmp_path / "corpus.jsonl", DOCS)
    rules, window = _write(tmp_path, [_rec(0)], "rules:\n  filter_false_exclusion:\n"
                           "    bound: 0.1\n    labels: nope.jsonl\n    corpus: corpus.jsonl\n")
    assert main([str(rules), str(window)]) == 2
    assert capsys.readouterr().err.startswith(
        f"{rules}:4: rules.filter_false_exclusion.labels: file not found")


def test_filter_tags_are_read_from_spans(tmp_path: Path) -> None:
    otlp_file(tmp_path / "s.jsonl", [
        {"query": "a", "docs": [("d1", 0.9)], "attributes": {"bench.filter.tags": "net, db"}},
        {"query": "b", "docs": [("d1", 0.9)]}])
    recs, _ = import_traces(tmp_path / "s.jsonl")
    assert sorted(r.filter_tags for r in recs) == [(), ("db", "net")]
