"""MTEB-style results JSON: MTEB's keys, main_score, one entry per split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.results.mteb import mteb_key, write_mteb_json


def test_keys() -> None:
    assert mteb_key("ndcg@10") == "ndcg_at_10" and mteb_key("precision@1") == "precision_at_1"
    assert mteb_key("map@100") == "map_at_100" and mteb_key("mrr@10") == "mrr_at_10"
    assert mteb_key("map") is None and mteb_key("hit_rate@10") is None
    assert mteb_key("bogus") is None


def test_written_file(tmp_path: Path) -> None:
    agg = {"ndcg@10": 0.5, "recall@100": 0.75, "map": 0.25, "hit_rate@10": 1.0}
    path = write_mteb_json(tmp_path / "mteb.json", task="SciFact", split="test",
                           aggregate=agg, evaluation_time_s=1.5)
    out = json.loads(path.read_text())
    assert out["task_name"] == "SciFact" and out["evaluation_time"] == 1.5
    assert out["scores"] == {"test": [{"ndcg_at_10": 0.5, "recall_at_100": 0.75,
                                       "main_score": 0.5, "hf_subset": "default",
                                       "languages": ["eng-Latn"]}]}


def test_main_score_must_be_computed() -> None:
    with pytest.raises(BenchError, match="main score 'ndcg@10'"):
        write_mteb_json("unused.json", task="t", split="test", aggregate={"map": 0.1},
                        evaluation_time_s=0.0)
