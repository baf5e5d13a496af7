"""trec_eval's own test suite (tests/data/trec_eval, see its README): every value of every
measure bench supports, reproduced to trec_eval's four printed decimals.

Each case runs ``python -m bench.evaluate ... --format trec_eval`` in process with the options
trec_eval's ``make quicktest`` used, then compares each expected ``measure qid|all value`` line
whose measure bench supports (``num_q`` included: it checks the averaging) with ours.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.evaluate import main
from bench.metrics.registry import UnknownMetricError, parse_metrics

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


@dataclass(frozen=True)
class Case:
    expected: str
    qrels: str
    run: str
    options: tuple[str, ...]


CASES = [
    Case("out.test", "qrels.test", "results.test", ()),
    Case("out.test", "qrels.test.with-comments", "results.test", ()),
    Case("out.comment.test", "qrels.comment.test.gz", "results.comment.test.gz", ()),
    Case("out.test.a", "qrels.test", "results.test", ()),
    Case("out.test.aq", "qrels.test", "results.test", ("-q",)),
    Case("out.test.aqc", "qrels.test", "results.trunc", ("-q", "-c")),
    Case("out.test.aqcM", "qrels.test", "results.trunc", ("-q", "-c", "-M", "100")),
    Case("out.test.aql", "qrels.rel_level", "results.test", ("-q", "-l", "2")),
    Case("out.test.meas_params", "qrels.test", "results.test", ("-q",)),
]


def _input(name: str, tmp: Path) -> Path:
    if not name.endswith(".gz"):
        return DATA / name
    out = tmp / name[:-3]
    if not out.exists():
        with gzip.open(DATA / name, "rb") as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def _supported(measure: str) -> bool:
    try:
        return len(parse_metrics(measure, ranking_only=True)) == 1
    except UnknownMetricError:
        return False


def _lines(text: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in text.splitlines():
        measure, qid, value = line.split()
        out[(measure, qid)] = value
    return out


def compare(case: Case, tmp: Path) -> tuple[list[str], int, list[str]]:
    """(measures compared, values compared, mismatch descriptions) of one case."""
    expected = _lines((DATA / case.expected).read_text())
    measures = sorted({m for m, _ in expected if _supported(m)},
                      key=list(dict.fromkeys(m for m, _ in expected)).index)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main([str(_input(case.qrels, tmp)), str(_input(case.run, tmp)), "-m", *measures,
                     "--format", "trec_eval", *case.options])
    assert code == 0
    ours = _lines(buf.getvalue())
    checked = [(m, q) for m, q in expected if m in measures or m == "num_q"]
    bad = [f"{m} {q}: trec_eval {expected[(m, q)]}, bench {ours.get((m, q))}"
           for m, q in checked if ours.get((m, q)) != expected[(m, q)]]
    return measures, len(checked), bad


@pytest.mark.parametrize("case", CASES, ids=[f"{c.expected}<-{c.qrels}" for c in CASES])
def test_reproduces_trec_eval(case: Case, tmp_path: Path) -> None:
    measures, n, bad = compare(case, tmp_path)
    assert measures and n > len(measures)
    assert bad == []


def test_every_supported_measure_is_exercised(tmp_path: Path) -> None:
    families = set()
    for case in CASES:
        for m in compare(case, tmp_path)[0]:
            families.add(parse_metrics(m)[0].family)
    assert families == {"precision", "recall", "ndcg", "map", "mrr", "r_precision", "hit_rate"}


def test_bench_averaging_differs_where_trec_eval_averages_an_all_nonrelevant_query(
        tmp_path: Path) -> None:
    # qrels.comment.test judges one query with no relevant doc: trec_eval averages 31
    # queries, bench's convention 30, so num_q and the means must differ
    case = Case("out.comment.test", "qrels.comment.test.gz", "results.comment.test.gz",
                ("--averaging", "bench"))
    _, _, bad = compare(case, tmp_path)
    assert "num_q all: trec_eval 31, bench 30" in bad
