"""The prompt memo (``generation.memo``): a hit returns the identical ``Generation`` record,
anything that can change an answer (sampling, seed, prompt, schema, generator identity)
misses, failures are never stored, sampled requests bypass it, entries outlive the process
(artifact store) and damaged entries are regenerated."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from bench.cache.store import ArtifactStore
from bench.generation.base import ChatMessage, Generation, GenerationRequest, SamplingParams
from bench.generation.memo import MEMO_STAGE, MemoGenerator, memo_key


class Counting:
    """Answers ``<prompt> #<call number>``, so a regenerated answer differs from a memo hit."""

    def __init__(self, model: str = "m1", fail: Sequence[str] = ()) -> None:
        self.model = model
        self.fail = set(fail)
        self.asked: list[str] = []

    def cache_params(self) -> dict[str, object]:
        return {"backend": "counting", "model": self.model}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            self.asked.append(r.request_id)
            if r.messages[-1].content in self.fail:
                out.append(Generation(r.request_id, "", "timeout", "timeout", 3, 0, None, None,
                                      9.0))
                continue
            n = len(self.asked)
            out.append(Generation(r.request_id, f"{r.messages[-1].content} #{n}", "ok", "stop",
                                  3, 2, 1.5 * n, 0.5, 2.0 * n, (0.5,)))
        return out

    def close(self) -> None:
        pass


def _req(rid: str, prompt: str, *, schema: str | None = None, **sampling: object
         ) -> GenerationRequest:
    return GenerationRequest(rid, (ChatMessage("system", "s"), ChatMessage("user", prompt)),
                             SamplingParams(**sampling), schema)  # type: ignore[arg-type]


def test_hit_returns_the_identical_record_and_changes_miss(tmp_path: Path) -> None:
    inner = Counting()
    memo = MemoGenerator(inner, ArtifactStore(tmp_path))
    first = memo.generate([_req("q1", "what is a byte")])[0]
    again = memo.generate([_req("q1", "what is a byte")])[0]
    assert again == first and inner.asked == ["q1"]
    # the same prompt asked for another query: the stored record under the asker's id
    other = memo.generate([_req("q9", "what is a byte")])[0]
    assert other == replace(first, request_id="q9") and len(inner.asked) == 1
    # anything that can change the answer misses: sampling, seed, prompt, schema
    for req in (_req("q1", "what is a byte", max_tokens=7), _req("q1", "what is a byte", seed=1),
                _req("q1", "what is a bit"), _req("q1", "what is a byte", schema="{}")):
        got = memo.generate([req])[0]
        assert got.text != first.text
    assert len(inner.asked) == 5
    c = memo.counts
    assert (c.answer_hits, c.answer_misses, c.judge_hits, c.judge_misses) == (2, 4, 0, 1)
    # another generator identity misses too
    other_model = MemoGenerator(Counting(model="m2"), ArtifactStore(tmp_path))
    assert other_model.generate([_req("q1", "what is a byte")])[0].text == "what is a byte #1"
    assert other_model.counts.answer_misses == 1
    # the memo changes no key: its identity is the inner generator's
    assert memo.cache_params() == inner.cache_params()


def test_entries_outlive_the_process_and_duplicates_are_asked_once(tmp_path: Path) -> None:
    inner = Counting()
    a = MemoGenerator(inner, ArtifactStore(tmp_path))
    got = a.generate([_req("q1", "p"), _req("q2", "p"), _req("q3", "r")])
    assert inner.asked == ["q1", "q3"]  # the duplicate prompt is generated once
    assert got[1] == replace(got[0], request_id="q2")
    # a new process (fresh memo object, same store): answered from the store, same records
    inner2 = Counting()
    b = MemoGenerator(inner2, ArtifactStore(tmp_path))
    assert b.generate([_req("q1", "p"), _req("q3", "r")]) == [got[0], got[2]]
    assert inner2.asked == [] and b.counts.answer_hits == 2


def test_failures_are_not_stored_and_sampling_bypasses(tmp_path: Path) -> None:
    inner = Counting(fail=["slow"])
    memo = MemoGenerator(inner, ArtifactStore(tmp_path))
    assert memo.generate([_req("q1", "slow")])[0].status == "timeout"
    assert memo.generate([_req("q1", "slow")])[0].status == "timeout"
    assert inner.asked == ["q1", "q1"]  # asked again: a failure is not an answer
    sampled = [_req("q2", "p", temperature=0.7), _req("q2", "p", temperature=0.7)]
    out = memo.generate(sampled)
    assert out[0].text != out[1].text and memo.counts.bypassed == 2


def test_damaged_entry_is_regenerated(tmp_path: Path) -> None:
    inner = Counting()
    store = ArtifactStore(tmp_path)
    req = _req("q1", "p")
    MemoGenerator(inner, store).generate([req])
    key = memo_key(inner.cache_params(), req)
    path = store.lookup(MEMO_STAGE, key)
    assert path is not None
    (path / "generation.parquet").write_bytes(b"garbage")
    fresh = MemoGenerator(inner, store)
    assert fresh.generate([req])[0].text == "p #2"  # regenerated, not served damaged
    assert fresh.counts.answer_misses == 1


def test_memo_entries_log_at_debug_and_other_stages_at_info(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The store's per-artifact lines for memo entries go to DEBUG (the memo's summary lines
    say the same in aggregate); the level of the shared "bench" logger is left alone, so other
    stages and other threads keep their INFO lines."""
    store = ArtifactStore(tmp_path)
    memo = MemoGenerator(Counting(), store)
    caplog.set_level(logging.DEBUG, logger="bench")
    memo.generate([_req("q1", "what is a byte")])
    memo_lines = [r for r in caplog.records if MEMO_STAGE in r.getMessage()]
    assert memo_lines and all(r.levelno == logging.DEBUG for r in memo_lines)
    assert logging.getLogger("bench").level == logging.DEBUG  # as the test set it
    caplog.clear()
    store.resolve("other", version="1", params={"a": 1}, upstream=[],
                  compute=lambda tmp: (tmp / "x").write_text("x"),
                  load=lambda path: (path / "x").read_text())
    assert [r.levelno for r in caplog.records if "other" in r.getMessage()] == [logging.INFO] * 2


def test_memo_needs_greedy_decoding(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.errors import ConfigError
    from bench.generation.stage import check_generation_config

    cfg = compose_cfg(["dataset=synthetic", "generation.memo=true",
                       "generation.temperature=0.5"])
    with pytest.raises(ConfigError) as err:
        check_generation_config(cfg.generation)
    assert err.value.key == "generation.memo"
