"""Parse files in worker processes, each file under a timeout: a parser's crash or hang
costs that file (``failed`` / ``timeout``), never the run.

Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot stop a running task — a hung
parse keeps its worker, and a crashed worker breaks the whole pool. Here each worker runs
one file at a time; the parent waits on the workers' pipes with a deadline, kills a worker
whose file ran past ``timeout_s`` (recording ``timeout``) or that died (``failed``, with its
exit code), and starts a fresh one for the next file. Workers are spawned (not forked: the
run's telemetry thread must not be copied into a child mid-lock).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import resource
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from bench.parsing.base import ParsedDocument, Parser, ParseStatus, RawFile


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def parse_isolated(parser: Parser, f: RawFile) -> ParsedDocument:
    """Parse one file in THIS process: the parser's exception becomes ``failed`` with its
    message; the record carries the wall time and this process's peak RSS."""
    t0 = time.perf_counter()
    try:
        (doc,) = parser.parse([f])
    except Exception as exc:  # the file's status, with the reason: never the run's end
        doc = ParsedDocument(f.doc_id, str(f.path), parser.name, ParseStatus.FAILED,
                             reason=_one_line(exc))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return replace(doc, seconds=time.perf_counter() - t0, peak_rss_bytes=rss)


def _worker(conn: Connection, parser: Parser) -> None:
    while True:
        try:
            f = conn.recv()
        except EOFError:
            return
        if f is None:
            return
        try:
            conn.send(parse_isolated(parser, f).to_json())
        except Exception:  # a record that cannot be sent: the parent records the crash
            traceback.print_exc()
            return


@dataclass
class _Slot:
    proc: Any
    conn: Connection
    task: tuple[int, RawFile] | None = None
    deadline: float = 0.0


class ParsePool:
    """``workers`` processes running ``parser``; :meth:`run` parses files, ``done(i, doc,
    settled)`` called as each finishes (in completion order). ``settled`` is False for a
    timeout or a dead worker: what the machine did, not what the parser makes of the file
    (not to be cached)."""

    def __init__(self, parser: Parser, *, workers: int, timeout_s: float) -> None:
        self.parser = parser
        self.workers = workers
        self.timeout_s = timeout_s
        self._ctx = mp.get_context("spawn")

    def _start(self) -> _Slot:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child, self.parser), daemon=True,
                                 name="bench-parse")
        proc.start()
        child.close()
        return _Slot(proc, parent)

    @staticmethod
    def _stop(slot: _Slot, *, kill: bool) -> None:
        if kill:
            slot.proc.kill()
        else:
            with contextlib.suppress(OSError):
                slot.conn.send(None)
        slot.proc.join(5)
        if slot.proc.is_alive():
            slot.proc.kill()
            slot.proc.join()
        slot.conn.close()

    def run(self, files: Sequence[RawFile],
            done: Callable[[int, ParsedDocument, bool], None]) -> None:
        todo = list(enumerate(files))[::-1]
        slots = [self._start() for _ in range(min(self.workers, len(files)))]
        try:
            while todo or any(s.task is not None for s in slots):
                for k, s in enumerate(slots):
                    if s.task is None and todo:
                        i, f = todo.pop()
                        try:
                            s.conn.send(f)
                        except OSError:  # the worker is already gone (it could not start)
                            s.proc.join(5)
                            done(i, self._lost(f, f"the parser process died (exit code "
                                                  f"{s.proc.exitcode})", ParseStatus.FAILED),
                                 False)
                            self._stop(s, kill=True)
                            slots[k] = self._start()
                            continue
                        s.task = (i, f)
                        s.deadline = time.monotonic() + self.timeout_s
                if not any(s.task is not None for s in slots):
                    continue
                busy = [s for s in slots if s.task is not None]
                wait_s = max(0.0, min(s.deadline for s in busy) - time.monotonic())
                ready = wait([s.conn for s in busy], timeout=wait_s)
                for k, s in enumerate(slots):
                    if s.task is None:
                        continue
                    i, f = s.task
                    if s.conn in ready:
                        settled = True
                        try:
                            doc = ParsedDocument.from_json(s.conn.recv())
                        except (EOFError, OSError):
                            settled = False
                            s.proc.join(5)
                            doc = self._lost(f, f"the parser process died (exit code "
                                                f"{s.proc.exitcode})", ParseStatus.FAILED)
                            self._stop(s, kill=True)
                            slots[k] = s = self._start()
                        s.task = None
                        done(i, doc, settled)
                    elif time.monotonic() >= s.deadline:
                        self._stop(s, kill=True)
                        slots[k] = self._start()
                        done(i, self._lost(f, f"no result after {self.timeout_s:g} s: the "
                                              "parser process was killed", ParseStatus.TIMEOUT),
                             False)
        finally:
            for s in slots:
                self._stop(s, kill=s.task is not None)

    def _lost(self, f: RawFile, reason: str, status: ParseStatus) -> ParsedDocument:
        return ParsedDocument(f.doc_id, str(f.path), self.parser.name, status, reason=reason,
                              seconds=self.timeout_s if status is ParseStatus.TIMEOUT else 0.0)
