"""Reformulations supplied with the data: a JSONL file of ``{query_id, reformulations}``.

Each row lists, in order, the queries the loop may search after the query itself (a human's
or another system's rewrites, sub-questions, follow-ups). A query without a row has none. A
row that is not an object with exactly those fields, a repeated id, or a reformulation that
is not a non-empty string is an input error naming ``file:line``; a row naming a query the
dataset does not have is refused when the run is planned (``check``), before any work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection

from bench.data.base import Query
from bench.data.jsonl import iter_jsonl, json_str, require_file
from bench.errors import InputError


class SuppliedReformulations:
    name = "supplied"

    def __init__(self, *, path: str) -> None:
        self.path = str(require_file(path))
        self.by_query: dict[str, tuple[str, ...]] = {}
        self._lines: dict[str, int] = {}
        digest = hashlib.sha256()
        for where, obj in iter_jsonl(self.path):
            extra = sorted(set(obj) - {"query_id", "reformulations"})
            if extra or "query_id" not in obj or "reformulations" not in obj:
                raise where.error("a row is {query_id, reformulations: [str, ...]}"
                                  + (f"; unknown fields {extra}" if extra else ""))
            qid = json_str(obj["query_id"], "query_id", where)
            if qid in self.by_query:
                raise where.error(f"query_id {qid!r} is listed twice (first on line "
                                  f"{self._lines[qid]})")
            texts = obj["reformulations"]
            if not isinstance(texts, list):
                raise where.error("reformulations must be a list of strings")
            out = tuple(json_str(t, "reformulations", where).strip() for t in texts)
            if any(not t for t in out):
                raise where.error("reformulations must be non-empty strings")
            self.by_query[qid] = out
            self._lines[qid] = where.line
            digest.update(repr((qid, out)).encode())
        self.digest = digest.hexdigest()[:16]

    def cache_params(self) -> dict[str, object]:
        return {"content": self.digest}

    def check(self, known: Collection[str]) -> None:
        """Every row names a query of the dataset (the run's loaded queries)."""
        for qid, line in self._lines.items():
            if qid not in known:
                raise InputError(self.path, line, f"query_id {qid!r} is not a query of this "
                                                  "dataset")

    def reformulate(self, query: Query) -> tuple[str, ...]:
        return self.by_query.get(query.query_id, ())
