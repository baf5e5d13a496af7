"""The TREC reader: numbers equal Python's parse bit for bit, grouping keeps file order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.metrics.trec_io import detect_qrels_format, read_qrels, read_run


def test_scores_parse_exactly_like_python(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(3000) * 10.0 ** rng.integers(-30, 30, 3000)
    tokens = ([f"{v:.3f}" for v in x[:600]] + [repr(float(v)) for v in x[600:1200]]
              + [f"{v:.17g}" for v in x[1200:1800]] + [f"{v:e}" for v in x[1800:2400]]
              + [str(int(v * 1e6) % 100000) for v in x[2400:2900]]
              + ["0", "-0", "+1.5", "1E5", "0.000", "000123.4500", "1e22", "1e23", "9" * 25,
                 ".5", "5.", "-.25e-3", "inf", "-inf", "1e400", "4.9e-324"] * 5
              + ["0.6898301657029192", "2.129133"] * 10)
    lines = "".join(f"q{i // 100} Q0 d{i} {i} {t} tag\n" for i, t in enumerate(tokens))
    (tmp_path / "run").write_text(lines)
    run = read_run(tmp_path / "run")
    want = np.array([float(t) for t in tokens])
    assert run.scores is not None
    assert np.array_equal(run.scores.view(np.int64), want.view(np.int64))


def test_split_queries_keep_first_seen_and_file_order(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("b Q0 d1 1 1 t\na Q0 d2 1 1 t\nb Q0 d3 2 0.5 t\n"
                                  "a Q0 d4 2 0.5 t\nb Q0 d5 3 0.1 t\n")
    run = read_run(tmp_path / "run")
    assert run.query_ids == ("b", "a")
    assert run.offsets.tolist() == [0, 3, 5]
    assert [d.decode() for d in run.doc_ids] == ["d1", "d3", "d5", "d2", "d4"]
    assert run.scores is not None and run.scores.tolist() == [1, 0.5, 0.1, 1, 0.5]


def test_qrels_grades_and_unicode_ids(tmp_path: Path) -> None:
    (tmp_path / "qrels").write_text("q1 0 dé 3\nq1 0 d\u00a0x -1\nq2 0 d 0\n", encoding="utf-8")
    qrels = read_qrels(tmp_path / "qrels")
    assert qrels.query_ids == ("q1", "q2") and qrels.rels.tolist() == [3, -1, 0]
    # U+00A0 is not C whitespace: it stays inside the id, as trec_eval keeps it
    assert [d.decode() for d in qrels.doc_ids] == ["dé", "d\u00a0x", "d"]


def test_pieces_parsed_in_parallel_equal_one_piece() -> None:
    from bench_kernels import cpu

    # blank and comment lines, queries crossing piece boundaries, a final line without "\n"
    lines = []
    for i in range(400):
        lines.append(f"q{i // 37} Q0 d{i} {i} {i / 7:.4f} t")
        if i % 53 == 0:
            lines += ["", "# note", "   "]
    buf = np.frombuffer("\n".join(lines).encode(), dtype=np.uint8).copy()
    args = (np.int64(6), np.int64(0), np.int64(0), np.int64(2), np.int64(4), False, np.int64(3))
    one = cpu.scan_trec_lines(buf, *args, np.int64(1), np.int64(4))
    n = one[7]
    assert n == 400 and one[8] == 11 and one[1] == 4  # rows, queries, longest id ("d399")
    assert bytes(one[0][399]) == b"d399" and bytes(one[0][5]) == b"d5\0\0"
    for parts in (2, 7, 64):
        many = cpu.scan_trec_lines(buf, *args, np.int64(parts), np.int64(4))
        assert many[7:] == one[7:] and many[1] == one[1]
        for a, b in zip((one[0], *one[2:4]), (many[0], *many[2:4]), strict=True):
            assert np.array_equal(a[:n], b[:n])
        for a, b in zip(one[4:7], many[4:7], strict=True):
            assert np.array_equal(a, b)


def test_ids_longer_than_the_sample_are_rescanned_to_full_width(tmp_path: Path) -> None:
    # the sampled windows (start, evenly spaced, end) see only 2-byte ids; one line between
    # them holds a longer id: the reader must scan again at its width, never cut it
    from bench_kernels import api

    def line(i: int, doc: str) -> str:  # every line 40 bytes: offsets are known
        head = f"q{i // 10:05d} Q0 {doc} 1 1 "
        return head + "t" * (39 - len(head)) + "\n"

    n, long_id = 40000, "d_very_long_document_id"
    size = 40 * n
    windows = [min(size * k // 64, size - 4096) for k in range(65)]
    j = next(j for j in range(n) if all(j * 40 + 40 <= lo or j * 40 >= lo + 4096
                                        for lo in windows))
    text = "".join(line(i, long_id if i == j else f"d{i % 10}") for i in range(n))
    buf = np.frombuffer(text.encode(), dtype=np.uint8).copy()
    assert api.sample_width(buf, 2) == 2
    (tmp_path / "run").write_text(text)
    run = read_run(tmp_path / "run")
    assert run.doc_ids.dtype == np.dtype(f"S{len(long_id)}")
    assert run.doc_ids[j] == long_id.encode() and run.doc_ids[0] == b"d0"
    assert len(run.doc_ids) == n and run.scores is not None and np.all(run.scores == 1.0)


def test_error_line_is_global_with_pieces() -> None:
    from bench_kernels import cpu

    text = "".join(f"q1 Q0 d{i} {i} 1 t\n" for i in range(300)) + "q1 Q0 dx\n"
    buf = np.frombuffer(text.encode(), dtype=np.uint8).copy()
    out = cpu.scan_trec_lines(buf, np.int64(6), np.int64(0), np.int64(0), np.int64(2),
                              np.int64(4), False, np.int64(3), np.int64(5), np.int64(4))
    assert (out[9], out[10]) == (301, 3)


def test_qrels_format_from_a_mixed_whitespace_first_line(tmp_path: Path) -> None:
    cases = {
        "q1\t0 d1 1\n": ("trec", False),  # trec_eval reads any whitespace run
        "q1 0\td1\t1\n": ("trec", False),
        "q1\t0\td1 1\n": ("trec", False),
        "q1\tQ0 d1 1\n": ("trec", False),
        "q1\td1\t1\n": ("beir", False),
        "query-id\tcorpus-id\tscore\nq1\td1\t1\n": ("beir", True),
        # a BEIR corpus id may hold a space: three tab columns, not an iteration column
        "q1\tdoc one\t1\n": ("beir", False),
    }
    for i, (text, want) in enumerate(cases.items()):
        (tmp_path / f"q{i}").write_text(text)
        assert detect_qrels_format(tmp_path / f"q{i}") == want, text
    (tmp_path / "spaced").write_text("q1\tdoc one\t1\n")
    qrels = read_qrels(tmp_path / "spaced")
    assert qrels.query_ids == ("q1",) and qrels.doc_ids.tolist() == [b"doc one"]
