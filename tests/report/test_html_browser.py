"""The HTML report in a real headless browser: plots render, a table sorts on click."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixture import write_run

from bench.report import content, html
from bench.report.load import load_runs

CHROMIUM = Path("/usr/bin/chromium-headless-shell")


@pytest.mark.skipif(not CHROMIUM.is_file(),
                    reason=f"{CHROMIUM} absent (Debian package chromium-headless-shell)")
def test_plots_render_and_tables_sort(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="python package playwright not installed")
    m = load_runs([write_run(tmp_path / "run")])
    page_html = html.write(content.build(m, content.Options(all_pairs=True)),
                           tmp_path / "report.html")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_html.resolve().as_uri())
            widths = page.eval_on_selector_all("img", "els => els.map(e => e.naturalWidth)")
            assert len(widths) >= 2 and all(w > 0 for w in widths), widths
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            assert (tmp_path / "report.png").stat().st_size > 10_000
            table = "table.sortable >> nth=0"
            col = "p95 ms"

            def column() -> list[str]:
                return page.eval_on_selector(table, """(t, name) => {
                    const i = [...t.tHead.rows[0].cells].findIndex(c => c.textContent === name);
                    return [...t.tBodies[0].rows].map(r => r.cells[i].textContent); }""", col)

            before = column()
            page.click(f"{table} >> th:text-is('{col}')")
            asc = column()
            page.click(f"{table} >> th:text-is('{col}')")
            desc = column()
            nums = [float(v) for v in before if v != "-"]
            assert [float(v) for v in asc if v != "-"] == sorted(nums)
            assert [float(v) for v in desc if v != "-"] == sorted(nums, reverse=True)
            assert asc[-1] == "-" or "-" not in asc  # missing values sort last
            assert asc != before
        finally:
            browser.close()
