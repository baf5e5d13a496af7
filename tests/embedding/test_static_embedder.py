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
    tok = emb.tokenizer._tok
    for i, t in enumerate(texts):
        ids = tok.encode(t, add_special_tokens=False).ids
        if not ids:
            assert not out[i].any()  # an empty text has no tokens: a zero vector
            continue
        ref = emb.matrix[ids].astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(out[i], ref / np.linalg.norm(ref), atol=1e-6)
    assert emb.dim == 384 and emb.matrix.shape == (30522, 384)
    assert stats.n_texts == 4 and stats.n_truncated == 0


def _encode_tokenising_per_batch(emb: StaticEmbedder, texts: list[str]) -> np.ndarray:
    """The embedder as it was before it tokenised once: counts from one tokenisation, each
    batch tokenised again (truncating) for the lookup. The reference for bit-identity."""
    from scipy.sparse import csr_matrix
    from tokenizers import Tokenizer

    from bench.embedding.batching import encode_by_length
    from bench.embedding.onnx import resolve_tokenizer_file

    tok = Tokenizer.from_file(str(resolve_tokenizer_file(emb.tokenizer_name)))
    tok.no_padding()
    tok.enable_truncation(emb.max_seq_length)

    def run(batch: list[str]) -> np.ndarray:
        encs = tok.encode_batch(batch, add_special_tokens=False)
        lengths = np.asarray([len(e.ids) for e in encs], dtype=np.int64)
        indptr = np.zeros(len(batch) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        ids = (np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encs])
               if indptr[-1] else np.zeros(0, dtype=np.int64))
        weights = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)
        pool = csr_matrix((weights, ids, indptr), shape=(len(batch), emb.matrix.shape[0]))
        out = np.asarray(pool @ emb.matrix, dtype=np.float32)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    out = np.zeros((len(texts), emb.dim), dtype=np.float32)
    encode_by_length(texts, emb.tokenizer.count(texts), batch_size=emb.batch_size,
                     limit=emb.max_seq_length, encode_batch=run, out=out, kind="document")
    return out


TEXTS = ["A compiler translates source code.", "", "garbage collection", "x y z w",
         "word " * 200, "Ethernet is a family of wired networking technologies.", "ünïcödé"]


def test_tokenises_once_and_vectors_are_bit_identical_to_per_batch_tokenising(
        emb: StaticEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = _encode_tokenising_per_batch(emb, TEXTS)  # batch_size 2: several batches, one cut
    calls: list[int] = []
    tok = emb.tokenizer._tok
    real = tok.encode_batch

    class Counting:  # tokenizers.Tokenizer's methods are read-only: wrap the object instead
        def __getattr__(self, name: str) -> object:
            return getattr(tok, name)

        def encode_batch(self, texts: list[str], **kw: object) -> object:
            calls.append(len(texts))
            return real(texts, **kw)

    monkeypatch.setitem(emb.tokenizer.__dict__, "_tok", Counting())
    out = np.zeros_like(ref)
    stats = emb.encode(TEXTS, kind="document", out=out)
    assert calls == [len(TEXTS)]  # one tokenisation of every text, none per batch
    assert np.array_equal(out, ref)
    assert stats.n_truncated == 1 and stats.n_tokens == int(np.minimum(
        emb.tokenizer.count(TEXTS), emb.max_seq_length).sum())


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
