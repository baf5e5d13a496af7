"""Every config option composes, validates and instantiates (lightning-hydra-template habit)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.app import CONF_DIR
from bench.config.build import build
from bench.config.schema import STAGE_GROUPS
from bench.errors import BenchError, ConfigError

# Options that need a value the user must supply (`???`), and what to give them here.
REQUIRED = {
    ("dataset", "beir"): ["dataset.path=/nonexistent"],
    ("dataset", "scale"): ["dataset.path=/nonexistent"],
    ("dataset", "golden"): ["dataset.corpus=/c.jsonl", "dataset.queries=/q.jsonl"],
    ("dataset", "csv"): ["dataset.corpus=/c.csv", "dataset.queries=/q.csv"],
    ("embedder", "hub"): ["embedder.model=sentence-transformers/all-MiniLM-L6-v2"],
    ("reranker", "flashrank"): ["reranker.cache_dir=/nonexistent"],
    ("embedder", "onnx"): ["embedder.model=packaged:all-MiniLM-L6-v2-int8"],
    ("embedder", "openai_http"): ["embedder.base_url=http://127.0.0.1:9/v1"],
    ("reranker", "http"): ["reranker.base_url=http://127.0.0.1:9/v1"],
    ("index", "milvus_hnsw"): ["index.uri=http://127.0.0.1:9", "index.timeout_s=2"],
    ("index", "qdrant_hnsw"): ["index.url=http://127.0.0.1:9", "index.timeout_s=2"],
    ("dataset", "raw_docs"): ["dataset.path=/nonexistent"],
    ("parser", "docling"): ["parser.artifacts_path=/nonexistent"],
    ("generator", "sweep"): ["+generator@generator.members.a.generator=extractive"],
}
# Options that need hardware or packages this machine may lack; building them must then fail
# with a one-line BenchError, never a traceback.
HARDWARE = {("telemetry", "nvml")}
# Options whose model files must already lie on disk (nothing downloads at run time): with the
# REQUIRED placeholder above, building them must fail with a ConfigError naming this key.
LOCAL_FILES = {("reranker", "flashrank"): "reranker.cache_dir",
               ("system", "imported"): "system.path",
               ("iterative", "supplied"): "iterative.path",
               # a server that must answer when the option is built (nothing listens on :9)
               ("index", "milvus_hnsw"): "index.uri",
               ("index", "qdrant_hnsw"): "index.url",
               # raw files need a parser (parser=none is the default)
               ("dataset", "raw_docs"): "parser",
               # its models must lie in artifacts_path (checked before the package)
               ("parser", "docling"): "parser.artifacts_path"}
# Options whose package lives in an optional extra; without it building fails in one line.
EXTRAS = {("generator", "vllm"): "vllm", ("parser", "pypdf"): "pypdf",
          ("parser", "pdfminer"): "pdfminer", ("parser", "pdfplumber"): "pdfplumber",
          ("parser", "trafilatura"): "trafilatura", ("parser", "docx"): "docx",
          ("parser", "rapidocr"): "rapidocr_onnxruntime", ("parser", "markitdown"): "markitdown",
          ("parser", "unstructured"): "unstructured"}
# Options that run a Debian program; without it building fails in one line.
PROGRAMS = {("parser", "tesseract"): "tesseract"}


class _NoGenerator:
    """Judges take their model's backend at build time; building must not call it."""

    def cache_params(self) -> dict[str, object]:
        return {"backend": "none"}

    def count_tokens(self, text: str) -> int:
        raise AssertionError("not called when building")

    def generate(self, requests: object) -> list[object]:
        raise AssertionError("not called when building")

    def close(self) -> None:
        pass


RUNTIME: dict[str, dict[str, Any]] = {
    "embedder": {"device": "cpu"},
    "index": {"device": "cpu"},
    "reranker": {"device": "cpu"},
    "judge": {"generator": _NoGenerator()},
}


