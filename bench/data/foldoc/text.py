"""Text helpers for the FOLDOC build: sentence splitting, definitions, ids and stable hashes.

In: definition text and headwords (strings). Out: sentences, the defining lead sentence, a
self-contained claim, a stable id slug, and process-independent hashes (``stable_hash`` /
``unit_hash``) that key every seeded choice of the build.
"""

from __future__ import annotations

import hashlib
import re

_ABBREV = {"e.g", "i.e", "etc", "c.f", "cf", "vs", "dr", "mr", "mrs", "ms", "prof", "inc", "ltd",
           "corp", "co", "st", "al", "no", "approx", "jan", "feb", "mar", "apr", "jun", "jul",
           "aug", "sep", "sept", "oct", "nov", "dec", "ca", "fig", "vol", "ver", "esp", "viz"}
_STARTERS = {"It", "The", "This", "These", "That", "A", "An", "In", "It's", "Its", "See", "For",
             "There", "They", "He", "She", "Some", "Most", "Many", "When", "If", "As", "On"}
_BOUNDARY = re.compile(r"[.!?][\"')\]]?\s+(?=[A-Z0-9\"(\[])")
# sense numbers "1. ", pronunciations "/toss/", "(ADT)" and "[Usenet]" before the definition
_LEAD_JUNK = re.compile(
    r"^(?:\d+\.\s+|/[^/]{1,60}/\s*|\([^()]{1,80}\)\s*|\[[^\[\]]{1,40}\]\s*|[,;:]\s*|or\s+)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'+#-]*")
# zero-width, so ", founded in 1976" offers both "," and " in" as cut points
_DETAIL_CUT = re.compile(r"(?=,\s|;\s|\s(?:by|at|from|in|for|on|developed|created|written|"
                         r"made|designed|invented|founded|released|produced|originally)\s)")
_DANGLING = re.compile(r"\b(?:and|or|of|the|a|an|to|with|developed|created|written|made|"
                       r"designed|invented|founded|released|produced|originally|started|used|"
                       r"based|found|known|available|supported|implemented)$")
_EMAIL = re.compile(r"\s*<[^<>\s]+@[^<>\s]+>")


def sentences(paragraph: str) -> list[str]:
    """Split a paragraph into sentences, not at abbreviations ("e.g.") or initials ("J.")."""
    out, start = [], 0
    for m in _BOUNDARY.finditer(paragraph):
        before = paragraph[start:m.start()].split()
        last = before[-1].lower().rstrip(".") if before else ""
        nxt = paragraph[m.end():].split(" ", 1)[0]
        # "J. Smith" is an initial, but "written in C. It ..." ends a sentence
        initial = re.fullmatch(r"(?:[a-z]\.)*[a-z]", last) and nxt not in _STARTERS
        if m.group(0)[0] == "." and (last in _ABBREV or initial):
            continue
        out.append(paragraph[start:m.start() + 1].strip())
        start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


def lead_sentence(text: str) -> str | None:
    """The defining first sentence, without sense numbers, pronunciations or "(ACRONYM)".

    None when it is too short or too long to serve as a definition (6..45 words).
    """
    para = text.split("\n\n", 1)[0]
    while m := _LEAD_JUNK.match(para):
        para = para[m.end():]
    sents = sentences(para)
    if not sents:
        return None
    n_words = len(_WORD.findall(sents[0]))
    return sents[0] if 6 <= n_words <= 45 and sents[0].endswith((".", "!", "?")) else None


def as_claim(headword: str, sentence: str) -> str:
    """Make a definition self-contained: "A data type ..." -> "stack is a data type ..."."""
    sentence = _EMAIL.sub("", sentence)  # author addresses are noise in a claim
    named = re.escape(headword)
    if re.match(rf"(?:(?:A|An|The)\s+)?{named}\b", sentence, re.IGNORECASE):
        return sentence  # "A stack is ..." / "Stack: ..." already names the term
    if re.match(r"(?:A|An|The|Any)\s", sentence):
        return f"{headword} is {sentence[0].lower()}{sentence[1:]}"
    return f"{headword}: {sentence}"


def slug(headword: str) -> str:
    """Stable id fragment: lower-case, '+' -> 'plus', '#' -> 'sharp', other runs -> '-'."""
    s = headword.lower().replace("+", " plus ").replace("#", " sharp ").replace("&", " and ")
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "x"


def stable_hash(*parts: object) -> int:
    """A platform-independent 64-bit hash (``hash()`` is salted per process)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def unit_hash(*parts: object) -> float:
    """``stable_hash`` mapped into [0, 1)."""
    return stable_hash(*parts) / 2**64
