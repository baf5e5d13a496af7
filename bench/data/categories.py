"""Query categories from outside the dataset: a mapping file or a field of the query rows.

The user-data loaders (``beir``, ``golden``, ``csv``) take ``categories=PATH`` (JSONL rows
``{"query_id": ..., "category": ...}``; :func:`with_categories`, or :func:`read_category_map`
then :func:`apply_categories`), so per-category tables work on data that carries no category
(BEIR) or other categories than wanted, without converting it; a mapped category replaces the
row's own. A query the mapping does not name
gets :data:`UNCATEGORIZED` and is counted in a log line; a mapping row naming an unknown query,
a repeated query or a bad row raises ``InputError`` (file:line).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping

from bench.data.base import Dataset, Query
from bench.data.jsonl import Where, iter_jsonl, json_str

log = logging.getLogger(__name__)

UNCATEGORIZED = "uncategorized"


def read_category_map(path: str, known: Collection[str]) -> dict[str, str]:
    """query_id -> category from a JSONL mapping file; ids must be in ``known``."""
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        for key in ("query_id", "category"):
            if key not in obj:
                raise where.error(f"missing required field {key!r}")
        qid = json_str(obj["query_id"], "query_id", where)
        if qid in first:
            raise where.error(f"query_id {qid!r} is mapped twice (first on line {first[qid]})")
        if qid not in known:
            raise where.error(f"query_id {qid!r} is not a query of this dataset")
        first[qid] = where.line
        out[qid] = json_str(obj["category"], "category", where)
    return out


def field_category(obj: Mapping[str, object], field: str, where: Where) -> str | None:
    """The value at dotted ``field`` of a query row (``metadata.type``), or None if absent."""
    node: object = obj
    for part in field.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    if node is None:
        return None
    return json_str(node, field, where) if not isinstance(node, int | float) else str(node)


def apply_categories(queries: tuple[Query, ...], categories: Mapping[str, str],
                     source: str) -> tuple[Query, ...]:
    """``queries`` with their category from ``categories`` (UNCATEGORIZED when missing)."""
    missing = sum(1 for q in queries if q.query_id not in categories)
    if missing:
        log.warning("%s: %d of %d queries have no category; they are %r", source, missing,
                    len(queries), UNCATEGORIZED)
    return tuple(dataclasses.replace(q, category=categories.get(q.query_id, UNCATEGORIZED))
                 for q in queries)


def with_categories(ds: Dataset, path: str | None) -> Dataset:
    """``ds`` with the categories of mapping file ``path`` (unchanged when None); the
    fingerprint follows the new categories."""
    if not path:
        return ds
    mapping = read_category_map(path, {q.query_id for q in ds.queries})
    queries = apply_categories(ds.queries, mapping, path)
    return dataclasses.replace(ds, queries=queries, fingerprint="")
