"""Passages longer than the embedder's maximum length: counted in run.json, warned about in
the log and in the report header, whatever the chunker (synthetic corpus, seconds, CPU)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate

from bench.pipeline.run import run

MAX_LEN = 16  # tokens, [CLS] and [SEP] included: 14 of content


@pytest.mark.parametrize("chunker", ["none", "fixed_tokens"])
def test_truncated_passages_are_counted_logged_and_reported(
        chunker: str, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        compose_cfg) -> None:  # type: ignore[no-untyped-def]
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}",
                       f"chunker={chunker}", f"embedder.max_seq_length={MAX_LEN}",
                       "metrics.bootstrap_resamples=200"])
    with caplog.at_level(logging.WARNING, logger="bench"):
        res = run(cfg, tmp_path / "run")
    manifest = json.loads((res.run_dir / "run.json").read_text())
    n_chunks = manifest["dataset"]["chunks"]
    # count the long passages independently of the embedding stage: chunk again, tokenize
    embedder = instantiate(cfg.embedder)
    docs = instantiate(cfg.dataset).load().documents
    table = instantiate(cfg.chunker).chunk(docs, tokenizer=embedder.tokenizer)
    counts = embedder.tokenizer.count(list(table.text))
    expected = int((counts > MAX_LEN - 2).sum())
    assert 0 < expected <= n_chunks == len(table.text)
    assert manifest["embedding"]["truncated_chunks"] == expected
    assert manifest["embedding"]["chunks_embedded"] == n_chunks
    warned = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert warned == [f"{expected} of {n_chunks} passages are longer than the embedder's "
                      "maximum length and were truncated: text past it is not embedded "
                      f"(chunker {type(instantiate(cfg.chunker)).__name__})"]
    # what was cut, counted: tokens past the 14 content tokens of each long passage
    cut = int(np.maximum(counts - (MAX_LEN - 2), 0).sum())
    total = int(counts.sum())
    assert (manifest["embedding"]["max_tokens"], manifest["embedding"]["truncated_tokens"]) == (
        MAX_LEN - 2, cut)
    said = (f"{expected} of {n_chunks} passages ({expected / n_chunks:.1%}) are longer than the "
            f"embedder's maximum length ({MAX_LEN - 2} tokens of text) and were embedded "
            f"truncated; {cut} of {total} passage tokens ({cut / total:.1%}) are not embedded")
    assert manifest["embedding"]["truncation"] == said
    report = (res.run_dir / "report.md").read_text()
    assert f"⚠ {said}. The text past it is not seen" in report


def test_no_truncation_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                  monkeypatch: pytest.MonkeyPatch,
                                  compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench import precision

    # also: the precision auto resolved to is recorded (a CPU without bf16 flags: fp32)
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}",
                       "chunker=none", "metrics.bootstrap_resamples=200",
                       "embedder.precision=auto"])
    with caplog.at_level(logging.WARNING, logger="bench"):
        res = run(cfg, tmp_path / "run")
    manifest = json.loads((res.run_dir / "run.json").read_text())
    assert manifest["embedding"]["truncated_chunks"] == 0
    assert manifest["precision"] == {"embedder": {
        "requested": "auto", "resolved": "fp32",
        "reason": "the CPU reports none of amx_bf16, avx512_bf16"}, "reranker": None}
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]
    assert "embedded truncated" not in (res.run_dir / "report.md").read_text()
