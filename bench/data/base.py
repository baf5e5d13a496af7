"""Records and Protocol of the `data` stage.

A dataset is a corpus of ``Document`` s and a set of golden ``Query`` s with graded qrels.
Everything downstream refers to documents by their int32 row index in ``Dataset.documents``
(``doc_idx``) so kernels can work on flat numpy arrays; external string ids stay here.

Adding a source: write a class with a ``load() -> Dataset`` method (keyword-only constructor
options, validated by the config schema), put it in this package, and add
``conf/dataset/<name>.yaml`` with ``_target_`` pointing at it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

#: Query categories used by the built-in FOLDOC benchmark. User data may use any string.
CATEGORIES = ("exact_lookup", "semantic_lookup", "multi_doc", "unanswerable")


@dataclass(frozen=True, slots=True)
class Document:
    """One corpus document. ``allowed_roles`` empty means visible to every caller.

    ``title_in_text``: ``text`` already holds the title (BEIR/MTEB passages are
    ``(title + " " + text).strip()``); ``title`` is then for display only and chunkers do not
    prepend it again.
    """

    doc_id: str
    text: str
    title: str = ""
    tags: tuple[str, ...] = ()
    allowed_roles: tuple[str, ...] = ()
    tenant: str = ""
    title_in_text: bool = False


@dataclass(frozen=True)
class Query:
    """One golden query.

    ``qrels`` holds (doc_id, grade) pairs, grade >= 1 meaning relevant at the default
    relevance level. ``must_abstain`` queries have no relevant document in the corpus.
    ``allowed_roles`` are the CALLER's roles (empty: the caller is not role-restricted);
    ``tenant`` the caller's tenant (a document of another tenant is not eligible for it;
    required on every query when a document has a tenant, ``bench.filters.entitlement``).
    ``expected_answers``: every reference answer when the source gives several (SQuAD, NQ,
    TriviaQA: alternatives, EM/F1 take the max over them); ``expected_answer`` is then the
    first of them (the reference a judge is shown). :attr:`references` is what is scored.
    ``split``: development / calibration / release / monitoring (``bench.data.splits``).
    """

    query_id: str
    text: str
    category: str = "default"
    qrels: tuple[tuple[str, int], ...] = ()
    required_claims: tuple[str, ...] = ()
    must_abstain: bool = False
    allowed_roles: tuple[str, ...] = ()
    as_of: str | None = None
    expected_answer: str | None = None
    expected_answers: tuple[str, ...] = ()
    #: the set the query belongs to (``bench.data.splits.SPLITS``; "" = none). Not in the
    #: fingerprint: it changes which run evaluates the query, never a value.
    split: str = ""
    tenant: str = ""
    #: where the row came from, as (key, value) strings: a row reviewed from production
    #: traffic names its trace id, reviewer and date (``bench.traces.review``). Not in the
    #: fingerprint: it never changes a value.
    provenance: tuple[tuple[str, str], ...] = ()

    @property
    def references(self) -> tuple[str, ...]:
        """The reference answers EM/F1 are scored against (max over them)."""
        if self.expected_answers:
            return self.expected_answers
        return (self.expected_answer,) if self.expected_answer else ()


@dataclass(frozen=True)
class Corpus:
    """The documents of a dataset without its queries: what document-side work (chunks,
    document embeddings, indexes) reads. ``fingerprint`` hashes the documents alone
    (:func:`corpus_fingerprint`), so that work is keyed on the corpus and reused by every
    query set over it; having no queries, it cannot depend on them."""

    name: str
    documents: Sequence[Document]
    fingerprint: str

    @property
    def doc_ids(self) -> list[str]:
        return doc_ids_of(self.documents)


@dataclass(frozen=True)
class Dataset:
    """A loaded benchmark. ``fingerprint`` is a content hash of documents and queries: it
    keys every query-side cache; :attr:`corpus` (documents alone) keys document-side work.

    ``n_dropped_queries``: queries of the source left out because they have no positive
    judgement (BEIR splits); ``dropped_reason`` says why, for run.json and the report header.
    """

    name: str
    #: a tuple, or a ``bench.data.table.DocumentTable`` (Arrow columns) for a large corpus
    documents: Sequence[Document]
    queries: tuple[Query, ...]
    fingerprint: str = field(default="")
    n_dropped_queries: int = 0
    dropped_reason: str = ""

    def __post_init__(self) -> None:
        if not self.fingerprint:
            object.__setattr__(self, "fingerprint", fingerprint(self.documents, self.queries))

    @cached_property
    def doc_ids(self) -> list[str]:
        """Every document's id in row order (computed once: a ``DocumentTable`` builds its
        strings from the id column)."""
        return doc_ids_of(self.documents)

    def doc_index(self) -> dict[str, int]:
        """External doc id -> doc_idx (row in ``documents``)."""
        return {d: i for i, d in enumerate(self.doc_ids)}

    @cached_property
    def corpus(self) -> Corpus:
        """The documents alone, fingerprinted without the queries (computed once)."""
        return Corpus(self.name, self.documents, corpus_fingerprint(self.documents))


def doc_ids_of(documents: Sequence[Document]) -> list[str]:
    """The documents' ids in row order (a ``DocumentTable`` reads its id column)."""
    ids: list[str] | None = getattr(documents, "doc_ids", None)
    return ids if ids is not None else [d.doc_id for d in documents]


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """The documents part of :func:`fingerprint`: the fingerprint of the corpus with no
    queries (also what ``bench.serve`` puts on its spans)."""
    return fingerprint(documents, ())


def fingerprint_fields(d: Document) -> list[object]:
    """What a document puts into the fingerprint (its fields, in this order)."""
    fields: list[object] = [d.doc_id, d.title, d.text, d.tags, d.allowed_roles, d.tenant]
    if d.title_in_text:  # only then: fingerprints of existing datasets stay as they were
        fields.append("title_in_text")
    return fields


def fingerprint(documents: Sequence[Document], queries: tuple[Query, ...]) -> str:
    """sha256 over a canonical serialisation of every document and query field."""
    h = hashlib.sha256()
    rows = getattr(documents, "fingerprint_rows", None)  # a DocumentTable: from its columns
    for fields in (rows() if rows is not None else map(fingerprint_fields, documents)):
        h.update(json.dumps(fields, ensure_ascii=False).encode())
        h.update(b"\x00")
    h.update(b"\x01queries\x01")
    for q in queries:
        fields_q: list[object] = [q.query_id, q.text, q.category, q.qrels, q.required_claims,
                                  q.must_abstain, q.allowed_roles, q.as_of, q.expected_answer]
        if q.expected_answers:  # only then: fingerprints of existing datasets stay as they were
            fields_q.append(list(q.expected_answers))
        if q.tenant:  # only then: fingerprints of existing datasets stay as they were
            fields_q.append(["tenant", q.tenant])
        h.update(json.dumps(fields_q, ensure_ascii=False).encode())
        h.update(b"\x00")
    return h.hexdigest()


class DatasetSource(Protocol):
    """Loads a benchmark. Bad rows raise ``bench.errors.InputError`` naming file:line."""

    def load(self) -> Dataset:
        """Read (or build) the dataset and return it; never silently skip a bad row."""
        ...
