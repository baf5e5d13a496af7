"""The parse sweep's attribution rule and Pareto front (bench.parsing.sweep)."""

from __future__ import annotations

from bench.parsing.sweep import cause, front


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
