"""Kernel building blocks: id comparison, score keys, ranking order, duplicates, RNG."""

from __future__ import annotations

import numpy as np

from bench_kernels import api, cpu


def _order(ids: list[str], scores: list[float], kind: str = "U") -> list[str]:
    arr = np.array(ids, dtype=kind)
    perm, dup, nan = api.rank_runs(api.id_units(arr), np.array([0, len(ids)]), np.array(scores))
    assert dup[0] == -1 and nan[0] == -1
    return [ids[i] for i in perm]


def test_cmp_rows_is_strcmp_across_widths() -> None:
    a = api.id_units(np.array(["ab", "abc", "b"], dtype="S"))  # width 3
    b = api.id_units(np.array(["ab"], dtype="S"))  # width 2
    assert cpu.cmp_rows(a, 0, b, 0) == 0  # "ab\0" == "ab"
    assert cpu.cmp_rows(a, 1, b, 0) == 1  # "abc" > "ab"
    assert cpu.cmp_rows(b, 0, a, 1) == -1
    assert cpu.cmp_rows(a, 2, a, 1) == 1  # "b" > "abc"


def test_score_keys_order_like_float32() -> None:
    s = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 1e-30, -1e-30, 0.1, 0.1 + 1e-12])
    k = api.score_keys(s)
    f = s.astype(np.float32)
    def sign(x: np.ndarray) -> np.ndarray:
        return (x[:, None] > x[None, :]).astype(int) - (x[:, None] < x[None, :]).astype(int)

    assert np.array_equal(sign(k), sign(f))


def test_ties_break_by_doc_id_descending_bytes() -> None:
    # "é" is 0xC3 0xA9 in UTF-8, above "z" (0x7A); "d10" < "d9" bytewise
    ids = ["d9", "d10", "z", "é", "a"]
    expected = ["é", "z", "d9", "d10", "a"]
    assert _order(ids, [1.0] * 5) == expected
    enc = [i.encode() for i in ids]
    arr = np.array(enc, dtype="S")
    perm, _, _ = api.rank_runs(api.id_units(arr), np.array([0, 5]), np.ones(5))
    assert [enc[i].decode() for i in perm] == expected


def test_scores_equal_in_float32_are_ties() -> None:
    # 0.1 and 0.1 + 1e-12 differ as float64 but not as float32: the doc id decides
    assert _order(["a", "b"], [0.1 + 1e-12, 0.1]) == ["b", "a"]
    assert _order(["a", "b"], [0.0, -0.0]) == ["b", "a"]
    assert _order(["a", "b", "c"], [0.5, 2.0, 1.0]) == ["b", "c", "a"]


def test_duplicates_are_found_by_position() -> None:
    units = api.id_units(np.array(["x", "y", "x", "p", "q"]))
    dup = api.find_duplicates(units, np.array([0, 3, 5]))
    assert dup.tolist() == [2, -1]


def test_units_convert_between_bytes_and_code_points() -> None:
    text = api.id_units(np.array(["é", "ab"]))
    raw = api.id_units(np.array(["é".encode(), b"ab"]))
    assert api.units_as(raw, np.uint32).dtype == np.uint32
    assert api.units_as(text, np.uint8).dtype == np.uint8
    for i in range(2):
        assert cpu.cmp_rows(api.units_as(raw, np.uint32), i, text, i) == 0
        assert cpu.cmp_rows(api.units_as(text, np.uint8), i, raw, i) == 0


def test_bootstrap_is_seeded_and_thread_independent() -> None:
    v = np.arange(50, dtype=np.float64)[None, :]
    one = api.bootstrap_means(v, 200, 5)
    assert np.array_equal(one, api.bootstrap_means(v, 200, 5))
    assert not np.array_equal(one, api.bootstrap_means(v, 200, 6))
    assert abs(one.mean() - 24.5) < 1.0


def test_nan_scores_are_reported_by_row() -> None:
    units = api.id_units(np.array(["a", "b", "c"]))
    _, _, nan = api.rank_runs(units, np.array([0, 1, 3]), np.array([1.0, 2.0, np.nan]))
    assert nan.tolist() == [-1, 2]


def test_prepare_qrels_ideal_and_duplicates() -> None:
    units = api.id_units(np.array(["a", "b", "c", "a"]))
    hashes, ideal, dup = api.prepare_qrels(units, np.array([0, 3, 4]), np.array([1, 3, 2, 0]))
    assert hashes.tolist() == api.hash_rows(units).tolist()
    assert ideal.tolist() == [3, 2, 1, 0] and dup.tolist() == [-1, -1]
    dup = api.prepare_qrels(units, np.array([0, 4]), np.array([1, 3, 2, 0]))[2]
    assert dup.tolist() == [3]
