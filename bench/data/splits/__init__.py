"""Separate query sets: development, judge calibration, release, monitoring.

A query's split comes from its row (golden JSONL ``"split"``, a CSV ``split`` column) or from a
split file given as ``subset.splits=FILE`` for any dataset (JSONL rows ``{"query_id": ...,
"split": ...}``, which replace the rows' own). ``bench.data.subset`` then evaluates one split
(``release`` by default). ``python -m bench.data.splits make`` writes a split file:

- grouped: queries that share a relevant document, or are near-duplicates of each other, form
  one group (connected components), and a group goes to one split whole, so no document's
  questions and no near-duplicate pair are in two splits;
- seeded and stratified: groups are visited in the order of a hash of (seed, smallest query
  id) and each goes to the split furthest below its target share among the queries of the
  group's category, so every split gets its share of every category.

:func:`contamination` is the check every run makes on the loaded dataset (warnings in the
log, run.json ``contamination`` and report.md):

- a query and its near-duplicate in two splits. Near-duplicate, concretely: the two texts are
  identical after normalisation (NFKC, case-folded, every run of non-alphanumeric characters a
  single space), or the Jaccard similarity of their normalised token SETS is >= 0.9
  (``NEAR_DUPLICATE_JACCARD``);
- a relevant document with questions in two splits (the split was not grouped);
- a release-split query id that a run's config names (any string value of the resolved
  config equal to the id, the regression gates' ``critical`` list excepted): a setting chosen
  by looking at release queries (a tuning run's probe list, a categories map) contaminates
  the release figures.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.data.base import Dataset, Query
from bench.data.jsonl import iter_jsonl, json_str
from bench.errors import BenchError

log = logging.getLogger("bench")

SPLITS = ("development", "calibration", "release", "monitoring")
RELEASE = "release"
NEAR_DUPLICATE_JACCARD = 0.9
#: config keys that legitimately name release queries (the gate that guards them)
_EXEMPT_KEYS = ("regression.critical.query_ids",)
#: at most this many findings of one kind are listed; the rest are counted
_SHOWN = 20


def check_split(value: str, where: str) -> str:
    """A split name, exactly one of ``SPLITS``; ``where`` names the file:line or key."""
    if value not in SPLITS:
        raise BenchError(f"{where}: unknown split {value!r}; use one of {', '.join(SPLITS)}")
    return value


def read_split_map(path: str | Path, known: Iterable[str]) -> dict[str, str]:
    """query_id -> split from a JSONL split file; every row names a known query once."""
    known = set(known)
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        for key in ("query_id", "split"):
            if key not in obj:
                raise where.error(f"missing required field {key!r}")
        extra = sorted(set(obj) - {"query_id", "split"})
        if extra:
            raise where.error(f"unknown fields {extra}; a split row is {{query_id, split}}")
        qid = json_str(obj["query_id"], "query_id", where)
        if qid in first:
            raise where.error(f"query_id {qid!r} is listed twice (first on line {first[qid]})")
        if qid not in known:
            raise where.error(f"query_id {qid!r} is not a query of this dataset")
        split = json_str(obj["split"], "split", where)
        if split not in SPLITS:
            raise where.error(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
        first[qid] = where.line
        out[qid] = split
    return out


def with_splits(ds: Dataset, path: str | None) -> Dataset:
    """``ds`` with the splits of file ``path`` (unchanged when None); a query the file does
    not name is in no split (counted in a log line)."""
    if not path:
        return ds
    mapping = read_split_map(path, (q.query_id for q in ds.queries))
    missing = sum(1 for q in ds.queries if q.query_id not in mapping)
    if missing:
        log.warning("%s: %d of %d queries are in no split (a run on one split leaves them "
                    "out)", path, missing, len(ds.queries))
    queries = tuple(dataclasses.replace(q, split=mapping.get(q.query_id, ""))
                    for q in ds.queries)
    return dataclasses.replace(ds, queries=queries, fingerprint=ds.fingerprint)


# --- near-duplicates -----------------------------------------------------------------------

_NON_ALNUM = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    """NFKC, case-folded, runs of non-alphanumeric characters as one space, stripped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _NON_ALNUM.sub(" ", folded).strip()


