"""vLLM engine: one-line error without the extra; latency read from vLLM's own stats."""

from __future__ import annotations

import importlib.util
import json
import os
from types import SimpleNamespace

import pytest

from bench.errors import MissingDependencyError
from bench.generation.base import ChatMessage, GenerationRequest, SamplingParams
from bench.generation.vllm_engine import VLLMEngineGenerator, latency_from_metrics

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed")
def test_missing_vllm_is_one_line_naming_the_extra() -> None:
    with pytest.raises(MissingDependencyError) as err:
        VLLMEngineGenerator(model="some/model")
    line = str(err.value)
    assert "\n" not in line and "'vllm'" in line and "[vllm]" in line


def test_v1_request_stats() -> None:
    stats = SimpleNamespace(first_token_latency=0.120, first_token_ts=50.0, last_token_ts=50.4)
    ttft, tpot, e2e = latency_from_metrics(stats, output_tokens=5)
    assert ttft == pytest.approx(120.0)
    assert tpot == pytest.approx(400.0 / (5 - 1))
    assert e2e == pytest.approx(120.0 + 400.0)


def test_v0_request_metrics() -> None:
    metrics = SimpleNamespace(arrival_time=10.0, first_token_time=10.25, last_token_time=10.75)
    ttft, tpot, e2e = latency_from_metrics(metrics, output_tokens=3)
    assert ttft == pytest.approx(250.0)
    assert tpot == pytest.approx(500.0 / (3 - 1))
    assert e2e == pytest.approx(250.0 + 500.0)


def test_absent_or_unrecorded_metrics_are_none_not_invented() -> None:
    assert latency_from_metrics(None, 10) == (None, None, None)
    unrecorded = SimpleNamespace(first_token_latency=0.0, first_token_ts=0.0, last_token_ts=0.0)
    assert latency_from_metrics(unrecorded, 10) == (None, None, None)
    one_token = SimpleNamespace(first_token_latency=0.05, first_token_ts=1.0, last_token_ts=1.0)
    ttft, tpot, _ = latency_from_metrics(one_token, 1)
    assert ttft == pytest.approx(50.0) and tpot is None


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM or not os.environ.get("BENCH_VLLM_TEST_MODEL"),
                    reason="needs vllm and BENCH_VLLM_TEST_MODEL (a local model path)")
def test_real_engine_free_text_and_schema() -> None:
    gen = VLLMEngineGenerator(model=os.environ["BENCH_VLLM_TEST_MODEL"],
                              gpu_memory_utilization=0.3)
    schema = {"type": "object", "properties": {"answer": {"type": "string"}},
              "required": ["answer"], "additionalProperties": False}
    msgs = (ChatMessage("user", "Name a colour. Answer in JSON."),)
    try:
        free, constrained = gen.generate([
            GenerationRequest("free", msgs, SamplingParams(max_tokens=32)),
            GenerationRequest("json", msgs, SamplingParams(max_tokens=64), json.dumps(schema)),
        ])
    finally:
        gen.close()
    assert free.status == "ok" and free.text and free.output_tokens <= 32
    assert free.ttft_ms is not None and free.ttft_ms > 0
    assert constrained.status == "ok"
    assert isinstance(json.loads(constrained.text)["answer"], str)
