"""The layout model of a merged report: sections of tables, notes and PNG figures.

``bench.report.content`` decides what the sections say, ``bench.report.evidence`` builds some
of them; ``bench.report.html`` and ``bench.report.content.render_markdown`` lay them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: a table cell: shown text and the value it sorts by (None sorts last)
Cell = tuple[str, float | str | None]


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    #: right-aligned (numeric) columns
    numeric: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Figure:
    name: str
    png: bytes
    caption: str


@dataclass
class Section:
    title: str
    notes: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    #: collapsible sub-sections (drill-down per config)
    children: list[Section] = field(default_factory=list)
