"""Judge calibration against human labels: kappa by hand, per category, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.calibrate import calibrate, cohen_kappa, main, read_rows, verdict_rows
from bench.errors import InputError
from bench.judge.base import Verdict


def test_kappa_of_a_small_matrix_by_hand() -> None:
    # human rows (yes, no), judge columns: n = 50, p_o = (20 + 15) / 50 = 0.7
    # p_e = (25/50)(25/50) + (25/50)(25/50) = 0.5 -> kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert cohen_kappa([[20, 5], [10, 15]]) == pytest.approx(0.4)
    assert cohen_kappa([[3, 0], [0, 2]]) == pytest.approx(1.0)
    assert cohen_kappa([[4]]) is None  # one label used by both: undefined, not 1 or 0
    assert cohen_kappa([[0, 0], [0, 0]]) is None


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _files(tmp_path: Path) -> tuple[Path, Path]:
    labels = _write(tmp_path / "labels.jsonl", [
        {"query_id": "q1", "judge": "faith", "label": True, "category": "a"},
        {"query_id": "q2", "judge": "faith", "label": True, "category": "a"},
        {"query_id": "q3", "judge": "faith", "label": False, "category": "b"},
        {"query_id": "q4", "judge": "faith", "label": False, "category": "b"},
        {"query_id": "q5", "judge": "faith", "label": True, "category": "b"},
        {"query_id": "q6", "judge": "faith", "label": True, "category": "b"},
    ])
    verdicts = _write(tmp_path / "verdicts.jsonl", [
        {"query_id": "q1", "judge": "faith", "label": "true"},
        {"query_id": "q2", "judge": "faith", "label": "false"},
        {"query_id": "q3", "judge": "faith", "label": "false"},
        {"query_id": "q4", "judge": "faith", "label": "true"},
        {"query_id": "q5", "judge": "faith", "label": None, "status": "invalid"},
    ])
    return labels, verdicts


def test_agreement_per_category(tmp_path: Path) -> None:
    labels, verdicts = _files(tmp_path)
    res = {a.scope: a for a in calibrate(read_rows(labels, human=True),
                                         read_rows(verdicts, human=False))}
    overall = res["all"]
    # compared q1..q4: human (T, T, F, F) vs judge (T, F, F, T): agree 2 of 4
    assert (overall.n, overall.agreement) == (4, 2 / 4)
    assert overall.labels == ("false", "true")
    assert overall.confusion == ((1, 1), (1, 1))  # rows human false/true, cols judge
    # p_o = 0.5, p_e = 0.5 * 0.5 + 0.5 * 0.5 = 0.5 -> kappa 0
    assert overall.kappa == pytest.approx(0.0)
    assert (overall.n_not_ok, overall.n_no_verdict) == (1, 1)  # q5 invalid, q6 missing
    a = res["category:a"]  # human (T, T), judge (T, F)
    assert (a.n, a.agreement, a.confusion) == (2, 1 / 2, ((0, 0), (1, 1)))
    # p_o = 1/2, p_e = (0 * 1/2) + (1 * 1/2) = 1/2 -> kappa 0
    assert a.kappa == pytest.approx(0.0)
    assert res["category:b"].n == 2 and res["category:b"].n_not_ok == 1


def test_cli_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels, verdicts = _files(tmp_path)
    assert main([str(labels), str(verdicts)]) == 0
    out = capsys.readouterr().out
    assert "category:a" in out and "human \\ judge" in out
    assert main([str(labels), str(verdicts), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["scope"] == "all" and data[0]["n"] == 4


@pytest.mark.parametrize(("line", "words"), [
    ("{not json", "malformed JSON"),
    ('{"query_id": "q1", "judge": "f", "label": true}', "missing field 'category'"),
    ('{"query_id": "q1", "judge": "f", "label": [1], "category": "a"}', "field 'label'"),
    ('[1, 2]', "expected a JSON object"),
])
def test_bad_line_is_one_line_with_file_and_line(tmp_path: Path, line: str, words: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"query_id": "q0", "judge": "f", "label": "x", "category": "a"}\n'
                      + line + "\n")
    verdicts = _write(tmp_path / "v.jsonl", [{"query_id": "q0", "judge": "f", "label": "x"}])
    assert main([str(labels), str(verdicts)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{labels}:2: ") and words in err and "\n" not in err


def test_invalid_utf8_and_a_bom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both files are read like the dataset files: invalid UTF-8 is one line naming file:line
    (not a decode traceback), a UTF-8 BOM is accepted."""
    row = '{"query_id": "q0", "judge": "f", "label": "x", "category": "a"}\n'
    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(row.encode() + b'{"query_id": "q1\xff"}\n')
    verdicts = _write(tmp_path / "v.jsonl", [{"query_id": "q0", "judge": "f", "label": "x"}])
    assert main([str(labels), str(verdicts)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{labels}:2: invalid UTF-8") and "\n" not in err
    labels.write_bytes(b"\xef\xbb\xbf" + row.encode())
    assert main([str(labels), str(verdicts)]) == 0


def test_duplicates_and_empty_files(tmp_path: Path) -> None:
    dup = _write(tmp_path / "d.jsonl", [{"query_id": "q", "judge": "f", "label": "x"}] * 2)
    with pytest.raises(InputError, match=r"d.jsonl:2: .*repeats line 1"):
        read_rows(dup, human=False)
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="no rows"):
        read_rows(empty, human=False)


def test_verdict_rows_from_verdicts() -> None:
    rows = verdict_rows([
        Verdict("q1", "faithfulness", "ok", (("faithfulness", 0.75),), ()),
        Verdict("q2", "faithfulness", "ok", (("faithfulness", 0.25),), ()),
        Verdict("q3", "faithfulness", "no_claims", (), ()),
    ], "faithfulness", threshold=0.5)
    assert [(r["label"], r["status"]) for r in rows] == [("true", "ok"), ("false", "ok"),
                                                         (None, "no_claims")]
