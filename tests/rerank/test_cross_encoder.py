from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.config.build import OptionError, build
from bench.errors import BenchError, ConfigError
from bench.rerank.cross_encoder import CrossEncoderReranker

QUERIES = ["what is a compiler", "binary search tree", "TCP handshake"]
POOLS = [
    ["A compiler translates source code into machine code.", "A tree is a plant.",
     "Interpreters run code directly.", "", "compiler compiler compiler"],
    ["In a binary search tree each left child is smaller.", "Search engines index the web."],
    [],
]


def _reference(model_dir: Path, query: str, passage: str, max_length: int = 512) -> float:
    """sigmoid(logit) of the same weights called through transformers directly."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    enc = tok(query, passage, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.inference_mode():
        logit = float(model(**enc).logits[0, 0])
    return 1.0 / (1.0 + np.exp(-logit))


def test_scores_are_sigmoid_logits_of_the_model(tiny_cross_encoder_dir: Path) -> None:
    r = CrossEncoderReranker(model=str(tiny_cross_encoder_dir))
    out = r.score(QUERIES, POOLS)
    assert [len(s) for s in out] == [len(p) for p in POOLS]
    assert all(s.dtype == np.float32 for s in out)
    for i in (0, 1):
        want = _reference(tiny_cross_encoder_dir, QUERIES[0], POOLS[0][i])
        assert out[0][i] == pytest.approx(want, abs=1e-5)


def test_deterministic_and_batching_invariant(tiny_cross_encoder_dir: Path) -> None:
    path = str(tiny_cross_encoder_dir)
    one = CrossEncoderReranker(model=path, batch_size=1).score(QUERIES, POOLS)
    seven = CrossEncoderReranker(model=path, batch_size=7)
    a, b = seven.score(QUERIES, POOLS), seven.score(QUERIES, POOLS)
    for x, y, z in zip(one, a, b, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5)
        np.testing.assert_array_equal(y, z)


def test_pointwise_a_pair_score_ignores_the_rest_of_the_pool(tiny_cross_encoder_dir: Path) -> None:
    r = CrossEncoderReranker(model=str(tiny_cross_encoder_dir))
    full = r.score(QUERIES[:1], POOLS[:1])[0]
    alone = r.score(QUERIES[:1], [[POOLS[0][2]]])[0]
    assert alone[0] == pytest.approx(full[2], abs=1e-5)


def test_max_length_truncates(tiny_cross_encoder_dir: Path) -> None:
    head = " ".join(["token"] * 40)
    pool = [[head + " alpha beta gamma", head + " completely different ending words"]]
    path = str(tiny_cross_encoder_dir)
    short = CrossEncoderReranker(model=path, max_length=16).score(["q"], pool)
    assert short[0][0] == pytest.approx(short[0][1], abs=1e-6)  # both cut inside `head`
    full = CrossEncoderReranker(model=path, max_length=512).score(["q"], pool)
    assert abs(float(full[0][0] - full[0][1])) > 1e-6
    assert short[0][0] == pytest.approx(
        _reference(tiny_cross_encoder_dir, "q", pool[0][0], max_length=16), abs=1e-5)


def test_options_are_checked_without_loading() -> None:
    r = CrossEncoderReranker(model="no/such-model", depths=[100, 20])
    assert r.depths() == [20, 100]
    assert r.cache_params() == {"model": "no/such-model", "max_length": 512, "precision": "fp32"}
    assert "_model" not in r.__dict__  # nothing loaded yet
    with pytest.raises(OptionError, match="batch_size"):
        CrossEncoderReranker(model="m", batch_size=0)
    with pytest.raises(OptionError, match="precision"):
        CrossEncoderReranker(model="m", precision="fp16", device="cpu")
    assert CrossEncoderReranker(model="m", precision="bf16").precision == "bf16"  # autocast
    with pytest.raises(OptionError, match="depths"):
        CrossEncoderReranker(model="m", depths=[20, 20])
    with pytest.raises(OptionError, match="device"):
        CrossEncoderReranker(model="m", device="tpu")


def test_cuda_without_gpu_is_a_one_line_error() -> None:
    from bench.pipeline.device import cuda_available

    if cuda_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(BenchError) as err:
        CrossEncoderReranker(model="m", device="cuda")
    assert "\n" not in str(err.value) and "cuda" in str(err.value)


@pytest.mark.parametrize("model", ["empty-folder", "no-such-org/no-such-model"])
def test_unloadable_model_is_a_config_error_naming_the_key(model: str, tmp_path: Path) -> None:
    name = str(tmp_path) if model == "empty-folder" else model
    r = build({"_target_": "bench.rerank.cross_encoder.CrossEncoderReranker",
               "model": name}, "reranker", device="cpu")
    assert r is not None
    with pytest.raises(ConfigError) as err:
        r.score(["q"], [["p"]])
    assert err.value.key == "reranker.model"
    assert "\n" not in str(err.value)


def test_bf16_on_cpu_tracks_fp32(tiny_cross_encoder_dir: Path) -> None:
    path = str(tiny_cross_encoder_dir)
    ref = CrossEncoderReranker(model=path).score(QUERIES, POOLS)
    got = CrossEncoderReranker(model=path, precision="bf16").score(QUERIES, POOLS)
    for x, y in zip(ref, got, strict=True):
        assert y.dtype == np.float32
        np.testing.assert_allclose(x, y, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_on_cuda_tracks_fp32(tiny_cross_encoder_dir: Path, precision: str) -> None:
    path = str(tiny_cross_encoder_dir)
    ref = CrossEncoderReranker(model=path, device="cuda").score(QUERIES, POOLS)
    half = CrossEncoderReranker(model=path, device="cuda", precision=precision)
    for x, y in zip(ref, half.score(QUERIES, POOLS), strict=True):
        assert y.dtype == np.float32  # upcast before the sigmoid, as sentence-transformers does
        np.testing.assert_allclose(x, y, atol=2e-2)