def near_duplicates(texts: Mapping[str, str], threshold: float = NEAR_DUPLICATE_JACCARD
                    ) -> list[tuple[str, str, float]]:
    """Pairs ``(id_a, id_b, jaccard)`` (id_a < id_b) whose normalised texts are identical
    (reported as 1.0) or whose token sets have Jaccard >= ``threshold``.

    Exact by prefix filtering: with tokens ordered rare-first, two sets with Jaccard >= t
    share a token among the first ``|A| - ceil(t |A|) + 1`` of each, so only pairs sharing
    such a token are compared (no all-pairs scan on a large query set).
    """
    norm = {q: normalise(t) for q, t in texts.items()}
    sets = {q: frozenset(n.split()) for q, n in norm.items()}
    freq = Counter(tok for s in sets.values() for tok in s)
    out: dict[tuple[str, str], float] = {}
    by_text: dict[str, list[str]] = defaultdict(list)
    for q, n in norm.items():
        by_text[n].append(q)
    for text, group in by_text.items():
        if not text:
            continue
        for i, a in enumerate(sorted(group)):
            for b in sorted(group)[i + 1:]:
                out[(a, b)] = 1.0
    index: dict[str, list[str]] = defaultdict(list)
    for q in sorted(sets, key=lambda q: len(sets[q])):
        s = sets[q]
        if not s:
            continue
        ordered = sorted(s, key=lambda tok: (freq[tok], tok))
        prefix = ordered[:len(s) - math.ceil(threshold * len(s) - 1e-12) + 1]
        seen: set[str] = set()
        for tok in prefix:
            for other in index[tok]:
                if other in seen:
                    continue
                seen.add(other)
                o = sets[other]
                if len(o) < threshold * len(s):  # visited shortest first: |o| <= |s|
                    continue
                j = len(s & o) / len(s | o)
                if j >= threshold:
                    key = (other, q) if other < q else (q, other)
                    out.setdefault(key, j)
            index[tok].append(q)
    return sorted((a, b, j) for (a, b), j in out.items())


# --- the contamination check ---------------------------------------------------------------

@dataclass(frozen=True)
class Contamination:
    """What the check found (empty tuples: nothing). Each finding is one readable line."""

    near_duplicates: tuple[str, ...] = ()
    shared_documents: tuple[str, ...] = ()
    release_ids_in_config: tuple[str, ...] = ()
    #: counts before ``_SHOWN`` capped the lists
    n_near_duplicates: int = 0
    n_shared_documents: int = 0

    @property
    def found(self) -> bool:
        return bool(self.near_duplicates or self.shared_documents
                    or self.release_ids_in_config)

    def warnings(self) -> list[str]:
        """One line per kind of finding, for the log and the report."""
        out = []
        if self.near_duplicates:
            out.append(f"{self.n_near_duplicates} query pair(s) in two splits are "
                       f"near-duplicates: {'; '.join(self.near_duplicates)}"
                       + _more(self.n_near_duplicates))
        if self.shared_documents:
            out.append(f"{self.n_shared_documents} relevant document(s) have questions in "
                       f"two splits: {'; '.join(self.shared_documents)}"
                       + _more(self.n_shared_documents))
        if self.release_ids_in_config:
            out.append("the run's config names release-split queries: "
                       + "; ".join(self.release_ids_in_config))
        return out

    def to_json(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "warnings": self.warnings()}


def _more(n: int) -> str:
    return f" (and {n - _SHOWN} more)" if n > _SHOWN else ""


