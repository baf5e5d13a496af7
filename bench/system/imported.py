"""``system=imported``: answers produced elsewhere (Ragas, RAGChecker, FlashRAG files) as a
black-box system of the run, checked, judged and compared like bench's own answers.

Each query of the run takes its record: by ``query_id`` where the format has ids and the id is
one of the dataset's, else by the query text (whitespace-trimmed). A query without a record is
``failed`` ("no record"), never dropped; records no query of the run matches are counted in
the log. Contexts with document ids (RAGChecker ``doc_id``, FlashRAG ``id``) are the ranking
(the service's order is the rank); text-only contexts (Ragas) are the answer's context alone,
and the answered config's ranking is then empty (retrieval metrics ``missing_run``). No
latency is known for imported answers: no e2e samples are recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.config.build import OptionError
from bench.system.base import FAILED, OK, SystemQuery, SystemResponse
from bench.system.formats import FORMATS, ImportedRecord, read_records

log = logging.getLogger("bench")


class ImportedSystem:
    """``path``: the file; ``format``: ragas | ragchecker | flashrag; ``name``: the label."""

    timed = False

    def __init__(self, *, path: str | None, format: str, name: str = "imported") -> None:
        if format not in FORMATS:
            raise OptionError("format", f"must be one of {', '.join(FORMATS)}, got {format!r}")
        if not path:
            raise OptionError("path", "must name the file of answers (system.path=...)")
        if not name or any(c in name for c in "()>,"):
            raise OptionError("name", f"must be a short label without ()>, got {name!r}")
        self.path: str = path
        self.format = format
        self.name = name
        self._records: list[ImportedRecord] | None = None

    def __repr__(self) -> str:
        return f"ImportedSystem({self.format} {self.path!r})"

    def records(self) -> list[ImportedRecord]:
        if self._records is None:
            self._records = read_records(self.path, self.format)
        return self._records

    @property
    def documents(self) -> bool:
        return any(i is not None for r in self.records() for i in r.context_ids)

    @property
    def answers(self) -> bool:
        return True

    def cache_params(self) -> dict[str, object]:
        import hashlib

        self.records()  # a missing or malformed file: one line naming it
        digest = hashlib.sha256(Path(self.path).read_bytes()).hexdigest()
        return {"backend": "imported", "format": self.format, "sha256": digest}

    def preflight(self) -> None:
        n = len(self.records())  # a malformed record: one line naming file:line, exit 2
        log.info("stage %-10s %s: %d %s records", "system", self.path, n, self.format)

    def ask(self, queries: Sequence[SystemQuery],
            on_response: Callable[[SystemResponse], None] | None = None
            ) -> list[SystemResponse]:
        records = self.records()
        by_id = {r.query_id: r for r in records if r.query_id is not None}
        by_text = {" ".join(r.query.split()): r for r in records}
        out, used = [], set()
        for q in queries:
            rec = by_id.get(q.query_id) or by_text.get(" ".join(q.text.split()))
            if rec is None:
                out.append(SystemResponse(q.query_id, FAILED, 0.0,
                                          error=f"no record in {self.path} for this query"))
                continue
            used.add(rec.line)
            ids = tuple(i for i in rec.context_ids if i is not None)
            out.append(SystemResponse(
                q.query_id, OK, 0.0,
                doc_ids=ids if len(ids) == len(rec.contexts) else (),
                passages=rec.contexts, answer=rec.answer))
        extra = [r for r in records if r.line not in used]
        if extra:
            log.warning("system: %d records of %s match no query of this run (first: line %d, "
                        "%r)", len(extra), self.path, extra[0].line, extra[0].query[:60])
        return out

    def close(self) -> None:
        return None
