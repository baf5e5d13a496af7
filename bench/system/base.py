"""Records and Protocol of the `system` stage: a RAG service measured as a black box.

A system answers one request per golden query with what its response mapping names: the
ranked documents (ids, scores, passages), an answer, its citations, and the server's own
stage timings. Each answer is a :class:`SystemResponse`; a request that failed, timed out or
came back unparsable is one too (``status``), never an exception and never dropped.

Adding an implementation: implement :class:`BlackBox` in a module here (keyword-only
constructor = its options, no I/O at construction; ``preflight`` checks reachability and the
mapping before work), add ``conf/system/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

#: per-request statuses (``ok``: answered and parsed; the others as per_query statuses)
OK, FAILED, TIMEOUT, INVALID = "ok", "failed", "timeout", "invalid"
STATUSES = (OK, FAILED, TIMEOUT, INVALID)


@dataclass(frozen=True)
class SystemQuery:
    """What a request template may use: ``{query}``, ``{query_id}``, ``{roles}`` (the
    caller's roles, a list), ``{tenant}``."""

    query_id: str
    text: str
    roles: tuple[str, ...] = ()
    tenant: str = ""


@dataclass(frozen=True)
class SystemResponse:
    """One request's outcome. Times in ms on the client's monotonic clock: ``e2e_ms`` from
    sending the request to the parsed response (retries included), ``ttft_ms`` to the first
    streamed answer text (None: not streamed or no text), ``client_ms`` the part spent parsing
    and mapping the body here; ``server_ms`` the server's own stage timings the mapping names
    (stage, ms) — ``e2e - server - client`` is the network (and whatever the server does not
    report)."""

    query_id: str
    status: str
    e2e_ms: float
    doc_ids: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    passages: tuple[str, ...] = ()
    answer: str | None = None
    citations: tuple[str, ...] = ()
    ttft_ms: float | None = None
    client_ms: float = 0.0
    server_ms: tuple[tuple[str, float], ...] = ()
    error: str | None = None
    http_status: int | None = None
    attempts: int = 1

    @property
    def server_total_ms(self) -> float | None:
        return sum(ms for _, ms in self.server_ms) if self.server_ms else None

    @property
    def network_ms(self) -> float | None:
        """What neither the server reports nor the client spent: None without server times."""
        server = self.server_total_ms
        return None if server is None else max(self.e2e_ms - server - self.client_ms, 0.0)


class BlackBox(Protocol):
    """A RAG service asked one request per query."""

    #: the config label's name (``system(<name>)``)
    name: str
    #: its responses carry measured latencies (imported answers do not: no e2e samples)
    timed: bool

    @property
    def documents(self) -> bool:
        """The mapping names ranked documents (the stage adds a ranking config)."""
        ...

    @property
    def answers(self) -> bool:
        """The mapping names an answer (the stage adds an answered config)."""
        ...

    def cache_params(self) -> dict[str, object]:
        """What changes a response: the endpoint, the request template, the mapping."""
        ...

    def preflight(self) -> None:
        """One request (or the health URL) before any work; raises ``ConfigError`` naming
        the key (``system.url``, ``system.response.<field>``) when it fails."""
        ...

    def ask(self, queries: Sequence[SystemQuery],
            on_response: Callable[[SystemResponse], None] | None = None
            ) -> list[SystemResponse]:
        """One response per query, same order; ``on_response`` sees each as it arrives (the
        per-query cache stores it then, so a crash keeps what was answered)."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


_SCHEMA = pa.schema([
    pa.field("query_id", pa.string()), pa.field("status", pa.string()),
    pa.field("e2e_ms", pa.float64()), pa.field("doc_ids", pa.list_(pa.string())),
    pa.field("scores", pa.list_(pa.float64())), pa.field("passages", pa.list_(pa.string())),
    pa.field("answer", pa.string()), pa.field("citations", pa.list_(pa.string())),
    pa.field("ttft_ms", pa.float64()), pa.field("client_ms", pa.float64()),
    pa.field("server_stages", pa.list_(pa.string())),
    pa.field("server_stage_ms", pa.list_(pa.float64())),
    pa.field("error", pa.string()), pa.field("http_status", pa.int64()),
    pa.field("attempts", pa.int64()),
])
_TUPLES = ("doc_ids", "scores", "passages", "citations")


def save_responses(responses: Sequence[SystemResponse], path: Path) -> None:
    cols: dict[str, list[object]] = {f.name: [] for f in _SCHEMA}
    for r in responses:
        for f in _SCHEMA:
            if f.name == "server_stages":
                cols[f.name].append([s for s, _ in r.server_ms])
            elif f.name == "server_stage_ms":
                cols[f.name].append([ms for _, ms in r.server_ms])
            else:
                v = getattr(r, f.name)
                cols[f.name].append(list(v) if f.name in _TUPLES else v)
    pq.write_table(pa.table(cols, schema=_SCHEMA), path)


def load_responses(path: Path) -> list[SystemResponse]:
    out = []
    for row in pq.read_table(path).cast(_SCHEMA).to_pylist():
        stages, ms = row.pop("server_stages") or [], row.pop("server_stage_ms") or []
        out.append(SystemResponse(**{**row, **{k: tuple(row[k] or ()) for k in _TUPLES},
                                     "server_ms": tuple(zip(stages, ms, strict=True))}))
    return out


@dataclass(frozen=True)
class SystemRun:
    """Every query's response, in dataset order, and how many came from the cache."""

    responses: tuple[SystemResponse, ...]
    from_cache: int = 0
    name: str = "http"
    counts: dict[str, int] = field(default_factory=dict)
