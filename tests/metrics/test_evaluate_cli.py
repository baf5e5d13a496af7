"""``python -m bench.evaluate``: formats, outputs, and one-line ``file:line`` errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.evaluate import main

ROOT = Path(__file__).resolve().parents[2]
QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\nq3 0 d9 0\n"
RUN = "q1 Q0 d2 1 0.9 t\nq1 Q0 d1 2 0.5 t\nq2 Q0 d3 1 0.1 t\n"


def _files(tmp_path: Path, qrels: str = QRELS, run: str = RUN) -> tuple[str, str]:
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q, r = _files(tmp_path)
    out = _json(capsys, q, r, "-m", "mrr", "precision@2", "-m", "recall@1", "--per-query")
    assert out["aggregate"] == {"mrr": (1 / 2 + 1) / 2, "precision@2": (1 / 2 + 1 / 2) / 2,
                                "recall@1": (0 + 1) / 2}
    assert out["per_query"]["q1"]["mrr"] == 1 / 2
    assert (out["num_queries"], out["missing_runs"], out["queries_without_relevant"]) == (2, 0, 1)
    assert "per_query" not in _json(capsys, q, r, "-m", "mrr")


def test_relevance_level_and_beir_qrels(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    beir = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\nq3\td9\t0\n"
    q, r = _files(tmp_path, qrels=beir)
    out = _json(capsys, q, r, "-m", "mrr", "--relevance-level", "2")
    assert out["aggregate"] == {"mrr": 1.0}
    assert (out["num_queries"], out["queries_without_relevant"]) == (1, 2)


def test_table_output_and_odd_whitespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    # tabs and repeated spaces take the line-scan path; the numbers must not change
    q, r = _files(tmp_path, run=RUN.replace(" ", "\t").replace("t\n", "t  \n"))
    assert main([q, r, "-m", "mrr", "--per-query"]) == 0
    text = capsys.readouterr().out
    assert "mrr" in text and "0.7500" in text and "missing_runs 0" in text


BAD_CASES = {
    "run column count": (QRELS, "q1 Q0 d2 1 0.9 t\nq1 Q0 d1 2 0.5\n", "run", 2, "columns"),
    "run score": (QRELS, "q1 Q0 d2 1 0.9 t\n\nq1 Q0 d1 2 high t\n", "run", 3, "not a number"),
    "run nan score": (QRELS, "q1 Q0 d2 1 nan t\n", "run", 1, "NaN"),
    "run duplicate": (QRELS, RUN + "q1 Q0 d2 3 0.1 t\n", "run", 4, "twice"),
    "run empty": (QRELS, "", "run", 0, "empty"),
    "qrels column count": ("q1 0 d1 1\nq2 0 d3\n", RUN, "qrels", 2, "columns"),
    "qrels rel": ("q1 0 d1 1\nq2 0 d3 yes\n", RUN, "qrels", 2, "not an integer"),
    "qrels duplicate": ("q1 0 d1 1\nq1 0 d1 2\n", RUN, "qrels", 2, "twice"),
    "qrels empty": ("\n\n", RUN, "qrels", 0, "empty"),
    "beir rel": ("query-id\tcorpus-id\tscore\nq1\td1\t1.5\n", RUN, "qrels", 2, "integer"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_malformed_input_is_one_line_with_file_and_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run, bad, line, words = BAD_CASES[case]
    q, r = _files(tmp_path, qrels, run)
    assert main([q, r]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    where = q if bad == "qrels" else r
    assert err.startswith(f"{where}:{line}: " if line else f"{where}: ")
    assert words in err


@pytest.mark.parametrize("argv,words", [
    (["-m", "ndcg"], "needs a cutoff"),
    (["-m", "bogus@3"], "valid metrics: ndcg@K"),
    (["-m", "ann_recall@10"], "not a ranking metric"),
    (["--relevance-level", "0"], "relevance-level"),
    (["--format", "xml"], "invalid choice"),
])
def test_bad_command_line_is_one_line(argv: list[str], words: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    q, r = _files(tmp_path)
    assert main([q, r, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, r = _files(tmp_path)
    assert main([str(tmp_path / "nope"), r]) == 2
    assert capsys.readouterr().err.startswith(f"{tmp_path / 'nope'}: ")


def test_module_entry_point(tmp_path: Path) -> None:
    q, r = _files(tmp_path, run="q1 Q0 d2 1 0.9\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "kernels")]))
    proc = subprocess.run([sys.executable, "-m", "bench.evaluate", q, r], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"{r}:1: expected 6 columns (qid Q0 docid rank score tag), " \
                                  "found 5"
