from __future__ import annotations

from bench.robustness.overlap import flagged


def test_repeated_passages_are_flagged_diverse_ones_are_not() -> None:
    same = "What is the term for slow decay of data? The answer is hash table."
    passages = {"p1": same, "p2": same, "p3": same.upper(),  # case folded: still the same
                "p4": "Q: slow data decay, what is it called? A: hash table, say experts.",
                "c1": "Bit rot is the gradual decay of storage media."}
    assert flagged(passages, 0.8) == {"p1", "p2", "p3"}
    # 10 of 11 distinct tokens shared: Jaccard 10/11 = 0.909
    a = "one two three four five six seven eight nine ten"
    assert flagged({"a": a, "b": a + " eleven"}, 0.9) == {"a", "b"}
    assert flagged({"a": a, "b": a + " eleven"}, 0.95) == set()
