"""The parse sweep's attribution rule and Pareto front (bench.parsing.sweep)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from bench.parsing.sweep import Job, build, cause, chunk_summary, front, render, render_chunks
from bench.results.scores import ConfigScores


def _doc(**kw: object) -> dict[str, object]:
    return {"status": "ok", "reason": "", "cer": None, "order_distance": None, "teds": None,
            "boilerplate_recall": None, **kw}


def test_cause_names_the_status_first_then_each_damage() -> None:
    assert cause(_doc(status="empty", reason="no text layer")) == "empty: no text layer"
    assert cause(_doc(cer=0.25, teds=0.5)) == "text errors (CER 0.25); table lost (TEDS 0.50)"
    assert cause(_doc(order_distance=0.5)) == "reading order (distance 0.50)"
    assert cause(_doc(boilerplate_recall=0.0)) == "boilerplate kept (removed 0%)"
    # below every threshold: the loss is not the parse's
    assert cause(_doc(cer=0.01, order_distance=0.0, teds=1.0, boilerplate_recall=1.0)) == (
        "no parse error found (chunking / ranking)")


def test_front_keeps_the_undominated_points() -> None:
    pts = [("a", 0.9, 1.0), ("b", 0.8, 10.0), ("c", 0.7, 5.0), ("d", 0.9, 0.5)]
    # c is beaten by b on both; d by a on speed at equal quality
    assert front(pts) == ["a", "b"]


def _scores(values: dict[str, list[float]], qids: tuple[str, ...]) -> ConfigScores:
    return ConfigScores("c", qids, tuple("squad2" for _ in qids),
                        {m: np.asarray(v, np.float64) for m, v in values.items()},
                        {m: tuple("scored" for _ in v) for m, v in values.items()}, ())


def _job(parser: str, values: dict[str, list[float]], in_top: list[float],
         chunks: list[dict[str, object]] = ()) -> Job:
    qids = tuple(f"q{i}" for i in range(len(in_top)))
    view = SimpleNamespace(label="dense", scores=_scores(values, qids))
    return Job(parser, parser, "fixed_tokens", cast(Any, SimpleNamespace(configs=(view,))),
               (), {}, tuple(chunks),
               tuple({"config": "dense", "query_id": q, "answer_in_top_k": v}
                     for q, v in zip(qids, in_top, strict=True)))


def test_answers_are_paired_against_the_oracle_and_lost_answers_counted() -> None:
    oracle = _job("oracle", {"ndcg@10": [1, 1, 1, 1], "token_f1": [1, 0.5, 0, 0.5]},
                  [1, 1, 0, 1])
    parsed = _job("pypdf", {"ndcg@10": [1, 0.5, 1, 1], "token_f1": [1, 0.25, 0, 0]},
                  [1, 0, 1, 0])
    rows, _ = build([oracle, parsed])
    by = {(r["parser"], r["metric"]): r for r in rows}
    f1 = by[("pypdf", "token_f1")]
    # paired per query: deltas 0, -0.25, 0, -0.5 -> mean -0.1875; two answers fell
    assert f1["delta"] == pytest.approx(-0.1875) and f1["answers_lost"] == 2
    assert f1["queries_lost"] == 1  # nDCG@10 fell on one query
    x = by[("pypdf", "answer_in_top5")]
    # extractive bound: 0.75 -> 0.5; lost on q1 and q3, gained on q2
    assert x["mean"] == 0.5 and x["delta"] == pytest.approx(-0.25) and x["n"] == 4
    assert x["answers_lost"] == 2
    assert x["ci_low"] <= x["delta"] <= x["ci_high"]
    assert by[("oracle", "answer_in_top5")]["delta"] is None
    assert by[("oracle", "ndcg@10")]["answers_lost"] is None  # not an answer metric
    text = "\n".join(render(rows, []))
    assert "| pypdf | fixed_tokens | dense | answer_in_top5 | 4 | 0.500 | -0.250 [" in text


def test_chunk_summary_means_over_the_parsers_own_documents() -> None:
    def doc(parser: str, cut: float | None, head: float) -> dict[str, object]:
        return {"config": "dense", "parser": parser, "sentence_cut_rate": cut,
                "tables_cut": None, "tables_lost": None, "heading_match": head,
                "heading_placed": 1.0, "title_match": 1.0, "date_match": None}

    job = _job("pypdf", {"ndcg@10": [1.0]}, [1],
               [doc("pypdf", 0.5, 0.0), doc("pypdf", None, 1.0), doc("trafilatura", 1.0, 1.0)])
    rows = {r["metric"]: r for r in chunk_summary([job])}
    # the trafilatura document (a fallback type) is not pypdf's; a null value is left out
    assert rows["sentence_cut_rate"]["mean"] == 0.5 and rows["sentence_cut_rate"]["n"] == 1
    assert rows["heading_match"]["mean"] == 0.5 and rows["heading_match"]["n"] == 2
    assert rows["date_match"]["mean"] is None and rows["date_match"]["n"] == 0
    text = "\n".join(render_chunks(list(rows.values())))
    assert "| pypdf | fixed_tokens | dense | 2 | 0.500 [0.500, 0.500] |" in text


def test_a_lost_query_is_traced_once_per_job_though_two_configs_repeat_it() -> None:
    qids = ("q0",)
    doc = {"doc_id": "d0", "parser": "pypdf", "status": "empty", "reason": "no text layer",
           "type": "pdf", "layout": "scan", "pages": 1, "seconds": 1.0, "peak_rss_bytes": 0}

    def job(parser: str, ndcg: float) -> Job:
        views = tuple(SimpleNamespace(label=label, scores=_scores({"ndcg@10": [ndcg]}, qids))
                      for label in ("dense", "dense>gen"))
        return Job(parser, parser, "fixed_tokens", cast(Any, SimpleNamespace(configs=views)),
                   (doc,), {"q0": ("d0",)})

    _, attribution = build([job("oracle", 1.0), job("pypdf", 0.0)])
    assert [(a["query_id"], a["doc_id"], a["cause"]) for a in attribution] == [
        ("q0", "d0", "empty: no text layer")]
