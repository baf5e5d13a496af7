"""Nearest-neighbour stability across embedder versions: exact top-k, overlap@k / RBO per
probe with CIs, an embedder against itself is perfectly stable, two packaged embedders run
for real, bad input is one line before any embedding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from trace_fixtures import write_corpus

from bench.data.base import Document
from bench.traces.__main__ import main
from bench.traces.stability import compare, top_k

TOPICS = ("network routing protocol packets", "database index query planner",
          "compiler register allocation", "operating system scheduler threads",
          "cryptography public key cipher", "graphics shader pixel rendering")
DOCS = tuple(Document(f"d{i}", f"{TOPICS[i % 6]} note {i} about {TOPICS[(i * 5) % 6]}",
                      title=f"entry {i}") for i in range(30))


def _probes(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"query": f"what is {TOPICS[i % 6]} {i}?"}) + "\n"
                            for i in range(n)))
    return path


def test_top_k_is_exact_and_ordered() -> None:
    docs = np.eye(4, dtype=np.float32)
    q = np.array([[0.1, 0.9, 0.5, 0.0], [1.0, 0.0, 0.0, 0.2]], dtype=np.float32)
    assert top_k(q, docs, 3).tolist() == [[1, 2, 0], [0, 3, 1]]


def test_overlap_and_rbo_per_probe() -> None:
    ref = np.array([[0, 1, 2, 3], [4, 5, 6, 7]])
    cand = np.array([[0, 1, 2, 3], [7, 6, 9, 8]])
    s = compare(ref, cand, reference="a", candidate="b", resamples=200)
    assert s.per_probe_overlap == (1.0, 0.5)  # 4 of 4; 2 of 4 (6 and 7)
    assert s.overlap == pytest.approx(0.75)
    assert s.per_probe_rbo[0] == pytest.approx(1.0)
    assert 0.0 < s.per_probe_rbo[1] < 0.5
    assert s.top1_agreement == 0.5
    assert s.overlap_ci[0] <= s.overlap <= s.overlap_ci[1]


def test_two_packaged_embedders_against_each_other(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", DOCS)
    probes = _probes(tmp_path / "p.jsonl", 12)
    out = tmp_path / "stability.json"
    assert main(["stability", str(probes), "--corpus", str(corpus), "--from", "static_l3",
                 "--to", "static_l3", "--to", "onnx_paraphrase_l3", "--k", "5",
                 "--out", str(out)]) == 0
    rows = {r["candidate"]: r for r in json.loads(out.read_text())["rows"]}
    same = rows["static_l3"]
    assert same["overlap"] == 1.0 and same["rbo"] == pytest.approx(1.0)
    assert same["overlap_ci"] == [1.0, 1.0]
    other = rows["onnx_paraphrase_l3"]
    assert other["n_probes"] == 12 and len(other["per_probe_overlap"]) == 12
    # a table lookup and the 3-layer encoder built on the same table agree in part, not fully
    assert 0.0 < other["overlap"] < 1.0
    assert other["overlap_ci"][0] <= other["overlap"] <= other["overlap_ci"][1]
    assert all(v * 5 == round(v * 5) for v in other["per_probe_overlap"])  # shared ids / 5


@pytest.mark.parametrize(("args", "msg"), [
    (["--from", "nope", "--to", "static_l3"], "config key --from: no embedder 'nope'"),
    (["--from", "static_l3", "--to", "nope"], "config key --to: no embedder 'nope'"),
    (["--from", "static_l3", "--to", "static_l3", "--k", "31"],
     "config key --k: must be in [1, 30]"),
])
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               args: list[str], msg: str) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", DOCS)
    probes = _probes(tmp_path / "p.jsonl", 12)
    assert main(["stability", str(probes), "--corpus", str(corpus), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(msg) and len(err.splitlines()) == 1


def test_too_few_probes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", DOCS)
    probes = _probes(tmp_path / "p.jsonl", 3)
    assert main(["stability", str(probes), "--corpus", str(corpus), "--from", "static_l3",
                 "--to", "static_l3"]) == 2
    assert capsys.readouterr().err.startswith(f"{probes}: 3 probe queries")
