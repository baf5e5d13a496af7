from __future__ import annotations

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.embedding.sentence_transformers import SentenceTransformerEmbedder


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(batch_size=3)


def test_blocked_token_count_equals_one_pass(embedder: SentenceTransformerEmbedder) -> None:
    texts = ["a b c", "", "tokenisation of a longer sentence, with punctuation!", "x" * 50]
    tok = embedder.tokenizer
    assert list(tok.count(texts, block=1)) == list(tok.count(texts, block=100))
    assert tok.count(["hello world"])[0] == 2


def test_encode_writes_rows_in_input_order(embedder: SentenceTransformerEmbedder) -> None:
    texts = ["short", "a considerably longer text about databases and indexes", "mid text"]
    out = np.zeros((3, embedder.dim), dtype=np.float32)
    stats = embedder.encode(texts, kind="document", out=out)
    # batches are formed longest-first; each row must still hold its own text's vector
    for i, t in enumerate(texts):
        single = np.zeros((1, embedder.dim), dtype=np.float32)
        embedder.encode([t], kind="document", out=single)
        assert float(out[i] @ single[0]) > 0.9999
    assert stats.n_texts == 3 and stats.n_truncated == 0
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize(("kwargs", "option"), [
    ({"batch_size": 0}, "batch_size"),
    ({"precision": "fp8"}, "precision"),
    ({"precision": "fp16"}, "precision"),  # half precision needs device=cuda
    ({"max_seq_length": 2}, "max_seq_length"),
    ({"num_threads": 0}, "num_threads"),
])
def test_bad_options(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(OptionError) as err:
        SentenceTransformerEmbedder(**kwargs)  # type: ignore[arg-type]
    assert err.value.option == option


def test_bf16_on_cpu_agrees_with_fp32(embedder: SentenceTransformerEmbedder) -> None:
    # bf16 autocast rounds the matrix products only: the scale measured on 400 FOLDOC chunks
    # is min cosine 0.99998 (scripts/bench_embed.py); 0.9999 is the documented bound
    texts = ["A compiler translates source code into machine code.", "x",
             "TCP provides reliable, ordered delivery of a stream of bytes.", "Ethernet"]
    bf16 = SentenceTransformerEmbedder(batch_size=3, precision="bf16", num_threads=1)
    ref = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    got = np.zeros_like(ref)
    embedder.encode(texts, kind="document", out=ref)
    bf16.encode(texts, kind="document", out=got)
    assert float(np.einsum("nd,nd->n", ref, got).min()) > 0.9999
    assert not np.array_equal(ref, got)  # bf16 really ran
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)  # pooled in float32
    import torch

    threads = torch.get_num_threads()
    q = bf16.encode_query(texts[0])
    assert torch.get_num_threads() == threads  # num_threads held for the call only
    assert bf16.cache_params() == {**embedder.cache_params(), "precision": "bf16"}
    assert q.dtype == np.float32 and float(q[0] @ ref[0]) > 0.9999