def contamination(queries: Sequence[Query], config: Mapping[str, object] | None = None, *,
                  threshold: float = NEAR_DUPLICATE_JACCARD) -> Contamination:
    """The checks of the module docstring over ``queries`` (their ``split``), and over the
    string values of ``config`` (a resolved run config) for release-split query ids."""
    split = {q.query_id: q.split for q in queries if q.split}
    if not split:
        return Contamination()
    texts = {q.query_id: q.text for q in queries if q.split}
    dups = [f"{a} ({split[a]}) ~ {b} ({split[b]}): "
            + ("identical after normalisation" if j == 1.0 else f"token Jaccard {j:.2f}")
            for a, b, j in near_duplicates(texts, threshold) if split[a] != split[b]]
    by_doc: dict[str, dict[str, str]] = defaultdict(dict)
    for q in queries:
        if q.split:
            for doc, _ in q.qrels:
                by_doc[doc].setdefault(q.split, q.query_id)
    shared = [f"{doc}: " + ", ".join(f"{qid} ({s})" for s, qid in sorted(per.items()))
              for doc, per in sorted(by_doc.items()) if len(per) > 1]
    release = {q for q, s in split.items() if s == RELEASE}
    named = sorted({f"{key} = {value}" for key, value in _strings(config or {}, "")
                    if value in release and key not in _EXEMPT_KEYS
                    and not key.startswith(tuple(f"{k}[" for k in _EXEMPT_KEYS))})
    return Contamination(tuple(dups[:_SHOWN]), tuple(shared[:_SHOWN]), tuple(named),
                         len(dups), len(shared))


def _strings(node: object, key: str) -> Iterator[tuple[str, str]]:
    """(dotted key, value) of every string leaf of a nested config."""
    if isinstance(node, str):
        yield key, node
    elif isinstance(node, Mapping):
        for k, v in node.items():
            yield from _strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list | tuple):
        for i, v in enumerate(node):
            yield from _strings(v, f"{key}[{i}]")


# --- making a split file -------------------------------------------------------------------

def groups(queries: Sequence[Query], threshold: float = NEAR_DUPLICATE_JACCARD
           ) -> list[list[str]]:
    """Query ids in groups that must share a split: connected by a relevant document or by
    being near-duplicates (union-find), each group sorted, groups in no particular order."""
    parent = {q.query_id: q.query_id for q in queries}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first_by_doc: dict[str, str] = {}
    for q in queries:
        for doc, _ in q.qrels:
            if doc in first_by_doc:
                union(first_by_doc[doc], q.query_id)
            else:
                first_by_doc[doc] = q.query_id
    for a, b, _ in near_duplicates({q.query_id: q.text for q in queries}, threshold):
        union(a, b)
    out: dict[str, list[str]] = defaultdict(list)
    for q in queries:
        out[find(q.query_id)].append(q.query_id)
    return [sorted(g) for g in out.values()]


def make_splits(queries: Sequence[Query], shares: Mapping[str, float], *, seed: int = 0
                ) -> dict[str, str]:
    """query_id -> split, grouped, seeded and stratified by category (module docstring)."""
    from bench.data.foldoc.text import stable_hash

    names = list(shares)
    total = sum(shares.values())
    target = {s: shares[s] / total for s in names}
    category = {q.query_id: q.category for q in queries}
    counts: dict[str, Counter[str]] = defaultdict(Counter)  # category -> split -> queries
    overall: Counter[str] = Counter()
    out: dict[str, str] = {}
    for g in sorted(groups(queries), key=lambda g: (stable_hash(seed, "split", g[0]), g[0])):
        # the group's category: its most common, ties by name
        tally = Counter(category[q] for q in g)
        cat = min(tally, key=lambda c: (-tally[c], c))
        have = counts[cat]
        after, after_all = sum(have.values()) + len(g), sum(overall.values()) + len(g)
        best = max(names, key=lambda s: (target[s] * after - have[s],
                                         target[s] * after_all - overall[s], -names.index(s)))
        have[best] += len(g)
        overall[best] += len(g)
        out.update(dict.fromkeys(g, best))
    return out
