"""scripts/aiperf_side_by_side.py: AIPerf's own per-request log, read by bench's importer,
gives AIPerf's own summary numbers where the definitions are the same.

Runs only where AIPerf's venv exists: set ``BENCH_AIPERF`` to its ``aiperf`` executable
(AIPerf 0.13.0 would downgrade packages of bench's venv, so it is never a dependency; see
docs/experiments/capacity_http.md). Without it the test is skipped, saying so."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bench.capacity.interop import import_aiperf
from bench.capacity.servers import Served

ROOT = Path(__file__).resolve().parents[2]
AIPERF = os.environ.get("BENCH_AIPERF", "")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not Path(AIPERF).is_file(), reason="AIPerf's own venv: set BENCH_AIPERF to its aiperf "
                                       "executable (docs/experiments/capacity_http.md)")]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("aiperf_side_by_side",
                                                  ROOT / "scripts" / "aiperf_side_by_side.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["aiperf_side_by_side"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_bench_reads_aiperf_log_as_aiperf_summarises_it(tmp_path: Path) -> None:
    sbs = _load()
    pairs = sbs.prompts(20)
    answers, data = tmp_path / "answers.jsonl", tmp_path / "prompts.jsonl"
    import json

    answers.write_text("".join(json.dumps({"query": q, "answer": a}) + "\n" for q, a in pairs))
    data.write_text("".join(json.dumps({"text": q}) + "\n" for q, _ in pairs))
    argv = [sys.executable, "-m", "bench.capacity.services.chat", "--port", "{port}",
            "--slots", "4", "--prefill-ms", "20", "--tpot-ms", "5", "--answers", str(answers)]
    with Served(argv, log_path=tmp_path / "chat.log") as srv:
        recs, summ, _ = sbs.run_aiperf(AIPERF, srv.url, data, 10.0, 30, tmp_path / "aiperf",
                                       0, str(sbs.tokenizer_dir()))
    s = sbs.aiperf_summary(summ)
    send = import_aiperf(recs, origin="send")
    credit = import_aiperf(recs, origin="credit")
    assert send.completed == s["request_count"]["avg"] == 30
    # one log, two implementations: where the definitions are one, the same numbers to the
    # microsecond (AIPerf's percentiles are linear like numpy's; it computes in integer ns)
    for ours, theirs in ((send.ttft, s["time_to_first_token"]),
                         (credit.e2el, s["effective_latency"]),
                         (credit.send_lag, s["credit_to_start_latency"])):
        assert ours.mean == pytest.approx(theirs["avg"], abs=1e-3)
        for p in ("p50", "p90", "p99"):
            assert ours.percentiles[p] == pytest.approx(theirs[p], abs=1e-3)
    # AIPerf's request_latency (and its TPOT) end at the last content chunk, bench's at the
    # end of the stream (request_end_ns): later, by the [DONE] event's read
    for ours, theirs in ((send.e2el, s["request_latency"]), (send.tpot, s["inter_token_latency"])):
        assert theirs["avg"] <= ours.mean + 1e-6
        assert ours.mean == pytest.approx(theirs["avg"], abs=1.0)
        assert ours.percentiles["p50"] == pytest.approx(theirs["p50"], abs=1.0)
    # from the credit issue, latency is never shorter than from the send
    assert credit.e2el.mean > send.e2el.mean
    # the scripted answers came back whole: 8-40 words each, more tokens than words in
    # AIPerf's count (the MiniLM WordPiece tokenizer splits some of them)
    words = sum(len(a.split()) for _, a in pairs[:20]) + sum(len(a.split()) for _, a in pairs[:10])
    assert send.extra["total_output_tokens"] >= words
