"""A tiny golden set in FOLDOC's shape: term questions whose expected answer is the title of
their grade-2 gold document, plus filler documents."""

from __future__ import annotations

from bench.data.base import Dataset, Document, Query

TERMS = {
    "binary file": "A file format for digital data that does not consist of printable "
                   "characters. Executable machine code is a common example.",
    "bit rot": "The gradual decay of storage media that corrupts stored data over years. "
               "Archivists copy data to fresh media to avoid it.",
    "page fault": "An interrupt raised when a program touches memory that is not mapped in "
                  "physical memory. The kernel then loads the page from disk.",
    "dead code": "Program instructions that can never be executed at run time. Compilers "
                 "remove it during optimisation.",
    "hash table": "A data structure that maps keys to values through a hash function of the "
                  "key. Lookups take constant time on average.",
    "race condition": "A defect where the result depends on the timing of concurrent events. "
                      "Locks and atomic operations prevent it.",
}
QUESTIONS = {
    "binary file": "What is the term for a file of data in machine-readable, unprintable form?",
    "bit rot": "What is the term for the slow decay of stored data on old media?",
    "page fault": "What is the term for the trap taken when a program reads unmapped memory?",
    "dead code": "What is the term for instructions a program can never reach?",
    "hash table": "What is the term for a key-value structure indexed by a hash of the key?",
    "race condition": "What is the term for a bug caused by the timing of concurrent events?",
}


def slug(term: str) -> str:
    return "t:" + term.replace(" ", "-")


def tiny_dataset(*, as_of: str | None = None) -> Dataset:
    docs = [Document(slug(t), text, title=t) for t, text in TERMS.items()]
    docs += [Document(f"filler:{i}", f"Filler entry {i} about printers, modems and cables "
                      f"number {i}.", title=f"filler {i}") for i in range(6)]
    queries = [Query(f"q{i}", QUESTIONS[t], "semantic_lookup", ((slug(t), 2),),
                     expected_answer=t, as_of=as_of) for i, t in enumerate(TERMS)]
    queries.append(Query("q-abstain", "What is the colour of the sky on Mars?", "unanswerable",
                         (), must_abstain=True))
    return Dataset("tiny", tuple(docs), tuple(queries))
