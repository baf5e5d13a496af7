"""Reformulations by decomposition: the parts a conjunctive question names, one search each.

A multi-part question ("Explain A and its connection to B.", "What is the term for <gloss>,
and how does it relate to B and C?") needs evidence for each part, and one embedding of the
whole question sits between them. The rules, in order:

1. the question's frame is dropped: a leading "Explain", "Describe", "What is / are / does
   (the term)", "What is the term for", "Which term means", "What do you call", "Tell me
   about", and a trailing "mean";
2. the relation clause is cut out ("how is / does it relate / is it related / connected
   to", "its connection / relation to", "and how they are connected / related");
3. what is left is split on commas and on " and " outside parentheses.

Each part that differs from the question itself (case-folded) is a reformulation, in order,
duplicates dropped, at most ``max_parts``. A single-part question ("What does the term hop
mean?") gives its bare term ("hop"), which the look searches only when the first search was
not confident. Rules, not a model: they are exact for the phrasings of FOLDOC's multi-part
categories and degrade to "no reformulation" on text they do not match.
"""

from __future__ import annotations

import re

from bench.config.build import OptionError
from bench.data.base import Query

_FRAME = re.compile(
    r"^(?:explain|describe|tell me about|what do you call|which term means|"
    r"what is the term for|what (?:is|are|was|were|does|do)(?: the term)?)\s+", re.I)
_TRAILING = re.compile(r"\s+mean$", re.I)
_RELATION = re.compile(
    r",?\s*(?:and\s+)?(?:how\s+(?:is|are|does|do)\s+(?:it|they)\s+(?:related|relate|connected"
    r"|connect)(?:\s+to)?|(?:what\s+is\s+)?its\s+(?:connection|relation(?:ship)?)\s+to|"
    r"how\s+(?:it|they)\s+(?:is|are)\s+(?:connected|related)(?:\s+to)?)\s*", re.I)
_SPLIT = re.compile(r",\s*(?:and\s+)?|\s+and\s+", re.I)


def _split_outside_parens(text: str) -> list[str]:
    """``_SPLIT`` pieces of ``text``, not splitting inside parentheses."""
    masked, depth = [], 0
    for ch in text:
        depth += ch == "("
        masked.append("\0" if depth > 0 else ch)
        depth -= ch == ")" and depth > 0
    cuts = [m.span() for m in _SPLIT.finditer("".join(masked))]
    out, start = [], 0
    for s, e in cuts:
        out.append(text[start:s])
        start = e
    out.append(text[start:])
    return out


def parts_of(text: str) -> list[str]:
    """The parts of a question (rules 1-3 of the module docstring), in order."""
    core = text.strip().rstrip("?.! ")
    core = _TRAILING.sub("", _FRAME.sub("", core, count=1))
    pieces = [p for chunk in _RELATION.split(core) for p in _split_outside_parens(chunk)]
    out: list[str] = []
    for p in pieces:
        p = p.strip(" ,;:").strip()
        if p and p.casefold() not in {o.casefold() for o in out}:
            out.append(p)
    return out


class DecomposeReformulator:
    name = "decompose"

    def __init__(self, *, max_parts: int = 4) -> None:
        if max_parts < 1:
            raise OptionError("max_parts", f"must be >= 1, got {max_parts}")
        self.max_parts = max_parts

    def cache_params(self) -> dict[str, object]:
        return {"max_parts": self.max_parts, "rules": "1"}

    def reformulate(self, query: Query) -> tuple[str, ...]:
        whole = query.text.strip().casefold()
        parts = [p for p in parts_of(query.text) if p.casefold() != whole]
        return tuple(parts[:self.max_parts])
