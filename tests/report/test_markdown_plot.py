"""report.png shows every config (facet rows of 8, never a cut) and flags saturated metrics."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

from matplotlib.axes import Axes

from bench.metrics.stats import CompletionAccounting
from bench.report.base import ConfigReport, RunReport
from bench.report.markdown import PER_ROW, MarkdownReport
from bench.results.records import ConfigRow, SummaryRow


def _row(i: int) -> ConfigRow:
    return ConfigRow(f"c{i}", f"config {i}", "dense", "{}", None, "ok", None, None, None, None,
                     None, 0, None, None, None, 0, None, None, None, None, None, None, 0, None,
                     None, None)


def _report(tmp_path: Path, n: int) -> RunReport:
    acc = CompletionAccounting(10, 10, 0, 0, 0, 0, 0)
    configs = []
    for i in range(n):
        rows = []
        for scope in ("all", "category:a"):
            m = 0.5 + 0.01 * i
            rows.append(SummaryRow(f"c{i}", scope, "ndcg@10", True, 10, m, m - 0.02, m + 0.02))
            rows.append(SummaryRow(f"c{i}", scope, "recall@100", True, 10, 1.0, 1.0, 1.0))
        configs.append(ConfigReport(f"c{i}", f"config {i}", {}, acc, tuple(rows), (), None,
                                    _row(i)))
    return RunReport("r", tmp_path, "x", "cpu", "d", "f" * 12, 1, 10, 0, 1, tuple(configs), (),
                     (), {}, False, None, (), 1.0, ())


def test_nine_configs_all_plotted_and_saturation_flagged(tmp_path: Path) -> None:
    rep = _report(tmp_path, 9)
    orig_errorbar, orig_text = Axes.errorbar, Axes.text
    with mock.patch.object(Axes, "errorbar", autospec=True, side_effect=orig_errorbar) as eb, \
            mock.patch.object(Axes, "text", autospec=True, side_effect=orig_text) as tx:
        MarkdownReport(primary_metrics=["ndcg@10", "recall@100"])._plot(rep, tmp_path / "p.png")
    labels = [c.kwargs["label"] for c in eb.call_args_list]
    # one errorbar call per config, all on the ndcg@10 facets: 8 on the first row, 1 on the next
    assert labels == [f"config {i}" for i in range(9)]
    assert PER_ROW == 8
    texts = [c.args[3] for c in tx.call_args_list]
    # recall@100 = 1.0 everywhere: named once per facet row instead of drawn
    assert sum("recall@100 = 1.0000 for all 9 configs" in t for t in texts) == 2
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_html_reporter_writes_md_png_html(tmp_path: Path) -> None:
    from report_fixture import write_run

    from bench.report.html import HtmlReport

    d = write_run(tmp_path / "run")
    rep = _report(d, 3)
    out = HtmlReport(primary_metrics=["ndcg@10", "recall@100"], tensorboard=True).write(rep)
    assert [p.name for p in out] == ["report.md", "report.png", "report.html", "tensorboard"]
    assert "dense(huge)" in (d / "report.html").read_text()  # the pruned config is listed
