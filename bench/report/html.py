"""One self-contained HTML report: opens from disk without a server.

Plots are embedded as base64 PNG ``<img>``; tables sort on a header click with a few lines of
inline JavaScript (numeric columns by value, the rest as text; missing values last); the
drill-down sits in ``<details>`` blocks. No external script, style sheet or font.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from bench.report.base import RunReport
from bench.report.content import Report
from bench.report.sections import Section, Table
from bench.results.write import atomic_write_bytes

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:110em;color:#222}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.82em}
th,td{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}
th{background:#f0f0f0;cursor:pointer;user-select:none;position:sticky;top:0}
th.asc::after{content:" ▲"} th.desc::after{content:" ▼"}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}
.note{margin:.3em 0;font-size:.9em} details{margin:.4em 0 .4em 1em}
summary{cursor:pointer;font-weight:600}
"""

# Sort key per cell: data-v (numbers compare numerically, text with localeCompare); cells
# without a value (data-v absent) always go last, in either direction.
_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,ci){
  th.addEventListener('click',function(){
   var asc=!th.classList.contains('asc');
   t.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc')});
   th.classList.add(asc?'asc':'desc');
   var body=t.tBodies[0], rows=Array.prototype.slice.call(body.rows);
   rows.sort(function(a,b){
    var x=a.cells[ci].dataset.v, y=b.cells[ci].dataset.v;
    if(x===undefined&&y===undefined)return 0; if(x===undefined)return 1; if(y===undefined)return -1;
    var nx=parseFloat(x), ny=parseFloat(y), r;
    if(!isNaN(nx)&&!isNaN(ny)&&th.dataset.num==='1')r=nx-ny; else r=x.localeCompare(y);
    return asc?r:-r;});
   rows.forEach(function(r){body.appendChild(r)});
  });
 });
});
"""


def _table(t: Table) -> str:
    num = [i < len(t.numeric) and t.numeric[i] for i in range(len(t.headers))]
    head = "".join(f'<th data-num="{int(n)}">{html.escape(h)}</th>'
                   for h, n in zip(t.headers, num, strict=True))
    body = []
    for row in t.rows:
        cells = []
        for (text, key), n in zip(row, num, strict=True):
            v = "" if key is None else f' data-v="{html.escape(str(key))}"'
            cells.append(f'<td{v}{" class=n" if n else ""}>{html.escape(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _section(s: Section, level: int, heading: bool = True) -> str:
    parts = [f"<h{level}>{html.escape(s.title)}</h{level}>"] if heading else []
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in s.notes]
    parts += [_table(t) for t in s.tables]
    for f in s.figures:
        data = base64.b64encode(f.png).decode()
        parts.append(f'<figure><img alt="{html.escape(f.caption)}" '
                     f'src="data:image/png;base64,{data}"><figcaption>'
                     f'{html.escape(f.caption)}</figcaption></figure>')
    for ch in s.children:
        parts.append(f"<details><summary>{html.escape(ch.title)}</summary>"
                     + _section(ch, min(level + 1, 6), heading=False) + "</details>")
    return "\n".join(parts)


def render(rep: Report) -> str:
    header = "".join(f"<li>{html.escape(h)}</li>" for h in rep.header)
    body = "\n".join(_section(s, 2) for s in rep.sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(rep.title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(rep.title)}</h1><ul>{header}</ul>{body}"
            f"<script>{_JS}</script></body></html>")


def write(rep: Report, path: Path) -> Path:
    atomic_write_bytes(path, render(rep).encode())
    return path


class HtmlReport:
    """Reporter (``conf/report/html.yaml``): report.md + report.png as ``MarkdownReport``, then
    report.html from the run's result files (and ``tensorboard/`` when asked).

    Options as MarkdownReport, plus ``all_pairs`` (all-pairs table) and ``tensorboard``.
    """

    def __init__(self, *, primary_metrics: list[str] | None = None, plot: bool = True,
                 title: str = "", all_pairs: bool = False, tensorboard: bool = False) -> None:
        from bench.report.markdown import MarkdownReport

        self.markdown = MarkdownReport(primary_metrics=primary_metrics, plot=plot, title=title)
        self.all_pairs = all_pairs
        self.tensorboard = tensorboard

    def write(self, report: RunReport) -> list[Path]:
        from bench.report.content import Options, build
        from bench.report.load import load_runs

        out = self.markdown.write(report)
        merged = load_runs([report.run_dir])
        rep = build(merged, Options(metrics=tuple(self.markdown.primary),
                                    all_pairs=self.all_pairs,
                                    title=self.markdown.title or f"bench report: "
                                                                 f"{report.experiment}"))
        out.append(write(rep, report.run_dir / "report.html"))
        if self.tensorboard:
            from bench.report.tensorboard import write_tensorboard

            out.append(write_tensorboard(merged, report.run_dir / "tensorboard"))
        return out
