"""Precision resolution (``bench.precision``) without depending on this machine's CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import precision
from bench.config.build import OptionError
from bench.precision import PrecisionChoice, cpu_flags, precision_json, resolve_precision


def _flags(*names: str) -> object:
    return lambda: frozenset(names)


def _never() -> frozenset[str]:
    raise AssertionError("the hardware was probed for an explicit precision")


@pytest.mark.parametrize(("flags", "resolved"), [
    (("fpu", "avx2", "amx_bf16", "amx_tile"), "bf16"),  # Sapphire Rapids and later
    (("avx512f", "avx512_bf16"), "bf16"),  # Cooper Lake, Zen 4
    (("avx2", "avx512f", "avx512_vnni"), "fp32"),  # AVX-512 without BF16
    ((), "fp32"),  # flags unreadable
])
def test_auto_on_cpu_follows_the_bf16_flags(flags: tuple[str, ...], resolved: str) -> None:
    choice = resolve_precision("auto", "cpu", flags=_flags(*flags))  # type: ignore[arg-type]
    assert (choice.requested, choice.resolved) == ("auto", resolved)
    assert ("reports amx_bf16" in choice.reason) == ("amx_bf16" in flags)


def test_auto_on_cuda_asks_the_gpu() -> None:
    assert resolve_precision("auto", "cuda", cuda_bf16=lambda: True).resolved == "bf16"
    assert resolve_precision("auto", "cuda", cuda_bf16=lambda: False).resolved == "fp32"


@pytest.mark.parametrize("requested", ["fp32", "bf16"])
def test_explicit_cpu_precisions_are_taken_as_asked(requested: str) -> None:
    # bf16 on a CPU without native bf16 still runs (emulated): nothing refuses it
    assert resolve_precision(requested, "cpu", flags=_never) == PrecisionChoice(
        requested, requested, "requested")


def test_fp16_on_cpu_and_unknown_names_are_option_errors() -> None:
    with pytest.raises(OptionError) as err:
        resolve_precision("fp16", "cpu", option="reranker.precision")
    assert err.value.option == "reranker.precision" and "bf16" in str(err.value)
    with pytest.raises(OptionError, match="fp32, fp16, bf16, auto"):
        resolve_precision("int4", "cpu")
    assert resolve_precision("fp16", "cuda").resolved == "fp16"


def test_cpu_flags_reads_the_first_flags_line(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx512_bf16 amx_bf16\n\n"
                    "processor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(str(info)) == {"fpu", "avx512_bf16", "amx_bf16"}
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_embedder_auto_uses_the_probe_and_fp32_keys_are_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.embedding.sentence_transformers import SentenceTransformerEmbedder

    # the cache key as it was before precision=auto existed: it must not move
    fp32_params = {"model": "packaged:all-MiniLM-L6-v2", "max_seq_length": None,
                   "normalize": True, "precision": "fp32", "query_prefix": "",
                   "document_prefix": ""}
    assert SentenceTransformerEmbedder().cache_params() == fp32_params
    monkeypatch.setattr(precision, "cpu_flags", _flags("avx2"))
    plain = SentenceTransformerEmbedder(precision="auto")
    assert plain.cache_params() == fp32_params  # auto -> fp32 shares fp32's vectors
    monkeypatch.setattr(precision, "cpu_flags", _flags("amx_bf16"))
    amx = SentenceTransformerEmbedder(precision="auto")
    assert amx.cache_params() == {**fp32_params, "precision": "bf16"}
    assert precision_json(amx) == {"requested": "auto", "resolved": "bf16",
                                   "reason": "the CPU reports amx_bf16"}


def test_rerankers_take_bf16_on_cpu_and_keep_fp32_keys() -> None:
    from bench.embedding.onnx import OnnxEmbedder
    from bench.rerank.bi_encoder import BiEncoderReranker
    from bench.rerank.cross_encoder import CrossEncoderReranker
    from bench.rerank.maxsim import MaxSimReranker

    # MaxSim had no precision option: fp32 must not add one to its key
    assert MaxSimReranker().cache_params() == {"model": "packaged:all-MiniLM-L6-v2",
                                               "max_seq_length": None}
    assert MaxSimReranker(precision="bf16").cache_params()["precision"] == "bf16"
    ce = CrossEncoderReranker(model="m", precision="bf16")
    assert ce.cache_params() == {"model": "m", "max_length": 512, "precision": "bf16"}
    st = {"_target_": "bench.embedding.sentence_transformers.SentenceTransformerEmbedder",
          "precision": "bf16"}
    assert precision_json(BiEncoderReranker(embedder=st)) == {
        "requested": "bf16", "resolved": "bf16", "reason": "requested"}
    onnx = {"_target_": "bench.embedding.onnx.OnnxEmbedder", "model": "m.onnx"}
    assert precision_json(BiEncoderReranker(embedder=onnx)) is None
    assert precision_json(OnnxEmbedder(model="m.onnx")) is None
