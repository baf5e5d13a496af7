"""The static embedder: normalised mean of the model's token-embedding rows."""

from __future__ import annotations

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.embedding.static import StaticEmbedder
from bench.errors import BenchError

pytest.importorskip("onnx")
pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def emb() -> StaticEmbedder:
    e = StaticEmbedder(model="packaged:paraphrase-MiniLM-L3-v2", batch_size=2)
    try:
        assert e.matrix.ndim == 2
    except BenchError as exc:  # the packaged model is an optional extra
        pytest.skip(f"packaged model not installed: {exc}")
    return e


def test_vector_is_the_normalised_mean_of_the_token_rows(emb: StaticEmbedder) -> None:
    texts = ["A compiler translates source code.", "", "garbage collection", "x y z w"]
    out = np.full((len(texts), emb.dim), np.nan, dtype=np.float32)
    stats = emb.encode(texts, kind="document", out=out)
    tok = emb._model_tok
    for i, t in enumerate(texts):
        ids = tok.encode(t, add_special_tokens=False).ids
        if not ids:
            assert not out[i].any()  # an empty text has no tokens: a zero vector
            continue
        ref = emb.matrix[ids].astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(out[i], ref / np.linalg.norm(ref), atol=1e-6)
    assert emb.dim == 384 and emb.matrix.shape == (30522, 384)
    assert stats.n_texts == 4 and stats.n_truncated == 0


def test_truncation_is_counted_and_related_texts_score_higher(emb: StaticEmbedder) -> None:
    short = StaticEmbedder(model="packaged:paraphrase-MiniLM-L3-v2", max_seq_length=2)
    out = np.zeros((1, 384), dtype=np.float32)
    assert short.encode(["one two three"], kind="query", out=out).n_truncated == 1
    v = np.zeros((3, emb.dim), dtype=np.float32)
    emb.encode(["memory garbage collection", "garbage collector frees memory",
                "a river fish from the marsh"], kind="document", out=v)
    assert v[0] @ v[1] > v[0] @ v[2]


def test_only_cpu_and_valid_options() -> None:
    with pytest.raises(OptionError) as err:
        StaticEmbedder(model="packaged:paraphrase-MiniLM-L3-v2", device="cuda")
    assert err.value.option == "device"
    with pytest.raises(OptionError):
        StaticEmbedder(model="m", batch_size=0)
    cp = StaticEmbedder(model="m", batch_size=7).cache_params()
    assert cp == StaticEmbedder(model="m", batch_size=9).cache_params()  # speed, not vectors
    assert cp["backend"] == "static"
