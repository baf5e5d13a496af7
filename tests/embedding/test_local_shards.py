"""embedding=local with shard_rows: the corpus pass in this process, shard by shard with done
markers; the single call's vectors bit for bit; a pass cut short resumes from its finished
shards; bad config is one line before any work."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf
from texts import STATIC
from texts import corpus as texts_corpus

from bench.embedding.base import Embedder, EmbeddingStats
from bench.embedding.engine import LocalEngine, ShardPlan, pass_key
from bench.embedding.onnx import OnnxEmbedder
from bench.embedding.stage import build
from bench.embedding.static import StaticEmbedder
from bench.errors import ConfigError


def corpus(n: int) -> list[str]:
    return texts_corpus(n, seed=11)


def encode(engine: LocalEngine, emb: Embedder, texts: list[str]
           ) -> tuple[np.ndarray, EmbeddingStats]:
    out = np.zeros((len(texts), emb.dim), dtype=np.float32)
    return out, engine.encode_documents(emb, texts, out=out)


@pytest.mark.parametrize("kind", ["static", "onnx"])
def test_local_shards_are_the_single_call_bit_for_bit(kind: str, tmp_path: Path) -> None:
    emb: Embedder = StaticEmbedder(**STATIC) if kind == "static" else OnnxEmbedder(
        model="packaged:paraphrase-MiniLM-L3-v2", tokenizer="packaged:all-MiniLM-L6-v2",
        output="461", pooling="none", max_seq_length=128, batch_size=8)
    texts = corpus(150)
    want, _ = encode(LocalEngine(), emb, texts)
    got, stats = encode(LocalEngine(shard_rows=30, shards_dir=str(tmp_path)), emb, texts)
    assert np.array_equal(got, want)
    # the ONNX encoder batches by length: its shards are cut in whole batches of 8 (32 rows)
    assert (stats.workers, stats.shards, stats.shards_reused, stats.shards_redone) == \
        (1, 5, 0, 0)
    assert list(tmp_path.iterdir()) == []  # the shards are removed once assembled


class _FailsOn(StaticEmbedder):
    """Raises on the batch holding ``trigger`` (a crash in the middle of the pass)."""

    def __init__(self, trigger: str) -> None:
        super().__init__(**STATIC)
        self.trigger = trigger

    def encode(self, texts: Sequence[str], *, kind: str, out: np.ndarray) -> EmbeddingStats:
        if self.trigger in texts:
            raise RuntimeError("the pass dies here")
        return super().encode(texts, kind=kind, out=out)


def test_a_pass_cut_short_encodes_only_its_unfinished_shards(tmp_path: Path) -> None:
    texts = corpus(200)
    texts[130] = "the pass dies on this passage"
    engine = LocalEngine(shard_rows=50, shards_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="dies here"):
        encode(engine, _FailsOn(texts[130]), texts)
    emb = StaticEmbedder(**STATIC)
    folder = tmp_path / pass_key(emb, texts, ShardPlan.of(emb, texts, shard_rows=50))
    assert sorted(p.name for p in folder.glob("part-*.json")) == ["part-00000.json",
                                                                  "part-00001.json"]
    got, stats = encode(engine, emb, texts)
    want, _ = encode(LocalEngine(), emb, texts)
    assert np.array_equal(got, want)
    # shards 0 and 1 read back, shard 2 (an attempt on record) redone, shard 3 new
    assert (stats.shards, stats.shards_reused, stats.shards_redone) == (4, 2, 1)


def test_a_killed_process_leaves_its_finished_shards(tmp_path: Path) -> None:
    # kill -9 in the middle of the pass (no cleanup, no exception): the next run reuses what
    # the dead one finished
    texts = corpus(200)
    texts[130] = "the process is killed on this passage"
    script = f"""
import os, signal, sys
import numpy as np
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_local_shards import STATIC, corpus
from bench.embedding.engine import LocalEngine
from bench.embedding.static import StaticEmbedder
class Dies(StaticEmbedder):
    def encode(self, texts, *, kind, out):
        if {texts[130]!r} in texts:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().encode(texts, kind=kind, out=out)
texts = corpus(200)
texts[130] = {texts[130]!r}
out = np.zeros((200, 384), dtype=np.float32)
engine = LocalEngine(shard_rows=50, shards_dir={str(tmp_path)!r})
engine.encode_documents(Dies(**STATIC), texts, out=out)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    emb = StaticEmbedder(**STATIC)
    got, stats = encode(LocalEngine(shard_rows=50, shards_dir=str(tmp_path)), emb, texts)
    want, _ = encode(LocalEngine(), emb, texts)
    assert np.array_equal(got, want)
    assert (stats.shards, stats.shards_reused, stats.shards_redone) == (4, 2, 1)


def _cfg(embedder: dict[str, object], engine: dict[str, object]) -> DictConfig:
    target = {"_target_": "bench.embedding.static.StaticEmbedder"}
    return OmegaConf.create({"embedder": embedder if "_target_" in embedder
                             else {**target, **embedder}, "embedding": engine})


def test_bad_local_options_name_their_key() -> None:
    with pytest.raises(ConfigError) as err:
        build(_cfg(STATIC, {"_target_": "bench.embedding.engine.LocalEngine",
                            "shard_rows": 0}), "cpu")
    assert err.value.key == "embedding.shard_rows"
    remote = {"_target_": "bench.embedding.openai_http.OpenAIHTTPEmbedder",
              "base_url": "http://127.0.0.1:9/v1", "model": "packaged:all-MiniLM-L6-v2",
              "tokenizer": "packaged:all-MiniLM-L6-v2", "memo_dir": None}
    with pytest.raises(ConfigError) as err:
        build(_cfg(remote, {"_target_": "bench.embedding.engine.LocalEngine",
                            "shard_rows": 100}), "cpu")
    assert err.value.key == "embedding.shard_rows" and "cannot be split" in str(err.value)
    # without shard_rows a remote embedder is fine locally
    build(_cfg(remote, {"_target_": "bench.embedding.engine.LocalEngine"}), "cpu")


def test_the_static_encoder_gives_the_one_call_bits_block_by_block(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a large pass tokenises and encodes ENCODE_BLOCK texts at a time (its token ids then live
    # one block at a time): the vectors and the counts are the one call's
    import bench.embedding.static as static_mod

    emb = StaticEmbedder(**STATIC)
    texts = corpus(100)
    texts[37] = " ".join(["alpha"] * 400)  # longer than max_seq_length: truncated, counted
    want = np.zeros((100, emb.dim), dtype=np.float32)
    one = emb.encode(texts, kind="document", out=want)
    monkeypatch.setattr(static_mod, "ENCODE_BLOCK", 7)
    got = np.zeros((100, emb.dim), dtype=np.float32)
    blocks = emb.encode(texts, kind="document", out=got)
    assert np.array_equal(got, want)
    assert (blocks.n_texts, blocks.n_tokens, blocks.n_truncated, blocks.n_truncated_tokens,
            blocks.max_tokens) == (one.n_texts, one.n_tokens, one.n_truncated,
                                   one.n_truncated_tokens, one.max_tokens)
    assert one.n_truncated == 1
