from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flashrank")

from bench.config.build import OptionError, build
from bench.errors import ConfigError
from bench.rerank.flashrank_reranker import FlashrankReranker

NAME = "ms-marco-TinyBERT-L-2-v2"
QUERIES = ["what is a compiler", "binary search tree"]
POOLS = [
    ["A compiler translates source code into machine code.", "A tree is a plant.",
     "Interpreters run code directly.", "compiler compiler compiler", "x"],
    ["In a binary search tree each left child is smaller."],
]


def _torch_scores(cache: Path, query: str, passages: list[str]) -> np.ndarray:
    """The same weights through transformers: the ONNX export must agree with them."""
    import torch
    from transformers import AutoTokenizer, BertConfig

    from tests.rerank.conftest import _tiny_bert

    ref = cache.parent / "torch-ref"
    model = _tiny_bert(ref)  # same seed -> same weights as the exported model
    assert isinstance(model.config, BertConfig)
    tok = AutoTokenizer.from_pretrained(str(ref))
    enc = tok([query] * len(passages), passages, truncation=True,
              padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**enc).logits[:, 0].numpy()
    shutil.rmtree(ref)
    return 1.0 / (1.0 + np.exp(-logits))


def test_scores_match_the_exported_weights(tiny_flashrank_cache: Path) -> None:
    r = FlashrankReranker(cache_dir=str(tiny_flashrank_cache))
    out = r.score(QUERIES, POOLS)
    assert [len(s) for s in out] == [len(p) for p in POOLS]
    assert all(s.dtype == np.float32 for s in out)
    np.testing.assert_allclose(out[0], _torch_scores(tiny_flashrank_cache, QUERIES[0], POOLS[0]),
                               atol=1e-4)
    assert np.ptp(out[0]) > 1e-3  # the tiny model does tell passages apart


def test_deterministic_and_batching_invariant(tiny_flashrank_cache: Path) -> None:
    one = FlashrankReranker(cache_dir=str(tiny_flashrank_cache), batch_size=1).score(QUERIES, POOLS)
    three = FlashrankReranker(cache_dir=str(tiny_flashrank_cache), batch_size=3)
    a, b = three.score(QUERIES, POOLS), three.score(QUERIES, POOLS)
    for x, y, z in zip(one, a, b, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5)
        np.testing.assert_array_equal(y, z)


def test_max_length_truncates(tiny_flashrank_cache: Path) -> None:
    head = " ".join(["token"] * 40)
    pool = [[head + " alpha beta gamma", head + " completely different ending words"]]
    short = FlashrankReranker(cache_dir=str(tiny_flashrank_cache), max_length=16).score(["q"], pool)
    assert short[0][0] == pytest.approx(short[0][1], abs=1e-6)
    full = FlashrankReranker(cache_dir=str(tiny_flashrank_cache)).score(["q"], pool)
    assert abs(float(full[0][0] - full[0][1])) > 1e-4


def test_missing_model_files_stop_before_any_download(tmp_path: Path,
                                                      tiny_flashrank_cache: Path) -> None:
    node = {"_target_": "bench.rerank.flashrank_reranker.FlashrankReranker",
            "cache_dir": str(tmp_path)}
    with pytest.raises(ConfigError) as err:
        build(node, "reranker", device="cpu")
    assert err.value.key == "reranker.cache_dir" and "\n" not in str(err.value)
    assert not (tmp_path / NAME).exists()  # flashrank was never asked to fetch it
    partial = tmp_path / "partial"
    shutil.copytree(tiny_flashrank_cache, partial)
    (partial / NAME / "tokenizer.json").unlink()
    with pytest.raises(ConfigError, match=r"tokenizer\.json"):
        FlashrankReranker(cache_dir=str(partial))


def test_options(tiny_flashrank_cache: Path) -> None:
    with pytest.raises(OptionError, match="model_name"):
        FlashrankReranker(cache_dir=str(tiny_flashrank_cache), model_name="rank_zephyr_7b_v1_full")
    with pytest.raises(OptionError, match="batch_size"):
        FlashrankReranker(cache_dir=str(tiny_flashrank_cache), batch_size=0)
    r = FlashrankReranker(cache_dir=str(tiny_flashrank_cache))
    params = r.cache_params()
    assert params["model_name"] == NAME and params["max_length"] == 512
    assert len(str(params["onnx_blake2b"])) == 32
    assert r.depths() == [20, 50, 100]