def _has_gpu() -> bool:
    from bench.pipeline.device import cuda_available

    return cuda_available()


def options() -> list[tuple[str, str]]:
    out = []
    for group in STAGE_GROUPS:
        for f in sorted((Path(CONF_DIR) / group).glob("*.yaml")):
            out.append((group, f.stem))
    return out


def experiments() -> list[str]:
    return sorted(f.stem for f in (Path(CONF_DIR) / "experiment").glob("*.yaml"))


@pytest.mark.parametrize(("group", "option"), options())
def test_every_option_instantiates(group: str, option: str, compose_cfg) -> None:
    cfg = compose_cfg([f"{group}={option}", *REQUIRED.get((group, option), [])])
    package = EXTRAS.get((group, option))
    missing = package is not None and importlib.util.find_spec(package) is None
    program = PROGRAMS.get((group, option))
    missing = missing or (program is not None and shutil.which(program) is None)
    if missing or ((group, option) in HARDWARE and not _has_gpu()):
        with pytest.raises(BenchError):  # one-line error (missing extra or no GPU)
            build(cfg[group], group, **RUNTIME.get(group, {}))
        return
    if (group, option) in LOCAL_FILES:
        with pytest.raises(ConfigError) as err:
            build(cfg[group], group, **RUNTIME.get(group, {}))
        assert err.value.key == LOCAL_FILES[group, option]
        return
    node = cfg[group]
    if group == "judge":  # judge.repeats and the gates' calibration policy are the stage's
        from bench.config.build import to_container

        node = {k: v for k, v in to_container(node).items()
                if k not in ("repeats", "calibration")}
    if group == "rewriter":  # built by its stage: a generator block and suite members
        from bench.rewrite.stage import build as build_rewriter

        obj = build_rewriter(cfg, "cpu")["rewriter"]
    else:
        obj = build(node, group, **RUNTIME.get(group, {}))
    if cfg[group].get("_target_") is None:  # `none` disables a stage (chunker=none does not)
        assert obj is None
    else:
        assert obj is not None


@pytest.mark.parametrize("name", experiments())
def test_every_experiment_composes(name: str, compose_cfg) -> None:
    cfg = compose_cfg([f"+experiment={name}"])
    assert cfg.experiment_name == name
    for group in STAGE_GROUPS:
        assert "_target_" in cfg[group]


def test_unknown_option_names_the_key(compose_cfg) -> None:
    cfg = compose_cfg(["+embedder.batchsize=3"])
    with pytest.raises(ConfigError) as err:
        build(cfg.embedder, "embedder", device="cpu")
    assert str(err.value).startswith("config key embedder.batchsize: unknown option")


@pytest.mark.parametrize(("override", "key"), [
    ("embedder.batch_size=0", "embedder.batch_size"),
    ("embedder.batch_size=abc", "embedder.batch_size"),
    ("chunker.overlap=500", "chunker.overlap"),
    ("retriever.k=0", "retriever.k"),
])
def test_bad_values_name_the_key(override: str, key: str, compose_cfg) -> None:
    cfg = compose_cfg([override])
    group = override.split(".")[0]
    with pytest.raises(ConfigError) as err:
        build(cfg[group], group, **RUNTIME.get(group, {}))
    assert err.value.key == key


def test_metrics_presets(compose_cfg) -> None:
    from bench.config.schema import DEFAULT_METRICS
    from bench.metrics.registry import parse_metric

    assert list(compose_cfg([]).metrics.names) == DEFAULT_METRICS  # default preset = schema
    names = list(compose_cfg(["metrics=beir"]).metrics.names)
    ks = (1, 3, 5, 10, 100, 1000)
    assert names == [f"{f}@{k}" for f in ("ndcg", "map", "recall", "precision") for k in ks]
    assert all(parse_metric(n).name == n for n in names)
    # an experiment's own metrics.names still wins over the preset default
    assert list(compose_cfg(["metrics=beir", "metrics.names=[mrr]"]).metrics.names) == ["mrr"]
