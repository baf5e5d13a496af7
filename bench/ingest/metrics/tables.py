"""Tables: TEDS (tree-edit-distance similarity) and cell-level accuracy.

TEDS is PubTabNet's (Zhong et al., "Image-based table recognition", 2020):
``TEDS = 1 - EditDist(T_a, T_b) / max(|T_a|, |T_b|)`` over the HTML trees of the two tables,
insertion and deletion costing 1, renaming a node 1 unless both nodes have the same tag (and,
for cells, the same colspan / rowspan), in which case two cells cost the normalised
Levenshtein distance of their texts (0 with ``structure_only``, the "TEDS-S" variant).
The tree edit distance is apted's (APTED, Pawlik & Augsten); the HTML is read with the
standard library's ``html.parser``; the cost model and the normalisation are ours, written
from the paper's definition (not copied from its reference code).

A table is either HTML (``"<table>...</table>"``) or a grid (rows of cell strings, ``None``
for an empty cell, as pdfplumber returns them).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from bench.ingest.metrics._deps import need, normalise_ws

Grid = Sequence[Sequence[str | None]]
Table = str | Grid

#: the elements kept in a table tree; others (<b>, <span>...) only contribute their text
_TREE_TAGS = frozenset({"table", "thead", "tbody", "tfoot", "tr", "td", "th"})
_CELL_TAGS = frozenset({"td", "th"})


@dataclass
class _Node:
    tag: str
    colspan: int = 1
    rowspan: int = 1
    text: str = ""
    children: list[_Node] = field(default_factory=list)

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children)


class _TableTree(HTMLParser):
    """The first <table> of an HTML string as a _Node tree (cell text whitespace-normalised)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root: _Node | None = None
        self.stack: list[_Node] = []
        self.done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done or tag not in _TREE_TAGS or (tag != "table" and not self.stack):
            return
        if tag == "table" and self.stack:  # a nested table is text-less structure we drop
            return
        a = dict(attrs)
        node = _Node(tag, _span(a.get("colspan")), _span(a.get("rowspan")))
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        if self.done or tag not in _TREE_TAGS or not self.stack:
            return
        # close up to the matching element (tolerates a missing </td> or </tr>)
        while self.stack:
            node = self.stack.pop()
            if node.tag == tag:
                break
        if not self.stack:
            self.done = True

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1].tag in _CELL_TAGS:
            self.stack[-1].text += data


def _span(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def _finish(node: _Node) -> _Node:
    node.text = normalise_ws(node.text)
    for c in node.children:
        _finish(c)
    return node


def grid_to_html(grid: Grid) -> str:
    """A grid as a plain ``<table><tr><td>`` HTML table (no header row, no spans)."""
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c or '')}</td>" for c in row) + "</tr>"
                   for row in grid)
    return f"<table>{rows}</table>"


def parse_table(table: Table) -> _Node:
    """The tree of an HTML table or a grid; an HTML string without a table is an empty root."""
    source = table if isinstance(table, str) else grid_to_html(table)
    p = _TableTree()
    p.feed(source)
    p.close()
    return _finish(p.root) if p.root is not None else _Node("table")


def table_grid(table: Table) -> list[list[str]]:
    """Rows of whitespace-normalised cell texts (spans ignored: a spanning cell is one cell)."""
    if not isinstance(table, str):
        return [[normalise_ws(c or "") for c in row] for row in table]
    rows: list[list[str]] = []

    def walk(n: _Node) -> None:
        if n.tag == "tr":
            rows.append([c.text for c in n.children if c.tag in _CELL_TAGS])
        else:
            for c in n.children:
                walk(c)

    walk(parse_table(table))
    return rows


def teds(pred: Table, true: Table, *, structure_only: bool = False) -> float:
    """TEDS of ``pred`` against ``true`` in [0, 1] (1: identical trees and cell texts)."""
    apted = need("apted", "apted", "the ingestion metric teds")
    lev = need("rapidfuzz.distance.Levenshtein", "rapidfuzz", "the ingestion metric teds")
    a, b = parse_table(pred), parse_table(true)

    class _Config(apted.Config):  # type: ignore[misc, name-defined]
        def rename(self, x: _Node, y: _Node) -> float:
            if x.tag != y.tag or x.colspan != y.colspan or x.rowspan != y.rowspan:
                return 1.0
            if x.tag in _CELL_TAGS and not structure_only:
                return float(lev.normalized_distance(x.text, y.text))
            return 0.0

        def children(self, node: _Node) -> list[_Node]:
            return node.children

    dist = apted.APTED(a, b, _Config()).compute_edit_distance()
    return 1.0 - float(dist) / max(a.size(), b.size())


def cell_accuracy(pred: Table, true: Table) -> float:
    """Share of the true table's cells whose text the predicted table has at the same (row,
    column), compared case-insensitively after whitespace normalisation."""
    p, t = table_grid(pred), table_grid(true)
    total = sum(len(r) for r in t)
    if total == 0:
        return 1.0 if not any(p) else 0.0
    hits = 0
    for i, row in enumerate(t):
        for j, cell in enumerate(row):
            if i < len(p) and j < len(p[i]) and p[i][j].casefold() == cell.casefold():
                hits += 1
    return hits / total


def table_scores(extracted: Sequence[Table], truth: Mapping[str, Any]) -> dict[str, float]:
    """Each truth table scored against the extracted table with the best TEDS (each extracted
    table used once, truth tables in order); a truth table with none left scores 0.

    Returns the means of ``teds``, ``teds_struct`` and ``cell_accuracy`` over the truth tables,
    ``tables_true`` and ``tables_found`` (extracted tables matched with TEDS > 0), or ``{}``
    when the truth has no table (nothing to score; not a perfect score)."""
    truths = list(truth.get("tables", []))
    if not truths:
        return {}
    left = list(range(len(extracted)))
    teds_v: list[float] = []
    struct_v: list[float] = []
    cells_v: list[float] = []
    found = 0
    for t in truths:
        best, best_i, best_ref = 0.0, -1, None
        for i in left:
            ref = _reference(extracted[i], t)
            s = teds(extracted[i], ref)
            if s > best:
                best, best_i, best_ref = s, i, ref
        if best_i < 0:
            teds_v.append(0.0)
            struct_v.append(0.0)
            cells_v.append(0.0)
            continue
        left.remove(best_i)
        found += 1
        teds_v.append(best)
        assert best_ref is not None
        struct_v.append(teds(extracted[best_i], best_ref, structure_only=True))
        cells_v.append(cell_accuracy(extracted[best_i], best_ref))
    n = len(truths)
    return {"teds": sum(teds_v) / n, "teds_struct": sum(struct_v) / n,
            "cell_accuracy": sum(cells_v) / n, "tables_true": float(n),
            "tables_found": float(found)}


def _reference(extracted: Table, truth_table: Mapping[str, Any]) -> Table:
    """The form of a truth table an extracted table is compared with: an extracted grid (rows
    of cells, as text-layer parsers give them) against the truth's grid, an extracted HTML
    table against the truth's HTML. A grid carries no header or body markup, so scoring it
    against ``<thead>``/``<th>`` would charge every grid parser for markup it cannot give
    (the oracle's own grid scored 0.67-0.84)."""
    if isinstance(extracted, str) and truth_table.get("html"):
        return str(truth_table["html"])
    if truth_table.get("cells") is not None:
        return [list(r) for r in truth_table["cells"]]
    return str(truth_table["html"])
