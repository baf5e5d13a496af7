"""Turn parsed FOLDOC entries into a benchmark: documents plus golden queries.

In: ``Entry`` records (``dictd.read_dictd``) and ``BuildOptions``. Out: ``build_benchmark``
returns ``Built`` (documents, queries in the four ``CATEGORIES``, qualifying count),
deterministically from ``opts.seed``. Nothing here touches the file system.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.data.base import CATEGORIES, Document, Query
from bench.data.foldoc.dictd import Entry
from bench.data.foldoc.text import (
    _DANGLING,
    _DETAIL_CUT,
    _EMAIL,
    _WORD,
    as_claim,
    lead_sentence,
    sentences,
    slug,
    stable_hash,
    unit_hash,
)

#: Bump when the build output changes for the same .deb and options (forces a rebuild).
BUILDER_VERSION = "1"


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
    phrase = masked_definition(d, words_index)
    if phrase is None:
        return None
    phrase = _SYNONYM_RE.sub(_swap, phrase)
    template = _SEMANTIC[stable_hash(seed, "tmpl", d.doc_id) % len(_SEMANTIC)]
    return Query(query_id="", text=template.format(d=phrase), category="semantic_lookup",
                 qrels=((d.doc_id, 2),), required_claims=(as_claim(d.title, d.lead),),
                 expected_answer=d.title)


def masked_definition(d: _Doc, words_index: dict[str, set[str]]) -> str | None:
    """The defining sentence as a noun phrase that does not name the term, or None (see
    ``_semantic_query``); ``words_index`` decides whether it singles out this document."""
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
    return phrase


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


def cross_refs(d: _Doc, by_name: dict[str, _Doc], exclude: set[str]) -> list[_Doc]:
    """Up to two of ``d``'s cross-references that resolve to ``by_name`` docs, in the order
    the entry links them, without repeats or ``exclude``d doc ids."""
    refs: list[_Doc] = []
    for ref in d.entry.refs:
        target = _resolve(ref, by_name)
        if target is not None and target.doc_id not in exclude and target not in refs:
            refs.append(target)
    return refs[:2]


def _multi_query(d: _Doc, by_name: dict[str, _Doc], seed: int) -> Query | None:
    """An entry plus up to two of its cross-references that are in the corpus."""
    refs = cross_refs(d, by_name, {d.doc_id})
    if not refs:
        return None
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
