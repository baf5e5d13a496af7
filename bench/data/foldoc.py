"""The default benchmark: a RAG benchmark derived from FOLDOC (Debian package ``dict-foldoc``).

Nothing of FOLDOC is committed: set-up runs ``python -m bench.data.foldoc build --out DIR``
(``make data``), which fetches the .deb, parses its dictd files and writes

    DIR/corpus.jsonl    one Document per entry (golden corpus format, see ``golden.py``)
    DIR/queries.jsonl   golden queries in the four ``CATEGORIES``
    DIR/manifest.json   source .deb (name, version, sha256), options, counts, fingerprint

The build is deterministic: every choice is keyed by sha256(seed, doc id), so the same .deb
and options give byte-identical files and the same ``Dataset.fingerprint``.
``FoldocDataset(path=DIR).load()`` reads the folder back (optionally subsampled).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.data.base import CATEGORIES, Dataset, Document, Query
from bench.data.golden import GoldenDataset, write_golden
from bench.data.jsonl import Where
from bench.errors import BenchError, ConfigError

log = logging.getLogger(__name__)

#: Bump when the build output changes for the same .deb and options (forces a rebuild).
BUILDER_VERSION = "1"
PACKAGE = "dict-foldoc"
INDEX_MEMBER = "usr/share/dictd/foldoc.index"
DICT_MEMBER = "usr/share/dictd/foldoc.dict.dz"
BUILD_HINT = "build it with `make data` (python -m bench.data.foldoc build --out {path})"


# --------------------------------------------------------------------------- dictd parsing

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


# --------------------------------------------------------------------------- text helpers

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


# --------------------------------------------------------------------------- benchmark build

@dataclass(frozen=True)
class BuildOptions:
    """What to build. Changing any field changes the output (and is recorded in the manifest)."""

    seed: int = 13
    n_docs: int = 3000
    n_exact: int = 110
    n_semantic: int = 110
    n_multi: int = 100
    n_unanswerable: int = 80
    min_chars: int = 200  # shorter definitions are mostly one-line redirects or acronym expansions

    def targets(self) -> dict[str, int]:
        return dict(zip(CATEGORIES, (self.n_exact, self.n_semantic, self.n_multi,
                                     self.n_unanswerable), strict=True))


_EXACT = ("What is {t}?", "What is {t}?", "What does the term {t} mean?", "Explain what {t} is.")
_SEMANTIC = ("Which term means: {d}?", "What is the term for {d}?", "What do you call {d}?")
_MULTI_1 = ("What is {a}, and how is it related to {b}?", "Explain {a} and its connection to {b}.")
_MULTI_2 = ("What is {a}, and how does it relate to {b} and {c}?",
            "Explain {a}, {b} and {c}, and how they are connected.")
# Light paraphrase for semantic queries, so they do not copy the definition word for word.
# Lower-case only (capitalised words are names: "Common Lisp" stays), one regex pass (so swaps
# like method <-> technique do not chain), and the article before a swapped word is fixed.
_SYNONYMS = {
    "a kind of": "a sort of", "a type of": "a kind of", "a form of": "a variety of",
    "a set of": "a collection of", "a collection of": "a group of", "a number of": "several",
    "several": "a number of", "a single": "one", "part of": "a portion of",
    "used": "employed", "uses": "employs", "using": "employing", "developed": "created",
    "created": "made", "designed": "devised", "based on": "built on", "written": "implemented",
    "built": "constructed", "produced": "manufactured", "founded": "established",
    "released": "published", "introduced": "launched", "intended": "meant",
    "originally": "initially", "allows": "enables", "allowing": "enabling", "allow": "enable",
    "provides": "offers", "provide": "offer", "providing": "offering", "running": "executing",
    "containing": "holding", "contains": "holds", "consisting of": "made up of",
    "including": "such as", "known as": "called", "called": "named", "describing": "specifying",
    "defined": "specified", "defining": "specifying", "connected": "linked",
    "connection": "link", "computer": "machine", "computers": "machines",
    "program": "piece of software", "programs": "pieces of software",
    "programming language": "coding language", "data": "information", "information": "data",
    "company": "firm", "companies": "firms", "device": "piece of hardware",
    "devices": "hardware units", "extension": "enhancement", "version": "variant",
    "variant": "version", "users": "people", "person": "individual", "people": "individuals",
    "problem": "issue", "problems": "issues", "error": "mistake", "sequence": "series",
    "series": "sequence", "result": "outcome", "method": "technique", "technique": "method",
    "scheme": "approach", "tool": "utility", "tools": "utilities", "small": "compact",
    "large": "big", "many": "numerous", "usually": "typically", "typically": "usually",
    "often": "frequently", "especially": "particularly", "particularly": "especially",
    "similar": "comparable", "different": "distinct", "multiple": "several", "simple": "basic",
    "general": "broad", "specific": "particular", "particular": "specific", "certain": "some",
    "popular": "widely used", "available": "obtainable", "fast": "quick",
}
_SYNONYM_RE = re.compile(r"\b(?:(a|an) )?(" + "|".join(
    map(re.escape, sorted(_SYNONYMS, key=len, reverse=True))) + r")\b")


def _swap(m: re.Match[str]) -> str:
    """One synonym swap; "a" / "an" before the swapped word follows the new word."""
    article, new = m.group(1), _SYNONYMS[m.group(2)]
    if article is None:
        return new
    return ("an " if new[0] in "aeiou" else "a ") + new


# headword words this generic may appear in a masked definition without giving the term away
_GENERIC = {"the", "and", "for", "with", "from", "language", "system", "systems", "protocol",
            "network", "computer", "program", "programming", "data", "file", "code", "software",
            "machine", "interface", "standard", "format", "service", "unit", "function"}
_STOPWORDS = {"the", "and", "for", "with", "from", "that", "which", "this", "its", "are", "was",
              "not", "any", "can", "one", "such", "other", "into", "than", "who", "has", "have",
              "been", "but", "all", "some", "more", "most", "used", "use", "also", "may"}
_DOC_ROLES = ((0.10, ("staff",)), (0.15, ("admin",)))  # cumulative shares of restricted docs


@dataclass(frozen=True)
class _Doc:
    """A corpus candidate: the entry, its stable id and its defining sentence."""

    entry: Entry
    doc_id: str
    lead: str

    @property
    def title(self) -> str:
        return self.entry.headword


@dataclass(frozen=True)
class Built:
    """What ``build_benchmark`` returns: the records and how many entries qualified."""

    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    n_qualifying: int


def build_benchmark(entries: Sequence[Entry], opts: BuildOptions) -> Built:
    """Entries -> documents + queries, deterministically from ``opts.seed``.

    Corpus: the first ``n_docs`` qualifying entries in seeded-hash order, kept in dictionary
    order. Unanswerable terms come from qualifying entries left OUT of the corpus whose names
    appear nowhere in it. Categories with too few candidates come out short (printed).
    """
    pool = _qualifying(entries, opts)
    order = sorted(pool, key=lambda d: stable_hash(opts.seed, "corpus", d.doc_id))
    chosen = {d.doc_id for d in order[: opts.n_docs]}
    corpus = [d for d in pool if d.doc_id in chosen]
    documents = tuple(_document(d, opts.seed) for d in corpus)
    roles = {d.doc_id: d.allowed_roles for d in documents}
    # "virtual machine" vs "Virtual Machine" are different entries: a question naming either
    # has no single gold document, so such docs stay in the corpus but are never a query target
    spelled = Counter(_norm(d.title) for d in corpus)
    targets = [d for d in corpus if spelled[_norm(d.title)] == 1]
    by_name = _name_index(targets)

    def ranked(tag: str) -> list[_Doc]:
        return sorted(targets, key=lambda d: stable_hash(opts.seed, tag, d.doc_id))

    exact = [_exact_query(d, opts.seed) for d in ranked("exact")[: opts.n_exact]]
    used = {q.qrels[0][0] for q in exact}  # keep semantic targets apart from exact ones
    words_index = _words_index(documents)
    semantic = _take(opts.n_semantic, (_semantic_query(d, opts.seed, words_index)
                                       for d in ranked("semantic") if d.doc_id not in used))
    multi = _take(opts.n_multi, (_multi_query(d, by_name, opts.seed) for d in ranked("multi")))
    unanswerable = _unanswerable(order[opts.n_docs:], documents, _name_index(corpus), opts)
    queries: list[Query] = []
    for q in (*exact, *semantic, *multi, *unanswerable):
        q = dataclasses.replace(q, query_id=f"foldoc:q{len(queries) + 1:04d}",
                                allowed_roles=_caller_roles(q, roles, opts.seed))
        queries.append(q)
    return Built(documents, tuple(queries), len(pool))


def _qualifying(entries: Sequence[Entry], opts: BuildOptions) -> list[_Doc]:
    """Entries with a substantive definition, with collision-free stable ids."""
    out: list[_Doc] = []
    taken: Counter[str] = Counter()
    for e in entries:
        lead = lead_sentence(e.text)
        if len(e.text) < opts.min_chars or lead is None or not re.search("[A-Za-z]", e.headword):
            continue
        base = slug(e.headword)
        taken[base] += 1
        # slugs never contain "--", so "clean--2" cannot collide with a real headword's slug
        suffix = f"--{taken[base]}" if taken[base] > 1 else ""
        out.append(_Doc(e, f"foldoc:{base}{suffix}", lead))
    return out


def _norm(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", title.lower())


def _document(d: _Doc, seed: int) -> Document:
    u = unit_hash(seed, "roles", d.doc_id)
    roles = next((r for share, r in _DOC_ROLES if u < share), ())
    return Document(doc_id=d.doc_id, title=d.title, text=d.entry.text, tags=d.entry.tags,
                    allowed_roles=roles)


def _name_index(corpus: Iterable[_Doc]) -> dict[str, _Doc]:
    """Lower-cased headword/alias -> corpus doc (headwords win over aliases)."""
    index: dict[str, _Doc] = {}
    docs = list(corpus)
    for d in docs:
        index.setdefault(d.title.lower(), d)
    for d in docs:
        for a in d.entry.aliases:
            index.setdefault(a.lower(), d)
    return index


def _resolve(ref: str, by_name: dict[str, _Doc]) -> _Doc | None:
    """A ``{cross-reference}`` -> corpus doc, also trying the singular of plurals."""
    r = ref.lower()
    for cand in (r, r[:-3] + "y" if r.endswith("ies") else "", r[:-2] if r.endswith("es") else "",
                 r[:-1] if r.endswith("s") else ""):
        if cand and cand in by_name:
            return by_name[cand]
    return None


def _claims(d: _Doc) -> tuple[str, ...]:
    """Atomic claims from the definition: the lead sentence, plus a second one about the term."""
    claims = [as_claim(d.title, d.lead)]
    para = d.entry.text.split("\n\n", 1)[0]
    sents = sentences(para)
    if d.lead in sents and sents.index(d.lead) + 1 < len(sents):
        nxt = sents[sents.index(d.lead) + 1]
        if 5 <= len(_WORD.findall(nxt)) <= 30:
            if nxt.startswith("It "):
                claims.append(f"{d.title} {nxt[3:]}")
            elif d.title.lower() in nxt.lower():
                claims.append(nxt)
    return tuple(claims)


def _exact_query(d: _Doc, seed: int) -> Query:
    template = _EXACT[stable_hash(seed, "tmpl", d.doc_id) % len(_EXACT)]
    claims = _claims(d)
    return Query(query_id="", text=template.format(t=d.title), category="exact_lookup",
                 qrels=((d.doc_id, 2),), required_claims=claims, expected_answer=claims[0])


def _semantic_query(d: _Doc, seed: int, words_index: dict[str, set[str]]) -> Query | None:
    """Reverse lookup: "which term means <its definition>?", lightly paraphrased.

    Uses the defining sentence without asides, e-mail addresses and trailing attributions.
    Skipped when it names the term (or a word of it), when it is too short or long, or when
    its content words do not single out this one document in the corpus.
    """
    if re.match(r"(A|An|The|Any)\s", d.lead) is None:
        return None  # only noun-phrase definitions read naturally as "the term for ..."
    phrase = d.lead[0].lower() + d.lead[1:].rstrip(".!? ")
    phrase = _EMAIL.sub("", phrase)
    phrase = re.sub(r"\s*\([^()]*\)", "", phrase)  # acronyms and asides give the term away
    phrase = _trim_details(phrase)
    names = {d.title, *d.entry.aliases}
    leaks = {w.lower() for n in names for w in _WORD.findall(n)
             if (len(w) >= 3 or w.isupper()) and w.lower() not in _GENERIC}
    words = [w.lower() for w in _WORD.findall(phrase)]
    if leaks & set(words) or not 5 <= len(words) <= 30:
        return None
    if any(n.lower() in phrase.lower() for n in names if len(n) >= 2):
        return None  # e.g. "C" inside "Objective C": masking it would garble the definition
    content = {w for w in words if len(w) >= 3 and w not in _STOPWORDS}
    holders = set.intersection(*(words_index.get(w, set()) for w in content)) if content else set()
    if holders != {d.doc_id}:
        return None  # "an operating system made by Microsoft" fits several documents
    phrase = _SYNONYM_RE.sub(_swap, phrase)
    template = _SEMANTIC[stable_hash(seed, "tmpl", d.doc_id) % len(_SEMANTIC)]
    return Query(query_id="", text=template.format(d=phrase), category="semantic_lookup",
                 qrels=((d.doc_id, 2),), required_claims=(as_claim(d.title, d.lead),),
                 expected_answer=d.title)


def _words_index(documents: Iterable[Document]) -> dict[str, set[str]]:
    """Lower-cased word -> ids of the documents whose title or text contains it."""
    index: dict[str, set[str]] = {}
    for doc in documents:
        for w in {w.lower() for w in _WORD.findall(f"{doc.title} {doc.text}")}:
            index.setdefault(w, set()).add(doc.doc_id)
    return index


def _trim_details(phrase: str) -> str:
    """Cut a trailing attribution ("..., created by J. Smith at MIT in 1988").

    Names, places and years are the rare words that let a lexical retriever match a definition
    without understanding it; the descriptive head of the phrase is kept (>= 6 words).
    """
    for m in _DETAIL_CUT.finditer(phrase):
        head, rest = phrase[: m.start()].rstrip(" ,;:-"), phrase[m.start():]
        if (len(_WORD.findall(head)) >= 6 and re.search(r"[A-Z0-9]", rest)
                and not _DANGLING.search(head)):
            return head
    return phrase


def _multi_query(d: _Doc, by_name: dict[str, _Doc], seed: int) -> Query | None:
    """An entry plus up to two of its cross-references that are in the corpus."""
    refs: list[_Doc] = []
    for ref in d.entry.refs:
        target = _resolve(ref, by_name)
        if target is not None and target.doc_id != d.doc_id and target not in refs:
            refs.append(target)
    if not refs:
        return None
    refs = refs[:2]
    pick = stable_hash(seed, "tmpl", d.doc_id)
    if len(refs) == 1:
        text = _MULTI_1[pick % 2].format(a=d.title, b=refs[0].title)
    else:
        text = _MULTI_2[pick % 2].format(a=d.title, b=refs[0].title, c=refs[1].title)
    return Query(query_id="", text=text, category="multi_doc",
                 qrels=((d.doc_id, 2), *((r.doc_id, 1) for r in refs)),
                 required_claims=(_claims(d)[0], *(_claims(r)[0] for r in refs)))


def _unanswerable(held_out: Sequence[_Doc], documents: Sequence[Document],
                  by_name: dict[str, _Doc], opts: BuildOptions) -> list[Query]:
    """Terms left out of the corpus, whose names occur in no corpus title or text."""
    haystack = "\n".join(f"{d.title}\n{d.text}" for d in documents).lower()
    out: list[Query] = []
    for d in held_out:
        if len(out) == opts.n_unanswerable:
            break
        names = {d.title.lower(), *(a.lower() for a in d.entry.aliases)}
        if any(n in by_name or _mentions(haystack, n) for n in names):
            continue
        template = _EXACT[stable_hash(opts.seed, "tmpl", d.doc_id) % len(_EXACT)]
        out.append(Query(query_id="", text=template.format(t=d.title), category="unanswerable",
                         must_abstain=True))
    return out


def _mentions(haystack: str, name: str) -> bool:
    """Whether ``name`` occurs in ``haystack`` as a whole word (str.find: regex is 100x slower)."""
    at = haystack.find(name)
    while at >= 0:
        end = at + len(name)
        if (at == 0 or not haystack[at - 1].isalnum()) and (
                end == len(haystack) or not haystack[end].isalnum()):
            return True
        at = haystack.find(name, at + 1)
    return False


def _caller_roles(q: Query, doc_roles: dict[str, tuple[str, ...]],
                  seed: int) -> tuple[str, ...]:
    """Synthetic caller roles that can always see every gold document of ``q``.

    Empty roles = an unrestricted caller. A query whose gold docs need exactly one role gets a
    caller holding it half the time; otherwise ~10% of callers are plain "staff".
    """
    needed = {r for doc_id, _ in q.qrels for r in doc_roles[doc_id]}
    u = unit_hash(seed, "caller", q.text)
    if len(needed) == 1:
        return tuple(needed) if u < 0.5 else ()
    if not needed and u < 0.10:
        return ("staff",)
    return ()


def _take(n: int, items: Iterable[Query | None]) -> list[Query]:
    out: list[Query] = []
    for q in items:
        if len(out) == n:
            break
        if q is not None:
            out.append(q)
    return out


# --------------------------------------------------------------------------- the .deb

@dataclass(frozen=True)
class Source:
    """The .deb a benchmark was built from (recorded in the manifest)."""

    deb: str
    package: str
    version: str
    sha256: str


def fetch_deb(cache_dir: Path) -> Path:
    """Download the dict-foldoc .deb into ``cache_dir`` (reusing one already there).

    ``apt-get download``; on failure ``apt-get update`` once and retry; if apt still fails,
    fetch the URL from ``apt-get download --print-uris`` with urllib and check its sha256.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    if found := sorted(cache_dir.glob(f"{PACKAGE}_*.deb")):
        return found[-1]
    if shutil.which("apt-get") is None:
        raise BenchError(f"apt-get not found: download a {PACKAGE} .deb by hand and pass "
                         "--deb PATH")
    if not _apt(["download", PACKAGE], cache_dir):
        print("foldoc: apt-get download failed; running apt-get update and retrying",
              flush=True)
        _apt(["update"], cache_dir)
        if not _apt(["download", PACKAGE], cache_dir):
            print("foldoc: apt-get download failed again; fetching its URI with urllib",
                  flush=True)
            _download_by_uri(cache_dir)
    if found := sorted(cache_dir.glob(f"{PACKAGE}_*.deb")):
        return found[-1]
    raise BenchError(f"could not download {PACKAGE} into {cache_dir}: pass --deb PATH")


