"""reST (Sphinx) source to plain text blocks: the truth text of the real Python documentation
pages (Debian's python3.11-doc ships each rendered page next to its ``_sources/*.rst.txt``).

Hand-written and approximate: docutils alone cannot read Sphinx sources (unknown roles and
directives), and running Sphinx is out of scope. What it does, in order:

- section titles (a line over an under/overline of one repeated punctuation character) become
  ``heading`` blocks; transitions (``-----``) and the over/underlines are dropped;
- directives: labels (``.. _x:``), comments and the directives that render no text (``index``,
  ``module``, ``sectionauthor``, ``toctree``, ``highlight``, ``testsetup``...) are dropped with
  their indented bodies; object descriptions (``.. function:: f(x)``) keep their signature;
  admonitions keep their body after the heading Sphinx prints ("Note", "See also",
  "New in version 3.2.", "Changed in version 3.2:"...); field options (``:synopsis:``) go;
- inline markup: roles keep their text (``:func:`~a.b``` -> ``b``, ``:ref:`text <t>``` ->
  ``text``), literals, emphasis, links and substitutions keep their text; ``::`` ending a
  paragraph is ``:``; list bullets and ``#.`` numbers go (the HTML draws them with CSS).

Tables (grid / simple) keep their cell text with the borders dropped; code and doctest blocks
are kept verbatim. A page's truth is therefore close to, not equal to, what the HTML shows: the
docs say so, and real-document figures are read with that floor in mind.
"""

from __future__ import annotations

import re

_ADORN = re.compile(r"^([=\-~^\"'`#*+_:.<>])\1{2,}\s*$")
_DIRECTIVE = re.compile(r"^\.\.\s+([\w:-]+)::\s*(.*)$")
_LABEL_OR_COMMENT = re.compile(r"^\.\.(\s|$)")
_OPTION = re.compile(r"^\s*:[\w -]+:")
_SILENT = frozenset({
    "index", "module", "currentmodule", "sectionauthor", "moduleauthor", "toctree",
    "highlight", "testsetup", "testcleanup", "only", "include", "literalinclude", "image",
    "figure", "raw", "productionlist", "audit-event-table", "impl-detail-hidden", "tabularcolumns",
    "rubric-hidden", "default-role", "program", "cmdoption-hidden", "availability-hidden"})
_ADMONITION = {"note": "Note", "warning": "Warning", "seealso": "See also", "tip": "Tip",
               "important": "Important", "caution": "Caution", "attention": "Attention",
               "hint": "Hint", "danger": "Danger", "error": "Error"}
_VERSION = {"versionadded": "New in version {}.", "versionchanged": "Changed in version {}:",
            "deprecated": "Deprecated since version {}:",
            "deprecated-removed": "Deprecated since version {}:"}
_ROLE = re.compile(r":[\w:+-]+:`([^`]*)`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^`>]*>`__?")
_REFNAME = re.compile(r"`([^`]+)`__?")
_LITERAL = re.compile(r"``(.+?)``")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_EMPH = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_DEFAULT_ROLE = re.compile(r"`([^`]+)`")
_SUBST = re.compile(r"\|([^|\s][^|]*?)\|(?!\w)")
_FOOTREF = re.compile(r"\s*\[(#\w*|\d+|\*)\]_")
_BULLET = re.compile(r"^(\s*)(?:[*+\-•]|#\.|\d+\.|\(\d+\))\s+")
_TABLE_BORDER = re.compile(r"^\s*[+=|-][+=|\- ]*$")


def _role_text(m: re.Match[str]) -> str:
    text = m.group(1)
    if "<" in text and text.rstrip().endswith(">"):
        return text[: text.rindex("<")].strip()
    text = text.lstrip("!")
    if text.startswith("~"):
        return text[1:].rsplit(".", 1)[-1]
    return text


def inline(text: str) -> str:
    """Inline markup of one paragraph as the text a reader sees."""
    text = _FOOTREF.sub("", text)
    text = _LITERAL.sub(lambda m: m.group(1), text)
    text = _ROLE.sub(_role_text, text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _REFNAME.sub(lambda m: m.group(1), text)
    text = _STRONG.sub(lambda m: m.group(1), text)
    text = _EMPH.sub(lambda m: m.group(1), text)
    text = _DEFAULT_ROLE.sub(lambda m: m.group(1), text)
    text = _SUBST.sub(lambda m: m.group(1), text)
    text = text.replace("\\ ", "").replace("\\", "")
    return " ".join(text.split())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def rst_blocks(source: str) -> list[tuple[str, str]]:
    """``(kind, text)`` blocks ("heading" / "paragraph") of a Sphinx reST page, in order."""
    lines = source.replace("\t", "    ").splitlines()
    out_lines: list[str] = []  # "\x00H" prefix marks a heading line; "" separates paragraphs
    i = 0
    skip_indent: int | None = None  # dropping a directive body indented deeper than this
    while i < len(lines):
        line = lines[i]
        if skip_indent is not None:
            if not line.strip() or _indent(line) > skip_indent:
                i += 1
                continue
            skip_indent = None
        stripped = line.strip()
        if _ADORN.match(stripped) and not line.startswith(" "):
            out_lines.append("")
            i += 1
            continue
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if (stripped and not line.startswith(" ") and _ADORN.match(nxt)
                and len(nxt) >= len(stripped.rstrip()) - 2):
            out_lines += ["", "\x00H" + stripped, ""]
            i += 2
            continue
        d = _DIRECTIVE.match(stripped)
        if d:
            name, arg = d.group(1).split(":")[-1], d.group(2).strip()
            base = _indent(line)
            i += 1
            while i < len(lines) and lines[i].strip() and _OPTION.match(lines[i]) \
                    and _indent(lines[i]) > base:
                i += 1
            out_lines.append("")
            if name in _SILENT:
                skip_indent = base
            elif name in _ADMONITION:
                out_lines += [_ADMONITION[name], ""]
                if arg:
                    out_lines.append(arg)
            elif name in _VERSION:
                version, _, rest = arg.partition(" ")
                out_lines.append(_VERSION[name].format(version) + (" " + rest if rest else ""))
            elif arg:
                out_lines += [arg, ""]
            continue
        if _LABEL_OR_COMMENT.match(stripped) and not line.startswith(" "):
            out_lines.append("")
            skip_indent = _indent(line)
            i += 1
            continue
        if stripped == "::" or (_TABLE_BORDER.match(line) and "|" not in stripped[1:-1]):
            out_lines.append("")
            i += 1
            continue
        if stripped.endswith("::"):
            stripped = stripped[:-2].rstrip()
            stripped = stripped + ":" if stripped else ""
        stripped = _BULLET.sub("", stripped) if stripped else stripped
        if stripped.startswith("|") and stripped.endswith("|"):
            stripped = " ".join(c.strip() for c in stripped.strip("|").split("|"))
        out_lines.append(stripped)
        i += 1
    blocks: list[tuple[str, str]] = []
    para: list[str] = []

    def flush() -> None:
        text = inline(" ".join(para))
        if text:
            blocks.append(("paragraph", text))
        para.clear()

    for ln in out_lines:
        if ln.startswith("\x00H"):
            flush()
            heading = inline(ln[2:])
            if heading:
                blocks.append(("heading", heading))
        elif not ln:
            flush()
        else:
            para.append(ln)
    flush()
    return blocks
