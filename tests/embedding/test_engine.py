"""embedding=ray: the corpus pass over Ray Data actors gives the single pass's vectors bit for
bit, in the same order; a worker that dies has its shard redone and counted; a run cut short
resumes from its finished shards; bad config is one line before any work."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from texts import STATIC, corpus

from bench.embedding.base import Embedder, EmbeddingStats
from bench.embedding.engine import LocalEngine, RayEngine, ShardPlan, pass_key
from bench.embedding.onnx import OnnxEmbedder
from bench.embedding.stage import EmbedOp, build
from bench.embedding.static import StaticEmbedder
from bench.errors import BenchError, ConfigError
from bench.pipeline.node import Node

ray = pytest.importorskip("ray")



@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    # one local Ray for the module (the engine uses a running one and leaves it running);
    # the test module's classes travel to the workers by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@dataclass(frozen=True)
class StaticRecipe:
    def make(self) -> Embedder:
        return StaticEmbedder(**STATIC)


@dataclass(frozen=True)
class OnnxRecipe:
    def make(self) -> Embedder:
        return OnnxEmbedder(model="packaged:paraphrase-MiniLM-L3-v2",
                            tokenizer="packaged:all-MiniLM-L6-v2", output="461",
                            pooling="none", max_seq_length=128, batch_size=8)


class _Dies(StaticEmbedder):
    """Kills its own process (SIGKILL, no cleanup) the first time it meets ``trigger``; or,
    with ``raise_on``, raises on it every time."""

    def __init__(self, flag: str, trigger: str, *, raise_on: bool) -> None:
        super().__init__(**STATIC)
        self.flag, self.trigger, self.raise_on = Path(flag), trigger, raise_on

    def encode(self, texts: Sequence[str], *, kind: str, out: np.ndarray) -> EmbeddingStats:
        if self.trigger in texts:
            if self.raise_on:
                raise RuntimeError("this worker fails on its shard")
            if not self.flag.exists():
                self.flag.touch()
                os.kill(os.getpid(), signal.SIGKILL)
        return super().encode(texts, kind=kind, out=out)


@dataclass(frozen=True)
class DyingRecipe:
    flag: str
    trigger: str
    raise_on: bool = False

    def make(self) -> Embedder:
        return _Dies(self.flag, self.trigger, raise_on=self.raise_on)


def single_pass(emb: Embedder, texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), emb.dim), dtype=np.float32)
    LocalEngine().encode_documents(emb, texts, out=out)
    return out


def ray_pass(recipe: object, texts: list[str], tmp: Path, **opts: object
             ) -> tuple[np.ndarray, EmbeddingStats]:
    emb = recipe.make()  # type: ignore[attr-defined]
    engine = RayEngine(workers=2, shards_dir=str(tmp / "shards"), embedder=recipe,  # type: ignore[arg-type]
                       **opts)  # type: ignore[arg-type]
    out = np.zeros((len(texts), emb.dim), dtype=np.float32)
    return out, engine.encode_documents(emb, texts, out=out)


def test_static_shards_are_the_single_pass_bit_for_bit(tmp_path: Path) -> None:
    texts = corpus(230)
    want = single_pass(StaticRecipe().make(), texts)
    got, stats = ray_pass(StaticRecipe(), texts, tmp_path, shard_rows=50)
    assert np.array_equal(got, want)
    # 230 rows in shards of 50: 4 full and one of 30, all encoded by this run
    assert (stats.workers, stats.shards, stats.shards_reused, stats.shards_redone) == (2, 5, 0, 0)
    assert stats.n_texts == 230 and stats.n_truncated == 0
    assert stats.n_tokens == StaticEmbedder(**STATIC).encode(
        texts, kind="document", out=np.zeros_like(want)).n_tokens
    assert not any((tmp_path / "shards").iterdir())  # assembled, then removed


def test_onnx_shards_follow_its_length_batches_bit_for_bit(tmp_path: Path) -> None:
    texts = corpus(120)
    emb = OnnxRecipe().make()
    plan = ShardPlan.of(emb, texts, shard_rows=30)  # type: ignore[arg-type]
    # cut from the length order in whole batches of 8: 30 -> 32 rows, 4 shards (the last 24)
    assert plan.ordered and plan.shard_rows == 32
    assert [len(r) for r in plan.rows] == [32, 32, 32, 24]
    assert sorted(np.concatenate(plan.rows).tolist()) == list(range(120))
    want = single_pass(emb, texts)
    got, stats = ray_pass(OnnxRecipe(), texts, tmp_path, shard_rows=30)
    assert np.array_equal(got, want)
    assert stats.shards == 4 and stats.shards_redone == 0


def test_a_killed_worker_has_its_shard_redone_and_counted(tmp_path: Path) -> None:
    texts = corpus(200)
    texts[130] = "the worker dies on this passage"  # row 130: shard 2 of 50-row shards
    want = single_pass(StaticRecipe().make(), texts)
    flag = tmp_path / "killed"
    got, stats = ray_pass(DyingRecipe(str(flag), texts[130]), texts, tmp_path, shard_rows=50)
    assert flag.exists()  # the worker did die (SIGKILL) once
    assert np.array_equal(got, want)
    assert (stats.shards, stats.shards_reused, stats.shards_redone) == (4, 0, 1)


def test_a_run_cut_short_resumes_from_its_finished_shards(tmp_path: Path) -> None:
    texts = corpus(200)
    texts[130] = "the worker fails on this passage"
    recipe = DyingRecipe(str(tmp_path / "unused"), texts[130], raise_on=True)
    with pytest.raises(BenchError, match="a rerun encodes only the others"):
        ray_pass(recipe, texts, tmp_path, shard_rows=50, max_retries=0)
    # the failed pass gives its workers' CPUs back to the Ray it leaves running (it kept them
    # once, and the pass below waited forever for a CPU)
    deadline = time.monotonic() + 60
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray.available_resources().get("CPU", 0) == 2
    emb = StaticRecipe().make()
    folder = tmp_path / "shards" / pass_key(emb, texts,
                                            ShardPlan.of(emb, texts, shard_rows=50))  # type: ignore[arg-type]
    finished = len(list(folder.glob("part-*.json")))
    assert finished < 4 and (folder / "part-00002.npy").exists() is False
    got, stats = ray_pass(StaticRecipe(), texts, tmp_path, shard_rows=50)
    assert np.array_equal(got, single_pass(emb, texts))
    # the finished shards are read back (a worker still busy when the pass failed may have
    # finished one more since), the failed one (an attempt on record) is redone
    assert finished <= stats.shards_reused < 4
    assert stats.shards_redone >= 1


def test_the_engine_is_not_in_the_artifact_key(tmp_path: Path) -> None:
    emb = StaticEmbedder(**STATIC)
    local = Node.of(EmbedOp(emb, "document", "cpu"), "docs")
    sharded = Node.of(EmbedOp(emb, "document", "cpu", engine=RayEngine(
        workers=3, shards_dir=str(tmp_path), embedder=StaticRecipe())), "docs")
    assert local.key == sharded.key and local.ident == sharded.ident


def _cfg(embedder: dict[str, object], embedding: dict[str, object]):  # type: ignore[no-untyped-def]
    return OmegaConf.create({"embedder": embedder, "embedding": embedding})


STATIC_CFG = {"_target_": "bench.embedding.static.StaticEmbedder", **STATIC}
RAY_CFG = {"_target_": "bench.embedding.engine.RayEngine", "shards_dir": "/nonexistent"}


@pytest.mark.parametrize(("engine", "key"), [
    ({"workers": 0}, "embedding.workers"),
    ({"shard_rows": 0}, "embedding.shard_rows"),
    ({"max_retries": -1}, "embedding.max_retries"),
    ({"threads": 2}, "embedding.threads"),
])
def test_bad_engine_options_name_their_key(engine: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(_cfg(STATIC_CFG, {**RAY_CFG, **engine}), "cpu")
    assert err.value.key == key


def test_an_embedder_that_cannot_be_sharded_is_refused_before_work() -> None:
    remote = {"_target_": "bench.embedding.openai_http.OpenAIHTTPEmbedder",
              "base_url": "http://127.0.0.1:9/v1", "model": "packaged:all-MiniLM-L6-v2",
              "tokenizer": "packaged:all-MiniLM-L6-v2", "memo_dir": None}
    with pytest.raises(ConfigError) as err:
        build(_cfg(remote, RAY_CFG), "cpu")
    assert err.value.key == "embedding" and "embedding=local" in str(err.value)


def test_the_default_engine_is_local_and_builds_nothing_more() -> None:
    parts = build(_cfg(STATIC_CFG, {"_target_": "bench.embedding.engine.LocalEngine"}), "cpu")
    assert isinstance(parts["embedder"], StaticEmbedder)
    assert isinstance(parts["embedding"], LocalEngine)