def _apt(args: list[str], cwd: Path) -> bool:
    proc = subprocess.run(["apt-get", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"foldoc: apt-get {' '.join(args)} exited {proc.returncode}: {last}", flush=True)
    return proc.returncode == 0


def _download_by_uri(cache_dir: Path) -> None:
    proc = subprocess.run(["apt-get", "download", "--print-uris", PACKAGE], cwd=cache_dir,
                          capture_output=True, text=True, check=False)
    # line format: 'URL' FILENAME SIZE SHA256:HEX
    m = re.search(r"'(\S+)'\s+(\S+\.deb)\s+\d+\s+SHA256:([0-9a-f]{64})", proc.stdout)
    if m is None:
        raise BenchError(f"apt-get could not name a URI for {PACKAGE} (is the package index "
                         "available? try `apt-get update`), or pass --deb PATH")
    url, name, sha = m.groups()
    tmp = cache_dir / f".{name}.part"
    with urllib.request.urlopen(url, timeout=120) as resp, tmp.open("wb") as out:
        shutil.copyfileobj(resp, out)
    if _sha256(tmp) != sha:
        tmp.unlink()
        raise BenchError(f"{url}: downloaded file does not match the sha256 apt expects")
    tmp.rename(cache_dir / name)


def describe_deb(deb: Path) -> Source:
    """Package and version from the Debian file name ``name_version_arch.deb``."""
    parts = urllib.parse.unquote(deb.name).removesuffix(".deb").split("_")
    package, version = (parts[0], parts[1]) if len(parts) == 3 else (deb.stem, "unknown")
    return Source(deb=deb.name, package=package, version=version, sha256=_sha256(deb))


def extract_dictd(deb: Path, dest: Path) -> tuple[Path, Path]:
    """Unpack the .deb into ``dest``; returns (foldoc.index, foldoc.dict.dz) paths."""
    if shutil.which("dpkg-deb"):
        proc = subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise BenchError(f"dpkg-deb -x {deb} failed: {proc.stderr.strip()}")
    else:  # not a Debian system (e.g. --deb on macOS): a .deb is an ar archive with a tarball
        _extract_ar_members(deb, dest, (INDEX_MEMBER, DICT_MEMBER))
    index, dict_dz = dest / INDEX_MEMBER, dest / DICT_MEMBER
    if not (index.is_file() and dict_dz.is_file()):
        raise BenchError(f"{deb} does not contain {INDEX_MEMBER} and {DICT_MEMBER}")
    return index, dict_dz


def _extract_ar_members(deb: Path, dest: Path, wanted: tuple[str, ...]) -> None:
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise BenchError(f"{deb} is not a .deb (ar) archive")
    pos = 8
    while pos + 60 <= len(raw):
        name = raw[pos:pos + 16].decode().strip().rstrip("/")
        size = int(raw[pos + 48:pos + 58].decode().strip())
        body = raw[pos + 60:pos + 60 + size]
        pos += 60 + size + size % 2  # members are 2-byte aligned
        if not name.startswith("data.tar"):
            continue
        try:
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                for member in tar.getmembers():
                    path = member.name.removeprefix("./")
                    if path in wanted and member.isfile():
                        target = dest / path
                        target.parent.mkdir(parents=True, exist_ok=True)
                        fh = tar.extractfile(member)
                        assert fh is not None
                        target.write_bytes(fh.read())
        except tarfile.TarError as exc:
            raise BenchError(f"cannot read {name} in {deb} ({exc}): install dpkg-deb") from None
        return
    raise BenchError(f"{deb} has no data.tar member")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- write / read

def manifest_is_current(out: Path, opts: BuildOptions) -> bool:
    """Whether ``out`` holds a build of this builder version with these options."""
    try:
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (manifest.get("builder_version") == BUILDER_VERSION
            and manifest.get("options") == dataclasses.asdict(opts))


def write_benchmark(out: Path, built: Built, source: Source, opts: BuildOptions,
                    n_entries: int) -> dict[str, object]:
    """Write corpus/queries/manifest into a temp folder, then swap it in place of ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    write_golden(built.documents, built.queries, corpus=tmp / "corpus.jsonl",
                 queries_path=tmp / "queries.jsonl")
    by_cat = Counter(q.category for q in built.queries)
    manifest: dict[str, object] = {
        "name": "foldoc",
        "builder_version": BUILDER_VERSION,
        "options": dataclasses.asdict(opts),
        "source": {**dataclasses.asdict(source),
                   "license": "GNU FDL 1.1 or later (FOLDOC, editor Denis Howe)"},
        "counts": {
            "entries_parsed": n_entries,
            "entries_qualifying": built.n_qualifying,
            "documents": len(built.documents),
            "documents_by_roles": {"+".join(r) or "public": n for r, n in sorted(
                Counter(d.allowed_roles for d in built.documents).items())},
            "queries": len(built.queries),
            "queries_by_category": {c: by_cat.get(c, 0) for c in CATEGORIES},
        },
        "fingerprint": Dataset("foldoc", built.documents, built.queries).fingerprint,
        "files": {name: _sha256(tmp / name) for name in ("corpus.jsonl", "queries.jsonl")},
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return manifest


class FoldocDataset:
    """Reads a built FOLDOC benchmark folder (see ``main``), optionally subsampled.

    ``max_queries`` keeps a seeded, category-stratified sample of queries; ``max_docs`` keeps
    every gold document of the kept queries plus seeded filler documents up to the limit.
    """

    def __init__(self, *, path: str, max_docs: int | None = None,
                 max_queries: int | None = None) -> None:
        for key, value in (("max_docs", max_docs), ("max_queries", max_queries)):
            if value is not None and value < 1:
                raise ConfigError(f"dataset.{key}", f"must be >= 1 or null, got {value}")
        self.path = path
        self.max_docs = max_docs
        self.max_queries = max_queries

    def load(self) -> Dataset:
        root = Path(self.path)
        if not (root / "manifest.json").is_file():
            raise BenchError(f"FOLDOC benchmark not found at {root}: "
                             + BUILD_HINT.format(path=root))
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        ds = GoldenDataset(corpus=str(root / "corpus.jsonl"),
                           queries=str(root / "queries.jsonl")).load()
        if ds.fingerprint != manifest.get("fingerprint"):
            log.warning("foldoc: %s was modified after it was built (fingerprint differs from "
                        "manifest.json)", root)
        ds = subsample(ds, max_docs=self.max_docs, max_queries=self.max_queries)
        name = "foldoc" if (self.max_docs, self.max_queries) == (None, None) else (
            f"foldoc[docs={len(ds.documents)},queries={len(ds.queries)}]")
        log.info("foldoc: loaded %d documents, %d queries from %s", len(ds.documents),
                 len(ds.queries), root)
        return dataclasses.replace(ds, name=name)


def subsample(ds: Dataset, *, max_docs: int | None, max_queries: int | None,
              seed: int = 0) -> Dataset:
    """Seeded subsample keeping the category mix and every gold doc of the kept queries."""
    queries = ds.queries
    if max_queries is not None and max_queries < len(queries):
        by_cat: dict[str, list[Query]] = {}
        for q in sorted(queries, key=lambda q: stable_hash(seed, "q", q.query_id)):
            by_cat.setdefault(q.category, []).append(q)
        keep: set[str] = set()
        while len(keep) < max_queries:  # round-robin over categories keeps their shares even
            for cat in sorted(by_cat):
                if by_cat[cat] and len(keep) < max_queries:
                    keep.add(by_cat[cat].pop(0).query_id)
        queries = tuple(q for q in queries if q.query_id in keep)
    documents = ds.documents
    if max_docs is not None and max_docs < len(documents):
        gold = {doc_id for q in queries for doc_id, _ in q.qrels}
        if len(gold) > max_docs:
            log.warning("foldoc: keeping all %d gold documents of the kept queries "
                        "(more than max_docs=%d)", len(gold), max_docs)
        filler = sorted((d.doc_id for d in documents if d.doc_id not in gold),
                        key=lambda i: stable_hash(seed, "d", i))
        keep_docs = gold | set(filler[: max(0, max_docs - len(gold))])
        documents = tuple(d for d in documents if d.doc_id in keep_docs)
    if queries is ds.queries and documents is ds.documents:
        return ds
    return Dataset(name=ds.name, documents=documents, queries=queries)


# --------------------------------------------------------------------------- CLI

def build(out: Path, *, deb: Path | None, cache_dir: Path | None, opts: BuildOptions,
          force: bool = False) -> dict[str, object] | None:
    """Build the benchmark into ``out`` unless it is already current; prints one line a phase.

    Returns the manifest written, or None when ``out`` was already up to date.
    """
    if not force and manifest_is_current(out, opts):
        print(f"foldoc: {out} is up to date (builder version {BUILDER_VERSION})", flush=True)
        return None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="foldoc-") as tmp_name:
        tmp = Path(tmp_name)
        deb_path = deb if deb is not None else fetch_deb(cache_dir or tmp / "deb")
        if not deb_path.is_file():
            raise BenchError(f"--deb {deb_path}: file not found")
        source = describe_deb(deb_path)
        print(f"foldoc: source {source.deb} (version {source.version}, sha256 "
              f"{source.sha256[:12]}...)", flush=True)
        index, dict_dz = extract_dictd(deb_path, tmp / "x")
        entries = read_dictd(index, dict_dz)
    print(f"foldoc: parsed {len(entries)} entries", flush=True)
    built = build_benchmark(entries, opts)
    n_restricted = sum(1 for d in built.documents if d.allowed_roles)
    print(f"foldoc: {built.n_qualifying} entries qualify; corpus {len(built.documents)} "
          f"documents ({n_restricted} role-restricted)", flush=True)
    counts = Counter(q.category for q in built.queries)
    print("foldoc: queries " + " ".join(f"{c}={counts[c]}" for c in CATEGORIES)
          + f" total={len(built.queries)}", flush=True)
    for cat, target in opts.targets().items():
        if counts[cat] < target:
            print(f"foldoc: WARNING only {counts[cat]} of {target} {cat} queries could be "
                  "built", flush=True)
    manifest = write_benchmark(out, built, source, opts, len(entries))
    print(f"foldoc: wrote {out} (fingerprint {str(manifest['fingerprint'])[:12]}...) in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.data.foldoc build --out DIR [--deb PATH] ...``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench.data.foldoc",
                                     description="Build the FOLDOC RAG benchmark offline.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build DIR/{corpus,queries}.jsonl + manifest.json")
    b.add_argument("--out", required=True, type=Path, help="output folder")
    b.add_argument("--deb", type=Path, help="use this dict-foldoc .deb (default: apt-get it)")
    b.add_argument("--cache-dir", type=Path,
                   help="keep the downloaded .deb here (default: a temporary folder)")
    b.add_argument("--seed", type=int, default=BuildOptions.seed)
    b.add_argument("--n-docs", type=int, default=BuildOptions.n_docs)
    b.add_argument("--force", action="store_true", help="rebuild even if DIR is up to date")
    args = parser.parse_args(argv)
    try:
        build(args.out, deb=args.deb, cache_dir=args.cache_dir, force=args.force,
              opts=BuildOptions(seed=args.seed, n_docs=args.n_docs))
    except BenchError as err:
        print(f"error: {err.one_line()}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
