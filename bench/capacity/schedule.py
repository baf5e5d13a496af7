"""Arrival schedules, fixed before the first request is sent (open loop).

A :class:`Schedule` is every request's intended send time (seconds from the level's start) and
the query it asks. Because the times are fixed up front, a slow system does not slow the
offered load: a request that waits for a free slot or a late send still counts its latency
from its intended time (no coordinated omission).

Shapes (``vllm bench serve``'s parameterisation, so the same numbers mean the same thing):

- ``gamma_arrivals(rate_rps, burstiness)``: inter-arrival gaps ~ Gamma(shape=burstiness,
  scale=1 / (rate * burstiness)), mean 1 / rate; ``burstiness = 1`` is a Poisson process,
  ``< 1`` burstier, ``> 1`` more uniform, ``inf`` constant gaps. The first request comes one
  gap after the start and the cumulative times are rescaled so the last one lands at
  ``n / rate`` (vLLM's normalisation: the offered rate is exactly the asked rate, whatever
  the seed).
- ``ramp_arrivals``: the rate rises from ``start_rps`` to ``end_rps`` linearly or
  exponentially per request (vLLM's ``--ramp-up-strategy``), or in ``steps`` equal stairs.
- ``trace_arrivals(path)``: replay a file of ``(timestamp_s, query_id)`` rows (CSV with a
  header, or JSON lines), shifted so the first row is at 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from bench.data.jsonl import read_text
from bench.errors import InputError


@dataclass(frozen=True)
class Schedule:
    """``send_s[i]``: request i's intended send time, seconds from the start (non-decreasing);
    ``query[i]``: the index of the query it asks. ``rate_rps``: the nominal offered rate
    (requests / last send time for a rate shape; the trace's own mean for a replay)."""

    kind: Literal["poisson", "gamma", "constant", "ramp", "trace"]
    send_s: np.ndarray
    query: np.ndarray
    rate_rps: float
    burstiness: float | None = None
    description: str = ""
    #: ``seen[i]``: request i's query was sent to this target before (earlier in the study
    #: or earlier in this level): a server cache may answer it (None: not tracked)
    seen: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.send_s.shape != self.query.shape or self.send_s.ndim != 1:
            raise ValueError("send_s and query must be 1-d arrays of one length")
        if self.seen is not None and self.seen.shape != self.query.shape:
            raise ValueError("seen must have one flag per request")
        if self.send_s.size and (np.diff(self.send_s) < 0).any():
            raise ValueError("send times must be non-decreasing")

    def __len__(self) -> int:
        return int(self.send_s.size)

    @property
    def span_s(self) -> float:
        return float(self.send_s[-1]) if self.send_s.size else 0.0

    def part(self, worker: int, workers: int) -> Schedule:
        """Every ``workers``-th request from ``worker`` (a distributed load engine's share:
        the union of all shares is the schedule, each request in one share)."""
        keep = np.arange(worker, len(self), workers)
        return Schedule(self.kind, self.send_s[keep], self.query[keep], self.rate_rps / workers,
                        self.burstiness, f"{self.description} [share {worker}/{workers}]",
                        None if self.seen is None else self.seen[keep])

    def with_queries(self, query: np.ndarray, seen: np.ndarray) -> Schedule:
        """The same send times asking other queries (a :class:`QueryStream`'s draw)."""
        return Schedule(self.kind, self.send_s, query.astype(np.int64), self.rate_rps,
                        self.burstiness, self.description, seen.astype(bool))


class QueryStream:
    """Which queries each level asks, over a whole study against one target: every draw
    takes the least-used queries first (ties in a seeded random order), so a level asks no
    query twice while the golden set has unused ones, and repeats — when a study needs more
    requests than there are queries — are spread evenly and flagged (``Schedule.seen``): a
    server cache then shows as a latency gap between first-seen and repeated queries, not
    as capacity (VectorDBBench #385: replaying the same 1k queries inflated QPS 230x).

    ``draw(n)`` returns the queries and their seen flags and counts them as sent; ``mark``
    counts queries sent by another path (the closed-loop passes). The draw is a pure
    function of the seed and the call sequence, so a resumed study draws the same queries."""

    def __init__(self, n_queries: int, *, seed: int = 0) -> None:
        if n_queries < 1:
            raise ValueError("n_queries must be >= 1")
        self.counts = np.zeros(n_queries, dtype=np.int64)
        self.rng = np.random.default_rng(seed + 7919)

    @property
    def n_queries(self) -> int:
        return int(self.counts.size)

    def draw(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        order = np.lexsort((self.rng.random(self.n_queries), self.counts))
        q = order[np.arange(n) % self.n_queries]
        seen = self.counts[q] > 0
        seen |= np.arange(n) >= self.n_queries  # a second pass within this level
        self.counts += np.bincount(q, minlength=self.n_queries)
        return q.astype(np.int64), seen

    def mark(self, queries: np.ndarray) -> None:
        self.counts += np.bincount(np.asarray(queries, dtype=np.int64),
                                   minlength=self.n_queries)

    def fresh(self, schedule: Schedule) -> Schedule:
        """``schedule``'s send times with this stream's next queries."""
        q, seen = self.draw(len(schedule))
        return schedule.with_queries(q, seen)


def _queries(n: int, n_queries: int, seed: int) -> np.ndarray:
    """Query i of the schedule: a seeded permutation of the queries, cycled, so every query
    is asked equally often (the per-query pairing against an unloaded run needs that)."""
    if n_queries < 1:
        raise ValueError("n_queries must be >= 1")
    perm = np.random.default_rng(seed + 1).permutation(n_queries)
    return perm[np.arange(n) % n_queries].astype(np.int64)


def _check(rate_rps: float, n: int, burstiness: float) -> None:
    if not rate_rps > 0 or not math.isfinite(rate_rps):
        raise ValueError(f"rate_rps must be a finite number > 0, got {rate_rps}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not burstiness > 0:
        raise ValueError(f"burstiness must be > 0, got {burstiness}")


def _gaps(rates: np.ndarray, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    if math.isinf(burstiness):
        return 1.0 / rates
    return rng.gamma(shape=burstiness, scale=1.0 / (rates * burstiness))


def gamma_arrivals(*, rate_rps: float, n: int, n_queries: int, burstiness: float = 1.0,
                   seed: int = 0) -> Schedule:
    """``n`` requests at ``rate_rps`` with gamma gaps (see the module docstring)."""
    _check(rate_rps, n, burstiness)
    rng = np.random.default_rng(seed)
    t = np.cumsum(_gaps(np.full(n, rate_rps), burstiness, rng))
    t *= (n / rate_rps) / t[-1]  # vLLM: the last request at n / rate exactly
    kind: Literal["poisson", "gamma", "constant"] = (
        "poisson" if burstiness == 1.0 else "constant" if math.isinf(burstiness) else "gamma")
    return Schedule(kind, t, _queries(n, n_queries, seed), rate_rps, burstiness,
                    f"{kind} {rate_rps:g} req/s" + ("" if kind == "poisson"
                                                    else f", burstiness {burstiness:g}"))


def poisson_arrivals(*, rate_rps: float, n: int, n_queries: int, seed: int = 0) -> Schedule:
    return gamma_arrivals(rate_rps=rate_rps, n=n, n_queries=n_queries, burstiness=1.0,
                          seed=seed)


def ramp_arrivals(*, start_rps: float, end_rps: float, n: int, n_queries: int,
                  strategy: Literal["linear", "exponential", "step"] = "linear",
                  steps: int = 4, burstiness: float = 1.0, seed: int = 0) -> Schedule:
    """Request i is sent at the rate reached after a share i / (n - 1) of the ramp (vLLM's
    ``--ramp-up-strategy linear|exponential``); ``step``: ``steps`` stairs of equal request
    counts from start to end. No rescaling (vLLM rescales constant rates only)."""
    _check(min(start_rps, end_rps), n, burstiness)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    progress = np.arange(n) / max(n - 1, 1)
    if strategy == "linear":
        rates = start_rps + (end_rps - start_rps) * progress
    elif strategy == "exponential":
        rates = start_rps * (end_rps / start_rps) ** progress
    elif strategy == "step":
        stair = np.minimum((progress * steps).astype(np.int64), steps - 1)
        rates = start_rps + (end_rps - start_rps) * stair / max(steps - 1, 1)
    else:
        raise ValueError(f"unknown ramp strategy {strategy!r}: linear, exponential or step")
    t = np.cumsum(_gaps(rates, burstiness, np.random.default_rng(seed)))
    return Schedule("ramp", t, _queries(n, n_queries, seed), n / float(t[-1]), burstiness,
                    f"{strategy} ramp {start_rps:g} -> {end_rps:g} req/s")


def trace_arrivals(path: Path, query_ids: list[str]) -> Schedule:
    """Replay ``path``: rows of ``timestamp_s,query_id`` (CSV with that header) or JSON lines
    ``{"timestamp_s": ..., "query_id": ...}``. A row naming an unknown query, a bad number or
    a timestamp going backwards is an input error naming file:line."""
    index = {q: i for i, q in enumerate(query_ids)}
    rows: list[tuple[float, int]] = []
    # UTF-8 (a BOM dropped); invalid bytes or a missing file: one line naming file(:line)
    lines = read_text(path).splitlines()
    jsonl = path.suffix in (".jsonl", ".json")
    start = 0
    if not jsonl:
        if not lines or [c.strip() for c in lines[0].split(",")] != ["timestamp_s", "query_id"]:
            raise InputError(str(path), 1, "the header must be timestamp_s,query_id")
        start = 1
    for no, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        try:
            if jsonl:
                obj = json.loads(line)
                ts, qid = float(obj["timestamp_s"]), str(obj["query_id"])
            else:
                a, b = line.split(",", 1)
                ts, qid = float(a), b.strip()
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(str(path), no, f"not a (timestamp_s, query_id) row: {exc}") from None
        if qid not in index:
            raise InputError(str(path), no, f"unknown query_id {qid!r}")
        if not math.isfinite(ts) or (rows and ts < rows[-1][0]):
            raise InputError(str(path), no, "timestamps must be finite and non-decreasing")
        rows.append((ts, index[qid]))
    if not rows:
        raise InputError(str(path), 0, "no rows")
    t = np.asarray([r[0] for r in rows]) - rows[0][0]
    q = np.asarray([r[1] for r in rows], dtype=np.int64)
    rate = len(rows) / float(t[-1]) if t[-1] > 0 else float("inf")
    return Schedule("trace", t, q, rate, None, f"trace {path.name} ({len(rows)} requests)")


def closed_loop_note(users: int) -> str:
    return (f"closed loop, {users} users: each waits for its answer before sending the next, "
            "so the offered load falls when the system slows (latency counts from the actual "
            "send: queueing in front of the system is not seen)")
