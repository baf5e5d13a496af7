"""Answer identical prompts once: a content-addressed memo in front of a ``Generator``.

With greedy decoding an identical request gives the same answer, and most settings of an ANN
sweep hand the generator the same passages as the exact search: the same prompt is asked
again and again, by the answer step and by the judge. ``MemoGenerator`` wraps the run's
generator (the judge asks through the same wrapper) and answers a request it has seen from
the memo.

The memo key is sha256 over (the generator's ``cache_params`` — model identity, weights hash,
dtype, batch size —, the full ``SamplingParams`` including the seed, the exact prompt
messages and the JSON schema); the request id is not in it (a hit returns the stored record
with the asker's request id, every other field as generated, latencies included: what that
prompt cost when it was generated). Only greedy requests (temperature 0) are memoised, and
only answers whose status is ``ok`` are stored: a failure or a timeout is asked again.

Entries live in the artifact store (stage ``generate_memo``: one Parquet row per entry,
checksummed, atomically published), so the memo spans the configs of a run, the jobs of a
sweep and later runs. It changes no cache key: a stage's key names what it computes, and a
memo hit is the answer the same generator gave to the same prompt. One caveat: on a batched
backend (transformers_cpu left-pads) a prompt's answer can depend on the batch it was in
(float rounding); the memo returns the answer of the first batch the prompt was generated
in, so identical prompts get identical answers within and across configs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bench.cache.store import ArtifactStore, make_key
from bench.generation.base import Generation, GenerationRequest, Generator
from bench.generation.files import load_generations, save_generations

log = logging.getLogger("bench")

MEMO_STAGE = "generate_memo"
MEMO_VERSION = "1"
_FILE = "generation.parquet"


@dataclass
class MemoCounts:
    """Requests answered from the memo (``hits``) and by the generator (``misses``), split
    into answers (free text) and judge calls (schema-constrained)."""

    answer_hits: int = 0
    answer_misses: int = 0
    judge_hits: int = 0
    judge_misses: int = 0
    #: requests the memo does not apply to (sampled decoding)
    bypassed: int = 0

    def snapshot(self) -> MemoCounts:
        return replace(self)

    def since(self, before: MemoCounts) -> MemoCounts:
        return MemoCounts(*(a - b for a, b in zip(asdict(self).values(),
                                                  asdict(before).values(), strict=True)))


def sum_counts(counts: Sequence[MemoCounts]) -> MemoCounts:
    total = MemoCounts()
    for c in counts:
        for name, value in asdict(c).items():
            setattr(total, name, getattr(total, name) + value)
    return total


def memo_params(generator_params: dict[str, object], req: GenerationRequest
                ) -> dict[str, object]:
    """What a memo entry is keyed by (the request id is not part of it)."""
    return {
        "generator": generator_params,
        "sampling": asdict(req.sampling),
        "messages": [[m.role, m.content] for m in req.messages],
        "json_schema": req.json_schema,
    }


def memo_key(generator_params: dict[str, object], req: GenerationRequest) -> str:
    return make_key(MEMO_STAGE, MEMO_VERSION, memo_params(generator_params, req), [])


class MemoGenerator:
    """A ``Generator`` that answers seen requests from the memo and asks ``inner`` the rest
    (in one batch, duplicates within the batch asked once)."""

    def __init__(self, inner: Generator, store: ArtifactStore | None) -> None:
        self.inner = inner
        self.store = store
        self.counts = MemoCounts()
        self._mem: dict[str, Generation] = {}
        self._params: dict[str, object] | None = None

    def __repr__(self) -> str:
        return f"MemoGenerator({self.inner!r})"

    # Generator protocol: identity and tokenizer are the inner generator's, so no key moves
    def cache_params(self) -> dict[str, object]:
        return self.inner.cache_params()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def close(self) -> None:
        self.inner.close()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if self._params is None:
            self._params = dict(self.inner.cache_params())
        out: list[Generation | None] = [None] * len(requests)
        todo: dict[str, list[int]] = {}  # memo key -> positions asking it
        params: dict[str, dict[str, object]] = {}
        direct: list[int] = []
        for i, req in enumerate(requests):
            if req.sampling.temperature > 0:
                direct.append(i)
                continue
            p = memo_params(self._params, req)
            key = make_key(MEMO_STAGE, MEMO_VERSION, p, [])
            params[key] = p
            hit = self._get(key)
            if hit is not None:
                out[i] = replace(hit, request_id=req.request_id)
                self._count(req, hit=True)
            else:
                todo.setdefault(key, []).append(i)
        asked = [requests[pos[0]] for pos in todo.values()] + [requests[i] for i in direct]
        gens = self.inner.generate(asked) if asked else []
        if len(gens) != len(asked):
            raise RuntimeError(f"generator returned {len(gens)} answers for {len(asked)}")
        for (key, positions), gen in zip(todo.items(), gens, strict=False):
            if gen.status == "ok":
                self._put(key, params[key], gen)
            for n, i in enumerate(positions):
                out[i] = replace(gen, request_id=requests[i].request_id)
                self._count(requests[i], hit=n > 0)
        for i, gen in zip(direct, gens[len(todo):], strict=True):
            out[i] = gen
            self.counts.bypassed += 1
        return [g for g in out if g is not None]

    def _count(self, req: GenerationRequest, *, hit: bool) -> None:
        c = self.counts
        if req.json_schema is None:
            c.answer_hits, c.answer_misses = c.answer_hits + hit, c.answer_misses + (not hit)
        else:
            c.judge_hits, c.judge_misses = c.judge_hits + hit, c.judge_misses + (not hit)

    def _get(self, key: str) -> Generation | None:
        got = self._mem.get(key)
        if got is not None or self.store is None:
            return got
        path = self.store.lookup(MEMO_STAGE, key)
        if path is None or self.store.problem(path) is not None:
            return None  # absent, or damaged: generated again and published anew
        try:
            got = _load(path)
        except Exception as exc:  # checksums matched but unreadable: treat as absent
            log.warning("generation memo: %s unreadable (%s); generating again", key[:12], exc)
            return None
        self._mem[key] = got
        return got

    def _put(self, key: str, params: dict[str, object], gen: Generation) -> None:
        self._mem[key] = gen
        if self.store is None:
            return
        def write(tmp: Path) -> None:
            save_generations([gen], tmp / _FILE)

        # a concurrent writer of the same key publishes first: its entry is kept and ours
        # dropped (both are this generator's greedy answer to this prompt). The store's two
        # lines per entry go to DEBUG: the memo summary lines say the same in aggregate.
        stored, stored_key, _ = self.store.resolve(MEMO_STAGE, version=MEMO_VERSION,
                                                   params=params, upstream=[], compute=write,
                                                   load=_load, log_level=logging.DEBUG)
        assert stored_key == key, "memo entries are found by the key they are stored under"
        self._mem[key] = stored

    def log_summary(self, what: str) -> None:
        c = self.counts
        log.info("generation memo (%s): answers %d from memo, %d generated; judge calls %d "
                 "from memo, %d generated%s", what, c.answer_hits, c.answer_misses, c.judge_hits,
                 c.judge_misses, f"; {c.bypassed} sampled requests not memoised"
                 if c.bypassed else "")


def _load(path: Path) -> Generation:
    (gen,) = load_generations(path / _FILE)
    return gen


def memoised(generator: Generator, cache_dir: str | Path) -> Generator:
    """``generator`` behind the prompt memo (``generation.memo``), stored in the run's cache
    (``cache_dir``)."""
    return MemoGenerator(generator, ArtifactStore(Path(cache_dir).expanduser()))


def unmemoised(generator: Generator) -> Generator:
    """The generator a served (per-request) call uses: a memo's inner one, since a memo
    would replay a stored latency as this request's."""
    return generator.inner if isinstance(generator, MemoGenerator) else generator
