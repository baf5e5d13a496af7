"""Where the benchmark's text comes from: each source yields ``DocSpec``s (body blocks in order,
with the golden queries whose gold they are) for ``render`` to lay out.

- ``squad_docs``: the SQuAD 2.0 sample shipped in ``bench/ingest/data/squad2`` (CC BY-SA 4.0),
  or a folder in the same layout; ``per_doc`` consecutive paragraphs of one article per
  document, their answerable questions as queries with every gold answer;
- ``foldoc_docs``: a built FOLDOC benchmark folder (``make data`` writes ``.data/foldoc``);
  ``per_doc`` entries per document (headword heading + body), the FOLDOC golden queries whose
  gold entries all fall in the kept documents, their qrels mapped to the documents;
- ``python_doc_pages``: real pages of Debian's python3.11-doc (HTML as Sphinx rendered it, the
  truth from its reST source, ``bench.ingest.rst``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BenchError, InputError

SQUAD_SAMPLE = Path(__file__).parent / "data" / "squad2"


@dataclass(frozen=True)
class Block:
    kind: str  # heading | paragraph | table | footnote | list
    text: str
    #: which source unit (paragraph / entry id) the block carries: queries follow their unit
    unit: str = ""


@dataclass(frozen=True)
class QuerySpec:
    query_id: str
    query: str
    unit: str  # the paragraph / entry id that answers it
    expected_answers: tuple[str, ...] = ()
    category: str = "default"
    grade: int = 1


@dataclass(frozen=True)
class DocSpec:
    doc_id: str
    title: str
    source: str
    blocks: tuple[Block, ...]
    queries: tuple[QuerySpec, ...] = ()
    language: str = "en"
    #: the raw file of a real document (copied as is) and its type
    raw_file: Path | None = None
    raw_type: str = ""
    meta: dict[str, str] = field(default_factory=dict)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    if not path.is_file():
        raise BenchError(f"{path}: not found")
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(path, n, f"not JSON: {e.msg}") from None
            if not isinstance(row, dict):
                raise InputError(path, n, "not a JSON object")
            yield n, row


def squad_docs(folder: Path, n_docs: int, *, per_doc: int = 2) -> list[DocSpec]:
    """``n_docs`` documents of ``per_doc`` consecutive paragraphs of one article each."""
    by_article: dict[str, list[dict[str, str]]] = {}
    for n, row in _jsonl(folder / "paragraphs.jsonl"):
        try:
            pid, title, text = str(row["paragraph_id"]), str(row["title"]), str(row["text"])
        except KeyError as e:
            raise InputError(folder / "paragraphs.jsonl", n, f"missing {e.args[0]}") from None
        by_article.setdefault(title, []).append({"id": pid, "text": text})
    questions: dict[str, list[QuerySpec]] = {}
    for n, row in _jsonl(folder / "questions.jsonl"):
        try:
            q = QuerySpec(str(row["query_id"]), str(row["question"]), str(row["paragraph_id"]),
                          tuple(str(a) for a in row["answers"]),  # type: ignore[attr-defined]
                          category="squad2")
        except (KeyError, TypeError) as e:
            raise InputError(folder / "questions.jsonl", n, f"bad row: {e}") from None
        questions.setdefault(q.unit, []).append(q)
    groups: list[tuple[str, list[dict[str, str]]]] = []
    for title, paras in by_article.items():
        for k in range(0, len(paras) - per_doc + 1, per_doc):
            groups.append((title, paras[k:k + per_doc]))
    # interleave articles so that a small n still covers every article
    groups.sort(key=lambda g: (int(g[1][0]["id"].rsplit("-p", 1)[1]), g[0]))
    docs = []
    for title, paras in groups[:n_docs]:
        doc_id = "squad-" + paras[0]["id"]
        blocks = (Block("heading", title),
                  *(Block("paragraph", p["text"], unit=p["id"]) for p in paras))
        qs = tuple(q for p in paras for q in questions.get(p["id"], []))
        docs.append(DocSpec(doc_id, title, "squad2", blocks, qs))
    return docs


def foldoc_docs(folder: Path, n_docs: int, *, per_doc: int = 3, seed: int = 0,
                min_chars: int = 300) -> list[DocSpec]:
    """``n_docs`` documents of ``per_doc`` FOLDOC entries (each at least ``min_chars`` long),
    chosen among the gold entries of FOLDOC's golden queries (seeded)."""
    from bench.data.golden import read_corpus, read_queries

    corpus_path, queries_path = folder / "corpus.jsonl", folder / "queries.jsonl"
    for p in (corpus_path, queries_path):
        if not p.is_file():
            raise BenchError(f"{p}: not found: build FOLDOC first (`make data`) or pass "
                             "--n-foldoc 0")
    corpus = {d.doc_id: d for d in read_corpus(corpus_path)}
    queries = read_queries(queries_path, set(corpus))
    single = [q for q in queries if not q.must_abstain and len(q.qrels) == 1
              and len(corpus[q.qrels[0][0]].text) >= min_chars]
    entries = sorted({q.qrels[0][0] for q in single})
    random.Random(seed).shuffle(entries)
    chosen = entries[: n_docs * per_doc]
    by_entry: dict[str, list[QuerySpec]] = {}
    for q in single:
        did = q.qrels[0][0]
        answers = q.references
        by_entry.setdefault(did, []).append(QuerySpec(q.query_id, q.text, did, answers,
                                                      category=q.category,
                                                      grade=q.qrels[0][1]))
    docs: list[DocSpec] = []
    for k in range(0, len(chosen) - per_doc + 1, per_doc):
        group = chosen[k:k + per_doc]
        blocks: list[Block] = []
        for did in group:
            d = corpus[did]
            blocks.append(Block("heading", d.title or did, unit=did))
            for para in re.split(r"\n\s*\n", d.text):
                if para.strip():
                    blocks.append(Block("paragraph", " ".join(para.split()), unit=did))
        title = "FOLDOC: " + ", ".join(corpus[did].title or did for did in group)
        qs = tuple(q for did in group for q in by_entry.get(did, []))
        docs.append(DocSpec(f"foldoc-{len(docs):03d}", title, "foldoc", tuple(blocks), qs))
    return docs


def python_doc_pages(html_root: Path, n_pages: int, *, seed: int = 0,
                     min_bytes: int = 2000, max_bytes: int = 8000) -> list[DocSpec]:
    """``n_pages`` library pages (reST source of ``min_bytes``-``max_bytes``) of an unpacked
    python3.11-doc (``html_root`` = usr/share/doc/python3.11/html), seeded choice."""
    from bench.ingest.rst import rst_blocks

    sources = sorted(p for p in (html_root / "_sources" / "library").glob("*.rst.txt")
                     if min_bytes <= p.stat().st_size <= max_bytes)
    pairs = [(s, html_root / "library" / (s.name[: -len(".rst.txt")] + ".html"))
             for s in sources]
    pairs = [(s, h) for s, h in pairs if h.is_file()]
    if not pairs:
        raise BenchError(f"{html_root}: no library/*.html pages with their _sources: not an "
                         "unpacked python3.11-doc")
    rng = random.Random(seed)
    picked = sorted(rng.sample(pairs, min(n_pages, len(pairs))))
    docs = []
    for src, page in picked:
        blocks = tuple(Block(kind, text) for kind, text in
                       rst_blocks(src.read_text(encoding="utf-8")))
        if not blocks:
            continue
        name = page.stem
        title = blocks[0].text if blocks[0].kind == "heading" else name
        docs.append(DocSpec(f"pydoc-{name}", title, "python-doc", blocks,
                            raw_file=page, raw_type="html"))
    return docs
