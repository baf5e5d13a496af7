"""Sampling (uniform apart from strata, inclusion probabilities that keep estimates honest)
and the review queue -> golden set merge with provenance and the contamination check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from trace_fixtures import CORPUS, write_corpus

from bench.data.golden import read_queries
from bench.errors import ConfigError
from bench.traces.__main__ import main
from bench.traces.record import RetrievedDoc, TraceRecord, record_to_json
from bench.traces.sample import SamplingPlan, draw, estimate


def _window(n: int, *, thumbs_down_every: int = 20, seed: int = 0) -> list[TraceRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(TraceRecord(
            trace_id=f"{seed:04x}{i:028x}", span_id=f"{i:016x}", source_format="otlp",
            source=f"f:{i + 1}", timestamp_ns=i, query=f"question {i}",
            documents=(RetrievedDoc(f"d{i % 6}", 1, float(rng.uniform(0, 1))),),
            thumbs=-1 if i % thumbs_down_every == 0 else 0,
            route="faq" if i % 10 == 0 else "search"))
    return out


def test_uniform_rate_and_strata_are_separate() -> None:
    window = _window(5000)
    plan = SamplingPlan(seed=3, uniform_rate=0.02, low_confidence_rate=0.0,
                        regenerated_rate=0.0)
    rows = draw(window, plan)
    uni = [s for s in rows if s.in_uniform]
    # Binomial(5000, 0.02): mean 100, sd 9.9
    assert abs(len(uni) - 100) < 4 * (5000 * 0.02 * 0.98) ** 0.5
    down = [s for s in rows if "thumbs_down" in s.designs]
    assert len(down) == 5000 // 20  # rate 1.0: every thumbs-down record
    for s in rows:  # pi: the chance ANY design draws the record
        assert s.pi == pytest.approx(1 - (1 - 0.02) * (1 - (1.0 if s.record.thumbs < 0
                                                                 else 0.0)))
    # same seed, same sample; the sample of a record does not depend on the window's order
    assert [s.record.trace_id for s in draw(window[::-1], plan)][::-1] == [
        s.record.trace_id for s in rows]


def test_estimates_stay_honest_under_oversampling() -> None:
    """Thumbs-down traffic share is 5 %; the strata oversample it 50x. The uniform rows
    (1/p_uniform) and all rows (1/pi) both estimate 5 % without bias over seeds; the raw
    share in the sample does not."""
    window = _window(2000)
    truth = sum(r.thumbs < 0 for r in window) / len(window)
    uni, ht, raw = [], [], []
    for seed in range(60):
        rows = draw(window, SamplingPlan(seed=seed, uniform_rate=0.05, low_confidence_rate=0,
                                         regenerated_rate=0))
        e = estimate(rows, lambda r: float(r.thumbs < 0), len(window))
        uni.append(e.uniform)
        ht.append(e.weighted)
        raw.append(sum(s.record.thumbs < 0 for s in rows) / len(rows))
    assert truth == pytest.approx(0.05)
    assert np.mean(uni) == pytest.approx(truth, abs=0.01)
    assert np.mean(ht) == pytest.approx(truth, abs=0.01)
    assert np.mean(raw) > 0.4  # the unweighted share is badly biased


def test_groups_get_their_quota() -> None:
    window = _window(1000)
    rows = draw(window, SamplingPlan(seed=1, uniform_rate=0.001, thumbs_down_rate=0,
                                     low_confidence_rate=0, regenerated_rate=0, by="route",
                                     per_group=30))
    faq = [s for s in rows if "route:faq" in s.designs]
    search = [s for s in rows if "route:search" in s.designs]
    assert 10 < len(faq) < 50 and 10 < len(search) < 50  # 30 expected each, 100 vs 900 rows


def test_bad_plan() -> None:
    with pytest.raises(ConfigError, match="uniform_rate"):
        SamplingPlan(uniform_rate=1.5).check()


def _write_records(path: Path, records: list[TraceRecord]) -> Path:
    path.write_text("".join(json.dumps(record_to_json(r)) + "\n" for r in records))
    return path


def test_queue_and_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    window = _window(200)
    window[0] = window[0].with_(query="What is document zero about?")
    window[20] = window[20].with_(query="How do I reset the device?")
    recs = _write_records(tmp_path / "records.jsonl", window)
    assert main(["sample", str(recs), "--out", str(tmp_path / "s.jsonl"), "--rate", "0.05",
                 "--low-confidence-rate", "0", "--regenerated-rate", "0"]) == 0
    assert main(["review", "queue", str(tmp_path / "s.jsonl"), "--out",
                 str(tmp_path / "q.jsonl")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert all(r["status"] == "pending" and r["must_abstain"] is None for r in rows)
    by_trace = {r["trace_id"]: r for r in rows}
    # both thumbs-down records of the hand-set queries are in the queue (rate 1.0)
    a, b = by_trace[window[0].trace_id], by_trace[window[20].trace_id]
    a.update(status="done", relevant_document_ids=["d0"], must_abstain=False,
             category="semantic_lookup", reviewer="ann", reviewed_at="2026-12-01")
    # b repeats a release query almost word for word: left out by the contamination check
    b.update(status="done", must_abstain=True, category="unanswerable", reviewer="bo",
             reviewed_at="2026-12-02")
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"query_id": "g1", "query": "how do i reset the device",
                                  "relevant_document_ids": ["d3"], "split": "release"}) + "\n")
    assert main(["review", "merge", str(tmp_path / "q.jsonl"), "--corpus", str(corpus),
                 "--golden", str(golden), "--out", str(tmp_path / "merged.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "1 new in the monitoring split" in out and "1 left out as near-duplicates" in out
    merged = read_queries(tmp_path / "merged.jsonl", {d.doc_id for d in CORPUS})
    assert [q.query_id for q in merged] == ["g1", f"trace-{window[0].trace_id}"]
    new = merged[1]
    assert new.split == "monitoring" and new.qrels == (("d0", 1),)
    assert dict(new.provenance) == {"source": "production-trace",
                                    "trace_id": window[0].trace_id,
                                    "span_id": window[0].span_id, "reviewer": "ann",
                                    "date": "2026-12-01"}
    # merging the same queue again adds nothing
    assert main(["review", "merge", str(tmp_path / "q.jsonl"), "--corpus", str(corpus),
                 "--golden", str(tmp_path / "merged.jsonl"), "--out",
                 str(tmp_path / "m2.jsonl")]) == 0
    assert "0 new" in capsys.readouterr().out
    # a reviewed row naming an unknown document: one line with the queue's file:line
    rows[0].update(status="done", relevant_document_ids=["nope"], must_abstain=False,
                   reviewer="x", reviewed_at="2026-12-01")
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["review", "merge", str(tmp_path / "bad.jsonl"), "--corpus", str(corpus),
                 "--golden", str(golden), "--out", str(tmp_path / "m3.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path / 'bad.jsonl'}:1: relevant_document_ids names unknown document 'nope' "
        "(not in the corpus)")
