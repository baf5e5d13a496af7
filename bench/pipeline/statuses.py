"""The one carrier of per-query statuses and its merge rule.

Which statuses carry a value is declared by the stages (``bench.pipeline.stages``
``valued_statuses``); this module reads the stage list, the stage list never reads it.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.pipeline.stages import valued_statuses

#: per-query statuses of one value flowing down a chain: query id -> its status when not
#: ``scored`` (a valued one such as ``budget_exhausted``, or one without a value such as
#: ``failed``). The one carrier of per-query statuses: a pool, query embeddings and rerank
#: scores all hold one, keyed by query id, joined with :func:`merge_statuses`.
QueryStatuses = Mapping[str, str]


def merge_statuses(*maps: QueryStatuses | None) -> dict[str, str]:
    """The statuses of a value made from values carrying ``maps`` (upstream first, then the
    stage's own): per query, a status WITHOUT a value (its work did not complete: no
    ranking downstream either, never a ranking of what was left) beats one with a value;
    among statuses of the same kind the first wins."""
    valued = valued_statuses()
    out: dict[str, str] = {}
    for m in maps:
        for q, st in (m or {}).items():
            have = out.get(q)
            if have is None or (have in valued and st not in valued):
                out[q] = st
    return out


def unvalued(statuses: QueryStatuses | None) -> dict[str, str]:
    """The queries of ``statuses`` that carry no value (``failed``, ``timeout``, ...)."""
    valued = valued_statuses()
    return {q: st for q, st in (statuses or {}).items() if st not in valued}
