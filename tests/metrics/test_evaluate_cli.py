"""``python -m bench.evaluate``: formats, outputs, and one-line ``file:line`` errors."""

from __future__ import annotations

import json
import math
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
    (["-m", "recall"], "needs a cutoff"),
    (["-m", "P"], "needs a cutoff, e.g. P.10"),
    (["-m", "bogus@3"], "valid metrics: ndcg[@K] (ndcg_cut/ndcg)"),
    (["-m", "ann_recall@10"], "valid metrics"),
    # issue 18: a cutoff too large for an integer was an OverflowError traceback
    (["-m", "map@99999999999999999999"], "the cutoff must be <= 2147483647"),
    (["-m", "P.5,99999999999999999999"], "the cutoff must be <= 2147483647"),
    (["-m", "ndcg@" + "9" * 5000], "the cutoff must be <= 2147483647"),
    (["-M", "0"], "max-docs"),
    (["-c", "--averaging", "bench"], "contradicts"),
    (["--relevance-level", "0"], "relevance-level"),
    (["--format", "xml"], "invalid choice"),
])
def test_bad_command_line_is_one_line(argv: list[str], words: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    q, r = _files(tmp_path)
    assert main([q, r, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err
    # only names bench.evaluate can score are offered: no set-level or ANN metric
    assert "false_exclusion_rate" not in err and "ann_recall@K" not in err


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
    assert proc.stderr.strip() == f"{r}:1: expected at least 6 columns (qid Q0 docid rank " \
                                  "score tag), found 5"


# q3: judged all non-relevant, in the run; q4: one relevant doc, not in the run
AVG_QRELS = QRELS + "q4 0 d4 1\n"
AVG_RUN = RUN + "q3 Q0 d9 1 0.3 t\n"


@pytest.mark.parametrize("argv,queries,mrr", [
    ([], {"q1", "q2", "q4"}, (1 / 2 + 1 + 0) / 3),
    (["--averaging", "bench"], {"q1", "q2", "q4"}, (1 / 2 + 1 + 0) / 3),
    (["--averaging", "trec_eval"], {"q1", "q2", "q3"}, (1 / 2 + 1 + 0) / 3),
    (["--averaging", "trec_eval_c"], {"q1", "q2", "q3", "q4"}, (1 / 2 + 1 + 0 + 0) / 4),
    (["-c"], {"q1", "q2", "q3", "q4"}, (1 / 2 + 1 + 0 + 0) / 4),
])
def test_averaging_modes(argv: list[str], queries: set[str], mrr: float, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    q, r = _files(tmp_path, AVG_QRELS, AVG_RUN)
    out = _json(capsys, q, r, "-m", "recip_rank", "--per-query", *argv)
    assert set(out["per_query"]) == queries and out["num_queries"] == len(queries)
    assert out["aggregate"]["mrr"] == pytest.approx(mrr)
    assert out["averaging"] == (argv[-1] if argv and argv[0] != "-c" else
                                "trec_eval_c" if argv else "bench")


def test_trec_eval_names_comma_form_and_output(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    q, r = _files(tmp_path, AVG_QRELS, AVG_RUN)
    assert main([q, r, "-m", "P.1,2", "recall_1", "ndcg_cut.2", "map_cut.1", "Rprec",
                 "success.1", "ndcg", "recip_rank", "map", "--format", "trec_eval", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {(m, qid): v for m, qid, v in (line.split("\t") for line in lines)}
    rows = {(m.strip(), qid): v for (m, qid), v in rows.items()}
    # trec_eval's default averaging with --format trec_eval: q1, q2, q3 (in both files)
    assert rows[("num_q", "all")] == "3" and rows[("runid", "all")] == "t"
    assert rows[("P_1", "q1")] == "0.0000" and rows[("P_2", "q1")] == "0.5000"
    assert rows[("P_2", "all")] == f"{(1 / 2 + 1 / 2 + 0) / 3:.4f}"
    assert rows[("recip_rank", "all")] == f"{(1 / 2 + 1 + 0) / 3:.4f}"
    assert rows[("success_1", "all")] == f"{(0 + 1 + 0) / 3:.4f}"
    assert rows[("ndcg", "q1")] == f"{(1 / math.log2(3)):.4f}"  # the one relevant doc at rank 2
    assert {m for m, _ in rows} >= {"P_1", "P_2", "recall_1", "ndcg_cut_2", "map_cut_1",
                                     "Rprec", "success_1", "ndcg", "recip_rank", "map"}
    assert all(len(line.split("\t")[0]) == 22 for line in lines)  # trec_eval's %-22s


def test_comments_extra_columns_whitespace_and_max_docs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = ("# a comment line\n  # another\nq1\tQ0  d2 1 0.9 t extra columns\r\n"
           "\nq1 Q0 d1 2 0.5 t\nq2 Q0 d#3 1 0.1 t\nq2 Q0 d3 2 0.05 t\n")
    qrels = "# judged by hand\nq1 0 d1 1\nq1\t0\td2\t0\nq2 0 d3 2\n"
    q, r = _files(tmp_path, qrels, run)
    out = _json(capsys, q, r, "-m", "mrr", "--per-query")
    assert out["per_query"] == {"q1": {"mrr": 1 / 2}, "q2": {"mrr": 1 / 2}}  # 'd#3' is an id
    out = _json(capsys, q, r, "-m", "mrr", "--per-query", "-M", "1")
    assert out["per_query"] == {"q1": {"mrr": 0.0}, "q2": {"mrr": 0.0}}
    # -M cuts in trec_eval order (score desc), not file order
    q, r = _files(tmp_path, qrels, "q1 Q0 d2 1 0.1 t\nq1 Q0 d1 2 0.9 t\nq2 Q0 d3 1 1 t\n")
    assert _json(capsys, q, r, "-m", "mrr", "-M", "1")["aggregate"] == {"mrr": 1.0}


def test_help_lists_every_metric_once_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for line in ("ndcg[@K], ndcg_cut.K | ndcg_cut_K, ndcg", "precision@K, P.K | P_K",
                 "mrr[@K], recip_rank", "r_precision, Rprec", "hit_rate@K, success.K"):
        assert line in text
    assert "false_exclusion_rate" not in text and "trec_eval_c" in text


def _bytes_files(tmp_path: Path, qrels: bytes, run: bytes) -> tuple[str, str]:
    (tmp_path / "qrels").write_bytes(qrels)
    (tmp_path / "run").write_bytes(run)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


Q, R = QRELS.encode(), RUN.encode()
# (qrels bytes, run bytes, file at fault, line, words)
HOSTILE = {
    "run doc id with a space": (Q, R + b"q2 Q0 doc one 2 0.05 t\n", "run", 4, "whitespace"),
    "qrels doc id with a space": (Q + b"q2 0 doc one 1\n", R, "qrels", 5, "columns"),
    # (an id whose second half is a number, "d 9", shifts columns undetectably, as in trec_eval)
    "run doc id with a tab": (Q, b"q1 Q0 d\tx 1 0.5 t\n", "run", 1, "whitespace"),
    "huge relevance grade": (Q + b"q2 0 d7 99999999999999999999\n", R, "qrels", 5,
                             "out of range"),
    "huge negative grade": (Q + b"q2 0 d7 -2147483649\n", R, "qrels", 5, "out of range"),
    "invalid UTF-8 in run": (Q, R + b"q2 Q0 d\xff\xfe 2 0.05 t\n", "run", 4, "UTF-8"),
    "invalid UTF-8 in qrels": (b"q1 0 d\xc3( 1\n" + Q, R, "qrels", 1, "UTF-8"),
    "NUL byte in an id": (Q, R + b"q2 Q0 d3\x00 2 0.05 t\n", "run", 4, "NUL"),
    "duplicate doc in run": (Q, R + b"q1 Q0 d2 9 0.01 t\n", "run", 4, "twice"),
    "duplicate doc in qrels": (Q + b"q1 0 d1 0\n", R, "qrels", 5, "twice"),
    "duplicate doc in a split query": (Q, R + b"q2 Q0 d4 2 0.05 t\nq1 Q0 d1 3 0.2 t\n", "run",
                                       5, "twice"),
    "NaN score": (Q, R + b"q2 Q0 d8 2 NaN t\n", "run", 4, "NaN"),
    "only comments": (Q, b"# nothing\n# here\n", "run", 0, "no rows"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_input_is_one_line_exit_2(case: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run, bad, line, words = HOSTILE[case]
    q, r = _bytes_files(tmp_path, qrels, run)
    assert main([q, r]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and words in err
    where = q if bad == "qrels" else r
    assert err.startswith(f"{where}:{line}: " if line else f"{where}: ")


def test_odd_numbers_are_read_like_trec_eval(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # scores outside the exact fast path (400 digits, exponents, inf) fall back to Python's
    # parse; huge integer ids are plain strings
    big = b"9" * 400
    run = (b"q1 Q0 d2 1 " + big + b" t\nq1 Q0 d1 2 1e-400 t\n"
           b"q2 Q0 d3 1 -inf t\n" + b"q" + big + b" Q0 d1 1 1 t\n")
    q, r = _bytes_files(tmp_path, Q, run)
    out = _json(capsys, q, r, "-m", "mrr", "--per-query")
    assert out["per_query"] == {"q1": {"mrr": 1 / 2}, "q2": {"mrr": 1.0}}


# issue 18: a first qrels line whose columns mix tabs and spaces was refused ("found 2 columns")
MIXED_QRELS = "q1\t0 d1 1\nq1 0\td2\t0\nq2  \t0\t d3 \t 2\nq3\t0 d9\t0\n"
MIXED_RUN = "q1 Q0\td2 1\t0.9 t\nq1\tQ0 d1 2 0.5\tt\nq2 Q0 d3\t1 0.1 t\n"


@pytest.mark.parametrize("qrels,run", [(MIXED_QRELS, RUN), (QRELS, MIXED_RUN),
                                       (MIXED_QRELS, MIXED_RUN),
                                       (QRELS.replace(" ", "\t"), RUN.replace(" ", " \t "))])
def test_columns_split_on_any_whitespace_mix(qrels: str, run: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    spaced = _json(capsys, *_files(tmp_path, QRELS, RUN), "-m", "ndcg@10", "map", "mrr",
                   "precision@2", "-q")
    (tmp_path / "mixed").mkdir()
    mixed = _json(capsys, *_files(tmp_path / "mixed", qrels, run), "-m", "ndcg@10", "map",
                  "mrr", "precision@2", "-q")
    assert mixed == spaced
    assert spaced["per_query"]["q1"]["mrr"] == 1 / 2 and spaced["num_queries"] == 2
