"""Per-query values equal pytrec_eval's to 1e-9 on a random graded run with ties."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.evaluate import main
from bench.metrics.engine import Qrels, Run, evaluate

pytrec_eval = pytest.importorskip("pytrec_eval")

# bench name -> pytrec_eval measure (and how to derive it, for metrics trec_eval lacks)
DIRECT = {
    "ndcg@5": "ndcg_cut_5", "ndcg@10": "ndcg_cut_10", "ndcg@100": "ndcg_cut_100",
    "recall@5": "recall_5", "recall@100": "recall_100", "precision@5": "P_5",
    "precision@10": "P_10", "mrr": "recip_rank", "map": "map", "map@10": "map_cut_10",
    "r_precision": "Rprec",
}
MEASURES = {"ndcg_cut.5,10,100", "recall.5,100", "P.5,10", "recip_rank", "map", "map_cut.10",
            "Rprec"}


def random_case(seed: int, n: int = 400) -> tuple[dict, dict]:
    """Graded qrels (-1..3) and a run with many score ties, float32-only ties, missing and
    empty rankings, unanswerable queries and run-only queries."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n):
        qid = f"q{q}"
        judged = rng.choice(120, int(rng.integers(1, 15)), replace=False)
        qrels[qid] = {f"d{d}": int(rng.integers(-1, 4)) for d in judged}
        if q % 17 == 0:
            continue  # missing run
        m = int(rng.integers(0, 60))
        docs = rng.choice(120, m, replace=False)
        scores = np.round(rng.random(m), 1)
        # equal as float32, different as float64: only the float32 rule ties these
        scores[::7] = 0.3 + rng.random(len(scores[::7])) * 1e-12
        run[qid] = {f"d{d}": float(s) for d, s in zip(docs, scores, strict=True)}
    run["extra"] = {"d1": 1.0}
    return qrels, run


def derived(ref: dict[str, float], exp_ref: dict[str, float]) -> dict[str, float]:
    rr = ref["recip_rank"]
    return {
        "mrr@3": rr if rr >= 1 / 3 else 0.0,
        "hit_rate@5": 1.0 if ref["P_5"] > 0 else 0.0,
        "ndcg_exp@10": exp_ref["ndcg_cut_10"],
    }


def max_abs_diff(qrels: dict, run: dict, level: int) -> tuple[float, int]:
    ref = pytrec_eval.RelevanceEvaluator(qrels, MEASURES, relevance_level=level).evaluate(run)
    # 2^g - 1 grades turn trec_eval's linear-gain nDCG into the exponential-gain one
    exp_qrels = {q: {d: (2**g - 1 if g > 0 else g) for d, g in j.items()} for q, j in qrels.items()}
    exp_ref = pytrec_eval.RelevanceEvaluator(exp_qrels, {"ndcg_cut.10"}).evaluate(run)
    names = [*DIRECT, "mrr@3", "hit_rate@5", "ndcg_exp@10"]
    ev = evaluate(Qrels.from_mapping(qrels), Run.from_mapping(run), names, relevance_level=level)
    worst, compared = 0.0, 0
    for i, q in enumerate(ev.query_ids):
        if q not in ref:  # missing run: pytrec_eval skips it, bench scores an empty ranking
            assert all(ev.values[m][i] == 0.0 for m in names)
            continue
        want = {m: ref[q][p] for m, p in DIRECT.items()} | derived(ref[q], exp_ref[q])
        for m in names:
            worst = max(worst, abs(ev.values[m][i] - want[m]))
            compared += 1
    return worst, compared


@pytest.mark.parametrize("level", [1, 2])
def test_every_metric_matches_pytrec_eval(level: int) -> None:
    qrels, run = random_case(seed=level)
    worst, compared = max_abs_diff(qrels, run, level)
    assert compared > 1000
    assert worst <= 1e-9


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_from_files_matches_pytrec_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    qrels, run = random_case(seed=3, n=150)
    qf = _write(tmp_path / "qrels.txt",
                [f"{q} 0 {d} {g}" for q, j in qrels.items() for d, g in j.items()])
    rng = np.random.default_rng(0)
    rows = [f"{q} Q0 {d} 0 {s!r} tag" for q, r in run.items() for d, s in r.items()]
    rf = _write(tmp_path / "run.txt", [rows[i] for i in rng.permutation(len(rows))])
    assert main([str(qf), str(rf), "-m", *DIRECT, "--per-query", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    for q, values in ref.items():
        if q not in out["per_query"]:
            continue
        for m, p in DIRECT.items():
            assert abs(out["per_query"][q][m] - values[p]) <= 1e-9
    expected = [q for q, j in qrels.items() if any(g >= 1 for g in j.values())]
    assert out["num_queries"] == len(expected)
    # a query with an empty ranking writes no line: from the file it is missing too
    assert out["missing_runs"] == sum(not run.get(q) for q in expected)
    assert out["queries_without_relevant"] == len(qrels) - len(expected)
    for m in DIRECT:
        mean = np.mean([out["per_query"][q][m] for q in expected])
        assert out["aggregate"][m] == pytest.approx(mean, abs=1e-12)
