"""The packaged ONNX encoders against reference encodings.

int8 all-MiniLM-L6-v2: each vector against the fp32 sentence-transformers model's vector of the
same text. Measured (2 cores, 200 FOLDOC documents + 100 FOLDOC queries): min cosine 0.9993,
mean 0.9996. The threshold 0.998 leaves room for other CPUs' int8 kernels yet fails the bugs
that matter: mean pooling over fixed 128-token padding, a wrong token_type_ids, or a dropped
[CLS]/[SEP] each move these vectors far more.

paraphrase-MiniLM-L3-v2 has no fp32 reference offline (sentence-transformers cannot fetch it).
Its references: the model's own token states ("onnx::Shape_422"), mean-pooled over the
attention mask as its published pooling config says, must equal the "461" output; and its
published behaviour, paraphrase pairs far above unrelated pairs.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.embedding.onnx import OnnxEmbedder, resolve_onnx_path
from bench.embedding.sentence_transformers import SentenceTransformerEmbedder
from bench.errors import ConfigError

pytest.importorskip("onnxruntime")

TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "x",
    "Garbage collection reclaims memory that a program no longer references.",
    "A compiler translates source code written in a high-level language into machine code, "
    "often through an intermediate representation on which it performs optimisations.",
    "TCP provides reliable, ordered delivery of a stream of bytes between applications "
    "running on hosts communicating over an IP network.",
    "What is the name for a data structure where the last item added is the first removed?",
    "Ethernet",
]


def _encode(emb: OnnxEmbedder | SentenceTransformerEmbedder, texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), emb.dim), dtype=np.float32)
    emb.encode(texts, kind="document", out=out)
    return out


@pytest.fixture(scope="module")
def int8() -> OnnxEmbedder:
    return OnnxEmbedder(model="packaged:all-MiniLM-L6-v2-int8", batch_size=5)


@pytest.fixture(scope="module")
def l3() -> OnnxEmbedder:
    return OnnxEmbedder(model="packaged:paraphrase-MiniLM-L3-v2", output="461",
                        pooling="none", max_seq_length=128, batch_size=5)


def test_int8_agrees_with_fp32_minilm(int8: OnnxEmbedder) -> None:
    fp32 = SentenceTransformerEmbedder(batch_size=5)
    cos = (_encode(int8, TEXTS) * _encode(fp32, TEXTS)).sum(axis=1)
    assert cos.min() > 0.998, cos
    assert int8.dim == 384


def test_l3_sentence_output_is_mean_of_its_token_states(l3: OnnxEmbedder) -> None:
    tokens = OnnxEmbedder(model="packaged:paraphrase-MiniLM-L3-v2", output="onnx::Shape_422",
                          pooling="mean", max_seq_length=128, batch_size=5)
    cos = (_encode(l3, TEXTS) * _encode(tokens, TEXTS)).sum(axis=1)
    assert cos.min() > 0.9999, cos


def test_l3_separates_paraphrases_from_unrelated_pairs(l3: OnnxEmbedder) -> None:
    v = _encode(l3, TEXTS)
    sim = v @ v.T
    paraphrase = [sim[0, 1], sim[3, 4]]  # eating food / bread; riding a horse / white horse
    unrelated = [sim[0, 2], sim[0, 5], sim[3, 7], sim[2, 8], sim[1, 9]]
    assert min(paraphrase) > 0.6 and max(unrelated) < 0.3
    assert min(paraphrase) - max(unrelated) > 0.4


@pytest.mark.parametrize("which", ["int8", "l3"])
def test_vector_does_not_depend_on_batch_padding(which: str, request: pytest.FixtureRequest
                                                 ) -> None:
    emb: OnnxEmbedder = request.getfixturevalue(which)
    batched = _encode(emb, TEXTS)  # short texts share batches with long ones: many pads
    for i, t in enumerate(TEXTS):
        alone = _encode(emb, [t])[0]
        assert float(batched[i] @ alone) > 0.9999, t
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_fixed_padding_of_the_tokenizer_file_is_off(int8: OnnxEmbedder) -> None:
    # MiniLM's tokenizer.json pads every text to 128; the model must see batch-longest padding
    encs = int8._model_tok.encode_batch(["a", "a b c"], add_special_tokens=True)
    assert [len(e.ids) for e in encs] == [3 + 2, 3 + 2]
    assert list(encs[0].attention_mask) == [1, 1, 1, 0, 0]


def test_truncation_counts_and_caps(int8: OnnxEmbedder) -> None:
    long_text = "word " * 300
    out = np.zeros((2, int8.dim), dtype=np.float32)
    stats = int8.encode([long_text, "short"], kind="query", out=out)
    assert stats.n_truncated == 1
    assert stats.n_tokens == (256 - 2) + 1
    assert len(int8._model_tok.encode(long_text).ids) == 256


def test_tokenizer_matches_the_fp32_models(int8: OnnxEmbedder) -> None:
    # the ONNX tokenizer shares its cache name with the fp32 model's: it must cut the same
    fp32 = SentenceTransformerEmbedder()
    assert int8.tokenizer.name == fp32.tokenizer.name
    assert list(int8.tokenizer.count(TEXTS)) == list(fp32.tokenizer.count(TEXTS))
    for a, b in zip(int8.tokenizer.offsets(TEXTS), fp32.tokenizer.offsets(TEXTS), strict=True):
        assert np.array_equal(a, b)


def test_packaged_files_are_found_from_the_distributions() -> None:
    assert resolve_onnx_path("packaged:all-MiniLM-L6-v2-int8").stat().st_size == 22_928_619
    assert resolve_onnx_path("packaged:paraphrase-MiniLM-L3-v2").suffix == ".onnx"
    assert OnnxEmbedder(model="packaged:all-MiniLM-L6-v2-int8").model_bytes == 22_928_619
    # the fp32 model's weights: one safetensors file, ~4x the int8 file
    fp32 = SentenceTransformerEmbedder().model_bytes
    assert 3.5 * 22_928_619 < fp32 < 4.5 * 22_928_619


def test_cache_params_ignore_speed_options() -> None:
    a = OnnxEmbedder(model="m.onnx", batch_size=8, threads=1)
    b = OnnxEmbedder(model="m.onnx", batch_size=64, threads=2)
    assert a.cache_params() == b.cache_params()
    assert a.cache_params() != OnnxEmbedder(model="m.onnx", pooling="cls").cache_params()


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"output": "nope"}, "embedder.output"),
    ({"output": "461", "pooling": "mean"}, "embedder.pooling"),
])
def test_bad_outputs_name_the_key(kwargs: dict[str, object], key: str) -> None:
    emb = OnnxEmbedder(model="packaged:paraphrase-MiniLM-L3-v2", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as err:
        _ = emb.dim
    assert err.value.key == key


def test_missing_model_file_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        _ = OnnxEmbedder(model="/nonexistent/model.onnx").dim
    assert err.value.key == "embedder.model"


@pytest.mark.parametrize(("kwargs", "option"), [
    ({"batch_size": 0}, "batch_size"),
    ({"pooling": "max"}, "pooling"),
    ({"max_seq_length": 2}, "max_seq_length"),
    ({"threads": -1}, "threads"),
])
def test_bad_options(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(OptionError) as err:
        OnnxEmbedder(model="m.onnx", **kwargs)  # type: ignore[arg-type]
    assert err.value.option == option


def test_cuda_without_cuda_provider_is_an_error_not_a_fallback() -> None:
    import onnxruntime as ort

    from bench.errors import DeviceError

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    with pytest.raises(DeviceError):
        _ = OnnxEmbedder(model="packaged:all-MiniLM-L6-v2-int8", device="cuda").dim


@pytest.mark.gpu
def test_cuda_provider_matches_cpu() -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs onnxruntime-gpu")
    cpu = _encode(OnnxEmbedder(model="packaged:all-MiniLM-L6-v2-int8"), TEXTS)
    gpu = _encode(OnnxEmbedder(model="packaged:all-MiniLM-L6-v2-int8", device="cuda"), TEXTS)
    assert (cpu * gpu).sum(axis=1).min() > 0.999


class _CountingTokenizer:
    """A ``tokenizers.Tokenizer`` whose ``encode_batch`` calls are counted (its methods are
    read-only, so the object is wrapped)."""

    def __init__(self, tok: object, calls: list[int]) -> None:
        self._tok, self._calls = tok, calls

    def __getattr__(self, name: str) -> object:
        return getattr(self._tok, name)

    def encode_batch(self, texts: list[str], **kw: object) -> object:
        self._calls.append(len(texts))
        return self._tok.encode_batch(texts, **kw)  # type: ignore[attr-defined]


@pytest.mark.parametrize("which", ["int8", "l3"])
def test_tokenises_once_and_vectors_are_bit_identical_to_per_batch_tokenising(
        which: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    emb: OnnxEmbedder = request.getfixturevalue(which)
    texts = [*TEXTS, "word " * 300]  # the last one is cut at max_seq_length
    assert emb._specials is not None and emb._specials.prefix == (101,)  # [CLS] ... [SEP]
    assert emb._specials.suffix == (102,) and emb.dim == 384
    with monkeypatch.context() as m:  # the path that tokenises each batch again
        m.setitem(emb.__dict__, "_specials", None)
        ref = _encode(emb, texts)
    plain: list[int] = []
    model: list[int] = []
    monkeypatch.setitem(emb.tokenizer.__dict__, "_tok", _CountingTokenizer(emb.tokenizer._tok,
                                                                           plain))
    monkeypatch.setitem(emb.__dict__, "_model_tok", _CountingTokenizer(emb._model_tok, model))
    out = np.zeros_like(ref)
    stats = emb.encode(texts, kind="document", out=out)
    assert plain == [len(texts)] and model == []  # one tokenisation, none per batch
    assert np.array_equal(out, ref)
    assert stats.n_truncated == 1


def test_inputs_built_from_ids_equal_the_tokenizers(int8: OnnxEmbedder) -> None:
    texts = ["x", "A man is riding a horse.", "word " * 300, ""]
    sp = int8._specials
    assert sp is not None
    ids = int8.tokenizer.ids(texts, keep=int8.max_seq_length - sp.n_added)
    built = int8._feed_of_ids(ids, list(range(len(texts))), sp)
    ref = int8._feed_of_texts(texts)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert np.array_equal(built[name], ref[name]), name
    assert list(ids.counts[:2]) == [1, 7] and ids.counts[2] == 300
