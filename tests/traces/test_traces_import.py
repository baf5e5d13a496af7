"""Trace import: one record per request from each format, ids resolved against a corpus, PII
scrubbed, bad input one line naming file:line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trace_fixtures import (
    CORPUS,
    langfuse_file,
    openinference_otlp_file,
    otlp_file,
    phoenix_frame,
    write_corpus,
)

from bench.errors import InputError
from bench.traces.__main__ import main
from bench.traces.importer import corpus_fingerprint, import_traces, read_records
from bench.traces.pii import scrub

REQUESTS = [
    {"query": "what is d1? reply to ann@corp.com", "docs": [("d1", 0.9), ("d2", 0.5)],
     "answer": "d1 is a document", "tenant": "acme",
     "attributes": {"user.id": "u7", "bench.route": "faq", "bench.feedback.thumbs": -1}},
    {"query": "and d3", "docs": [("d3", 0.7), ("gone", 0.2)], "answer": "d3",
     "attributes": {"bench.feedback.regenerated": True}},
    {"query": "retrieve only", "docs": [("d4", 0.3)]},
]


def test_otlp_from_the_sdk(tmp_path: Path) -> None:
    ids = otlp_file(tmp_path / "spans.jsonl", REQUESTS, fingerprint=corpus_fingerprint(CORPUS))
    recs, rep = import_traces(tmp_path / "spans.jsonl", corpus=CORPUS)
    assert rep.format == "otlp" and rep.records == 3 and rep.traces == 3
    # 1 root + retrieval + 2 stages (+ chat for answered ones)
    assert rep.spans == 2 * 5 + 4
    assert [(r.trace_id, r.span_id) for r in recs] == ids
    a, b, c = recs
    assert a.query == "what is d1? reply to <EMAIL>" and a.pii_scrubbed == 1
    assert [d.doc_id for d in a.documents] == ["d1", "d2"] and a.documents[0].rank == 1
    assert a.documents[0].score == pytest.approx(0.9)
    assert a.documents[0].content == "content of d1"
    assert a.answer == "d1 is a document" and a.model == "smollm2"
    assert (a.input_tokens, a.output_tokens, a.ttft_ms) == (100, 20, pytest.approx(12.5))
    assert a.total_ms == pytest.approx(80.0)
    stages = dict(a.stage_ms)
    assert stages["embed"] == pytest.approx(4.0) and stages["search"] == pytest.approx(6.0)
    assert stages["retrieval"] == pytest.approx(4.0 + 6.0)
    assert stages["chat smollm2"] == pytest.approx(70.0 - 20.0)
    assert (a.tenant, a.user, a.route, a.thumbs) == ("acme", "u7", "faq", -1)
    assert b.regenerated and b.thumbs == 0
    assert b.unknown_ids == ("gone",) and b.resolved == 1
    assert c.partial == ("no_generation_span",) and c.answer is None
    assert rep.docs_resolved == 2 + 1 + 1 and rep.docs_unknown == 1
    assert rep.partial == {"no_generation_span": 1} and rep.fingerprint_mismatch == 0


def test_fingerprint_mismatch_is_said(tmp_path: Path) -> None:
    otlp_file(tmp_path / "spans.jsonl", REQUESTS[:1], fingerprint="f" * 64)
    _, rep = import_traces(tmp_path / "spans.jsonl", corpus=CORPUS)
    assert rep.fingerprint_mismatch == 1
    assert any("corpus fingerprint differs" in line for line in rep.lines())


def test_openinference_spans_over_otlp(tmp_path: Path) -> None:
    openinference_otlp_file(tmp_path / "oi.jsonl")
    (r,), rep = import_traces(tmp_path / "oi.jsonl", corpus=CORPUS)
    assert rep.format == "otlp"
    assert r.query == "where is d1?" and [d.doc_id for d in r.documents] == ["d1", "d2"]
    assert r.documents[0].content == "text of document 1"
    assert r.answer == "d1 is here" and (r.input_tokens, r.output_tokens) == (30, 4)
    assert r.tenant == "acme" and r.model == "gpt-x"


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_phoenix_dataframe(tmp_path: Path, kind: str) -> None:
    df = phoenix_frame(3)
    path = tmp_path / f"spans.{kind}"
    if kind == "parquet":
        df.to_parquet(path)
    else:
        df.to_json(path, orient="records", lines=True, date_format="iso")
    recs, rep = import_traces(path, corpus=CORPUS)
    assert rep.format == "openinference" and rep.records == 3 and rep.spans == 6
    assert [r.query for r in recs] == [f"question {i} from <EMAIL>" for i in range(3)]
    assert recs[0].thumbs == -1 and recs[1].thumbs == 1 and recs[0].tenant == "t1"
    assert recs[0].answer == "answer 0" and recs[0].output_tokens == 5
    assert rep.docs_resolved == 3 and rep.docs_unknown == 3 and rep.records_with_unknown == 3
    assert recs[0].total_ms == pytest.approx(90.0)  # first start to last end (two roots)


def test_langfuse_observations(tmp_path: Path) -> None:
    langfuse_file(tmp_path / "obs.json")
    recs, rep = import_traces(tmp_path / "obs.json", corpus=CORPUS)
    assert rep.format == "langfuse" and rep.records == 2
    r0, r1 = recs
    assert r0.query == "lookup 0, call <PHONE>"
    assert [d.doc_id for d in r0.documents] == ["d0", "d1"]
    assert r0.ttft_ms == pytest.approx(50.0) and r0.total_ms == pytest.approx(240.0)
    assert (r0.input_tokens, r0.output_tokens, r0.model) == (70, 9, "claude-x")
    assert r0.cost_usd == pytest.approx(0.0004) and r0.route == "faq"
    assert r1.regenerated and not r0.regenerated


def test_cli_writes_records_and_report(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    otlp_file(tmp_path / "a.jsonl", REQUESTS)
    langfuse_file(tmp_path / "b.json")
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    assert main(["import", str(tmp_path / "a.jsonl"), str(tmp_path / "b.json"),
                 "--corpus", str(corpus), "--out", str(tmp_path / "out")]) == 0
    recs = read_records(tmp_path / "out" / "records.jsonl")
    assert len(recs) == 3 + 2
    report = json.loads((tmp_path / "out" / "import.json").read_text())
    assert [f["format"] for f in report["files"]] == ["otlp", "langfuse"]
    assert report["records"] == 5
    # read(write(x)) == x
    again, _ = import_traces(tmp_path / "a.jsonl", corpus=CORPUS)
    assert [r for r in recs if r.source_format == "otlp"] == again


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = ["--out", str(tmp_path / "o")]
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    assert _one_line_exit_2(["import", str(other), *out], capsys).startswith(
        f"{other}:1: not a trace export")
    # a retrieval span without its query attribute: named by file:line
    otlp_file(tmp_path / "s.jsonl", REQUESTS[:2])
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    first = next(i for i, ln in enumerate(lines) if "gen_ai.retrieval.query.text" in ln)
    bad = [ln.replace('"gen_ai.retrieval.query.text"', '"x.query"') if i == first else ln
           for i, ln in enumerate(lines)]
    (tmp_path / "noq.jsonl").write_text("\n".join(bad) + "\n")
    err = _one_line_exit_2(["import", str(tmp_path / "noq.jsonl"), *out], capsys)
    assert err.startswith(f"{tmp_path / 'noq.jsonl'}:{first + 1}: retrieval span ")
    assert "has no query attribute" in err
    # nothing resolves: refused as a whole
    corpus = write_corpus(tmp_path / "c.jsonl", CORPUS[5:])
    otlp_file(tmp_path / "u.jsonl", [REQUESTS[0]])
    err = _one_line_exit_2(["import", str(tmp_path / "u.jsonl"), "--corpus", str(corpus),
                            *out], capsys)
    assert "none of the 2 retrieved document ids resolves" in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(InputError):
        import_traces(tmp_path / "missing.jsonl")


def test_pii_baseline() -> None:
    text = ("mail a.b@x.org, card 4111 1111 1111 1111, order 1234567890123, "
            "ssn 123-45-6789, ip 10.0.0.1, phone +1 (415) 555-2671, IBAN DE89 3704 0044 "
            "0532 0130 00")
    out, n = scrub(text)
    for label in ("<EMAIL>", "<CARD>", "<SSN>", "<IP>", "<PHONE>", "<IBAN>"):
        assert label in out
    assert "4111" not in out and "a.b@x.org" not in out
    assert n == 6
    assert scrub("what does FOLDOC say about TCP/IP in 1983?") == (
        "what does FOLDOC say about TCP/IP in 1983?", 0)
