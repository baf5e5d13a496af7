"""Parse Debian's dictd files (``foldoc.index`` + ``foldoc.dict.dz``) into ``Entry`` records.

In: the index and dict paths (as unpacked by ``deb.extract_dictd``). Out: ``read_dictd`` returns
the entries in dictionary order; ``parse_entry`` turns one raw dictd span into an ``Entry``
(cleaned definition text, aliases, tags, cross-references) or None.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

from bench.data.jsonl import Where


@dataclass(frozen=True)
class Entry:
    """One parsed FOLDOC entry.

    ``text`` is the cleaned definition: paragraphs joined by a blank line, cross-references
    reduced to their words, dates, citations and link-only paragraphs dropped. ``refs`` are the
    ``{cross-reference}`` targets in order of first appearance (URL links excluded).
    """

    headword: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    text: str
    refs: tuple[str, ...]


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_VALUE = {c: i for i, c in enumerate(_B64)}
_BRACES = re.compile(r"\{([^{}]*)\}")
_LINK = re.compile(r"^(.*?)\s*\(((?:https?|ftp|mailto|news|gopher|telnet|file):.*)\)\s*$",
                   re.IGNORECASE)
_DATE_PARA = re.compile(r"^\(\d{4}-\d{2}-\d{2}\)\.?$")
_TAGS = re.compile(r"^(\d+\.\s+)?<([^<>]+)>\s*")  # "<lang, tool>" or "2. <hardware>"


def b64_number(s: str) -> int:
    """Decode a dictd base64 number (most significant digit first, no padding)."""
    n = 0
    for c in s:
        n = n * 64 + _B64_VALUE[c]
    return n


def read_dictd(index: Path, dict_dz: Path) -> list[Entry]:
    """Parse a dictd ``.index`` + ``.dict(.dz)`` pair into entries, in dictionary order.

    Several index lines (aliases) point at one span; each span is parsed once. Malformed index
    lines raise InputError(index, line, ...). ``00-database-*`` meta entries are skipped.
    """
    if dict_dz.suffix == ".dz":  # dictzip is gzip with a random-access table: gzip reads it
        with gzip.open(dict_dz) as fh:
            data = fh.read()
    else:
        data = dict_dz.read_bytes()
    spans: dict[tuple[int, int], str] = {}
    with index.open(encoding="utf-8") as fh:
        for n, raw in enumerate(fh, start=1):
            line = raw.rstrip("\n")
            if not line:
                continue
            cells = line.split("\t")
            where = Where(str(index), n)
            if len(cells) != 3 or not all(c and set(c) <= set(_B64) for c in cells[1:]):
                raise where.error("expected 'headword<TAB>base64 offset<TAB>base64 length'")
            off, length = b64_number(cells[1]), b64_number(cells[2])
            if off + length > len(data):
                raise where.error(f"span {off}+{length} lies past the end of {dict_dz.name} "
                                  f"({len(data)} bytes)")
            spans.setdefault((off, length), cells[0])
    entries = []
    for off, length in sorted(spans):
        if spans[off, length].startswith("00-database"):
            continue
        entry = parse_entry(data[off:off + length].decode("utf-8", errors="replace"))
        if entry is not None:
            entries.append(entry)
    return entries


def parse_entry(raw: str) -> Entry | None:
    """One dictd span -> Entry: heading lines (headword, aliases), a blank line, the body."""
    head, _, body = raw.strip("\n").partition("\n\n")
    names = [h.strip() for h in head.splitlines() if h.strip()]
    if not names or not body.strip():
        return None
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body)]
    paragraphs = [p for p in paragraphs if p]
    tags: list[str] = []
    refs: list[str] = []
    kept: list[str] = []
    for p in paragraphs:
        if m := _TAGS.match(p):
            tags += [t for t in (x.strip().lower() for x in m.group(2).split(","))
                     if t and t not in tags]
            p = (m.group(1) or "") + p[m.end():]
        if _DATE_PARA.match(p) or _is_citation(p) or _is_link_only(p):
            continue
        for inner in _BRACES.findall(p):
            if not _LINK.match(inner) and inner.strip() and inner.strip() not in refs:
                refs.append(inner.strip())
        kept.append(_BRACES.sub(_brace_text, p).strip())
    text = "\n\n".join(k for k in kept if k)
    return Entry(names[0], tuple(names[1:]), tuple(tags), text, tuple(refs)) if text else None


def _brace_text(m: re.Match[str]) -> str:
    """``{term}`` -> term; ``{label (http://...)}`` -> label (the URL is dropped)."""
    inner = m.group(1).strip()
    link = _LINK.match(inner)
    return link.group(1) if link else inner


def _is_citation(p: str) -> bool:
    # "[{Jargon File}]", '["Title", Author, Journal 1986].': sources, not definition text
    return p.startswith("[") and p.rstrip(".").endswith("]")


def _is_link_only(p: str) -> bool:
    # "{Home (http://x.org/)}." or "Home: {(http://x.org/)}." paragraphs carry only a URL
    rest = _BRACES.sub(lambda m: "" if _LINK.match(m.group(1).strip()) else m.group(0), p)
    return rest != p and len(re.sub(r"[\W_]+", "", rest)) <= 12 and "{" not in rest
