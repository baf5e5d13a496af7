"""WordNet 3.0 (Debian ``wordnet-base``) as an independent source of FOLDOC questions.

In: the unpacked ``usr/share/wordnet`` folder. Out: noun/adjective ``Synset`` records, the
match of a FOLDOC headword to a WordNet noun sense (``match_sense``) and the synonyms of
single-sense words (``monosemous_synonyms``).

Match rule (``match_sense``), measured on a hand-checked sample in
``tests/data/foldoc_wordnet_matches.tsv`` (README, benchmark card):
  1. a lemma of the synset equals the headword in exact spelling, case included ("MODEL" is
     not "model"), WordNet's underscores read as spaces;
  2. and the synset is about computing: its topic domain is one of ``COMPUTING_DOMAINS``, or
     its gloss (examples cut) contains a word of ``COMPUTING_CUE``;
  3. the first such sense in WordNet's order (most frequent first) wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "wordnet-base"
LICENSE = "WordNet 3.0 licence (Princeton University; permissive, keep the notice)"
DATA_DIR = "usr/share/wordnet"

#: head lemmas of the topic-domain synsets that mark a sense as computing
COMPUTING_DOMAINS = frozenset({
    "computer_science", "computer", "computing", "electronics", "communications",
    "telecommunication", "internet", "information_science", "cryptography", "programming",
    "computer_programming",
})
#: gloss words that mark a sense as computing; deliberately NOT machine, device, language,
#: code, text, file, display, signal, information: those glossed many non-computing senses
#: (a pulley "simple machine", a postal "code", an "impressive display") in the sample
COMPUTING_CUE = re.compile(
    r"\b(?:computers?|computing|computational|software|programs?|programming|data|digital|"
    r"internet|networks?|bytes?|bits?|processors?|cpu|operating system|database|web|"
    r"electronic|algorithms?|binary)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Synset:
    offset: str
    pos: str  # "n", "v" or "a"
    lemmas: tuple[str, ...]  # underscores read as spaces, "(a)"-style markers cut
    domains: tuple[str, ...]  # offsets of topic-domain synsets (";c" pointers)
    gloss: str  # definition only: the quoted examples after it are cut

    @property
    def is_computing(self) -> bool:
        return bool(COMPUTING_CUE.search(self.gloss))


def _lemma(word: str) -> str:
    return re.sub(r"\([a-z]+\)$", "", word).replace("_", " ")


def read_data(path: Path, pos: str) -> list[Synset]:
    """Parse a WordNet ``data.<pos>`` file (format: wndb(5WN))."""
    out: list[Synset] = []
    with path.open(encoding="latin-1") as fh:
        for line in fh:
            if line.startswith("  "):  # the licence header
                continue
            head, _, gloss = line.partition(" | ")
            f = head.split()
            n_words = int(f[3], 16)
            lemmas = tuple(_lemma(f[4 + 2 * i]) for i in range(n_words))
            p = 4 + 2 * n_words
            ptrs = [f[p + 1 + 4 * i: p + 5 + 4 * i] for i in range(int(f[p]))]
            domains = tuple(t[1] for t in ptrs if t[0] == ";c")
            definition = re.split(r';\s*"', gloss.strip(), maxsplit=1)[0].strip(" ;")
            out.append(Synset(f[0], pos, lemmas, domains, definition))
    return out


@dataclass(frozen=True)
class WordNet:
    nouns: tuple[Synset, ...]
    verbs: tuple[Synset, ...]
    adjectives: tuple[Synset, ...]

    @classmethod
    def load(cls, folder: Path) -> WordNet:
        return cls(tuple(read_data(folder / "data.noun", "n")),
                   tuple(read_data(folder / "data.verb", "v")),
                   tuple(read_data(folder / "data.adj", "a")))

    def all_synsets(self) -> tuple[Synset, ...]:
        return self.nouns + self.verbs + self.adjectives

    def computing_domain_offsets(self) -> frozenset[str]:
        return frozenset(s.offset for s in self.nouns if s.lemmas[0].replace(" ", "_")
                         in COMPUTING_DOMAINS)

    def noun_senses(self) -> dict[str, list[Synset]]:
        """Lemma (exact spelling) -> its noun synsets in WordNet's order."""
        index: dict[str, list[Synset]] = {}
        for s in self.nouns:
            for lemma in s.lemmas:
                index.setdefault(lemma, []).append(s)
        return index


def match_sense(headword: str, senses: dict[str, list[Synset]],
                computing: frozenset[str]) -> Synset | None:
    """The WordNet noun sense a FOLDOC headword names, by the rule in the module docstring."""
    for s in senses.get(headword, []):
        if set(s.domains) & computing or s.is_computing:
            return s
    return None


def monosemous_synonyms(synsets: Iterable[Synset]) -> dict[str, str]:
    """Single-word lower-case lemma with exactly one sense (all parts of speech) -> the first
    other lemma of that sense that does not contain it.

    Single-sense words need no word-sense disambiguation, so swapping them keeps the meaning;
    they are also the rare, high-IDF words a lexical retriever matches on.
    """
    count: dict[str, int] = {}
    first: dict[str, Synset] = {}
    for s in synsets:
        for lemma in set(s.lemmas):
            count[lemma] = count.get(lemma, 0) + 1
            first.setdefault(lemma, s)
    out: dict[str, str] = {}
    for lemma, n in sorted(count.items()):
        if n != 1 or not re.fullmatch(r"[a-z]{3,}", lemma):
            continue
        s = first[lemma]
        alts = [a for a in s.lemmas if a != lemma and lemma not in a.lower()
                and re.fullmatch(r"[a-z][a-z -]*", a)]
        if alts:
            out[lemma] = alts[0]
    return out
